/*
 * comm_p2p_reuse.c — messages on a communicator whose handle was a freed one's, on 4
 * ranks. A = MPI_Comm_split(MPI_COMM_WORLD, 0, rank): every other rank sends 3 messages
 * of 8 bytes to A's rank 0 (world rank 0), which receives them by source; A freed. Then
 * B = MPI_Comm_split(MPI_COMM_WORLD, 0, -rank): the ranks reversed, so B's rank 0 is
 * world rank 3; 2 messages of 8 bytes from every other rank to it; B freed. The MPI
 * usually gives B the handle A had: the same (handle, rank, op) as A's messages, never
 * counted as A's. Each rank prints "handle reused: 1" when it did.
 */
#include <mpi.h>
#include <stdio.h>

/* n messages of 8 bytes from every rank of comm to its rank 0, received by source. */
static void to_rank_zero(MPI_Comm comm, int n)
{
    int rank, size;
    char buf[8] = { 0 };
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int i = 0; i < n; i++) {
        if (rank != 0) {
            MPI_Send(buf, 8, MPI_BYTE, 0, 0, comm);
            continue;
        }
        for (int source = 1; source < size; source++)
            MPI_Recv(buf, 8, MPI_BYTE, source, 0, comm, MPI_STATUS_IGNORE);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm a, b;
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &a);
    MPI_Comm freed = a;
    to_rank_zero(a, 3);
    MPI_Comm_free(&a);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &b);
    printf("handle reused: %d\n", b == freed);
    to_rank_zero(b, 2);
    MPI_Comm_free(&b);
    MPI_Finalize();
    return 0;
}
