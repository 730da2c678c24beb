/*
 * aborter.c — a job that ends by MPI_Abort: every rank calls MPI_Barrier 40
 * times; then rank 1 calls MPI_Abort(MPI_COMM_WORLD, 3) while the other ranks
 * wait in MPI_Recv for a message that never comes (the launcher ends them).
 *
 * Expected: rank 1 stored aborted with error code 3 and its 40 barriers and
 * one MPI_Abort call; the job aborted; no rank left running.
 */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, x;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 40; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Recv(&x, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
