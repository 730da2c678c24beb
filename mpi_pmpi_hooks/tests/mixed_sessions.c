/*
 * mixed_sessions.c — MPI_Init and a session in one process: MPI_Init, 2 MPI_Barrier on
 * MPI_COMM_WORLD, a session and a communicator over mpi://WORLD, 4 MPI_Allreduce of one
 * int on it, MPI_Comm_free, then MPI_Finalize with the session still open; then
 * MPI_Session_finalize, or (argument "open") none: the process ends with its session
 * open (MPICH 4.0.2 then loses the output of a rank now and then, without the hooks too).
 * Run with 2 ranks (MPICH 4).
 *
 * Expected per rank, all in the final frame (at MPI_Session_finalize, or at exit): MPI_Init
 * 1, MPI_Barrier 2, MPI_Session_init 1, MPI_Group_from_session_pset 1,
 * MPI_Comm_create_from_group 1, MPI_Allreduce 4 (16 bytes), MPI_Comm_free 1,
 * MPI_Finalize 1, MPI_Session_finalize 1 (0 with "open"). Prints "rank R: done".
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, one = 1, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 2; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "stacklens.mixed", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL,
                               &comm);
    MPI_Group_free(&group);
    for (int i = 0; i < 4; i++)
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    if (!(argc > 1 && strcmp(argv[1], "open") == 0))
        MPI_Session_finalize(&session);
    printf("rank %d: done\n", rank);
    return sum == 2 ? 0 : 1;
}
