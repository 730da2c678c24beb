/*
 * sizes.c — what a message is in the size histogram, on 4 ranks:
 *   3 x MPI_Alltoall of 1024 bytes per peer   -> 4 messages of 1 KiB per call and rank
 *   2 x MPI_Alltoallv sending 100 x i bytes to rank i -> 0, 100, 200, 300 B messages
 *   5 x MPI_Allreduce of 8 doubles            -> one 64 B message per call and rank
 *   1 x MPI_Barrier                           -> one empty message per rank
 *   2 x MPI_Send of 1024 bytes from rank 0 to rank 1 (MPI_Recv'd there)
 */
#include <mpi.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static char out[4 * 1024], in[4 * 1024];
    memset(out, rank, sizeof out);
    for (int i = 0; i < 3; i++)
        MPI_Alltoall(out, 1024, MPI_BYTE, in, 1024, MPI_BYTE, MPI_COMM_WORLD);
    int counts[4], displs[4], rcounts[4], rdispls[4];
    for (int i = 0; i < 4; i++) {
        counts[i] = 100 * i;
        displs[i] = 0;
        rcounts[i] = 100 * rank;
        rdispls[i] = 300 * i;
    }
    for (int i = 0; i < 2 && size == 4; i++)
        MPI_Alltoallv(out, counts, displs, MPI_BYTE, in, rcounts, rdispls, MPI_BYTE,
                      MPI_COMM_WORLD);
    double v[8] = { 0 }, sum[8];
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(v, sum, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++) {
        if (rank == 0)
            MPI_Send(out, 1024, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        else if (rank == 1)
            MPI_Recv(in, 1024, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
