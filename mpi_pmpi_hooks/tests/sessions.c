/*
 * sessions.c — an MPI-4 program without MPI_Init: two sessions open at once,
 * each giving a communicator over the mpi://WORLD process set
 * (MPI_Group_from_session_pset + MPI_Comm_create_from_group), closed in the
 * reverse order. Run with 2 ranks (MPICH 4).
 *
 * EXPECTED TOTALS. On the first session's communicator rank 0 sends 10
 * messages of 100 bytes (MPI_BYTE) to rank 1 (MPI_Send / MPI_Recv), then one
 * MPI_Barrier; on the second's every rank calls MPI_Allreduce 5 times on one
 * int. Per rank: MPI_Session_init 2, MPI_Group_from_session_pset 2,
 * MPI_Comm_create_from_group 2, MPI_Session_finalize 2, MPI_Comm_free 2.
 * Exit status 0, 1 if a sum differs.
 */
#include <mpi.h>
#include <stdio.h>

/* A communicator over mpi://WORLD of a new session (*session). */
static MPI_Comm world_of(MPI_Session *session, const char *tag)
{
    MPI_Group group;
    MPI_Comm comm;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, session);
    MPI_Group_from_session_pset(*session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, tag, MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &comm);
    MPI_Group_free(&group);
    return comm;
}

int main(void)
{
    MPI_Session first, second;
    MPI_Comm a = world_of(&first, "org.stacklens.test.a");
    MPI_Comm b = world_of(&second, "org.stacklens.test.b");
    int rank, size, bad = 0;
    MPI_Comm_rank(a, &rank);
    MPI_Comm_size(a, &size);
    char buf[100] = { 0 };
    for (int i = 0; i < 10; i++) {
        if (rank == 0)
            MPI_Send(buf, sizeof buf, MPI_BYTE, 1, i, a);
        else if (rank == 1)
            MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, i, a, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(a);
    for (int i = 0; i < 5; i++) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, b);
        bad |= sum != size;
    }
    MPI_Comm_free(&b);
    MPI_Comm_free(&a);
    MPI_Session_finalize(&second);
    MPI_Session_finalize(&first);
    printf("rank %d of %d: done\n", rank, size);
    return bad;
}
