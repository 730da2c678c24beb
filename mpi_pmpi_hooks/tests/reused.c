/*
 * reused.c — a request handle reused after a completion stacklens cannot see, on 2 ranks.
 * 200 times: rank 0 posts MPI_Irecv of 100 ints from rank 1 and completes it with
 * PMPI_Wait (legal, and invisible to the hooks); then both ranks start an
 * MPI_Iallreduce of 10 ints and complete it with MPI_Wait (MPICH hands the freed
 * receive's handle to the Iallreduce). Rank 1 MPI_Send's the 100 ints.
 * Expected: rank 1 sent 80,000 B in 200 messages to rank 0; no receive is counted (rank
 * 0's completed behind the hooks' back, and the Iallreduces that got their handles are
 * not receives); MPI_Iallreduce 200 calls and 8,000 B on each rank.
 */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static int big[100], in[10], out[10];
    for (int i = 0; i < 200; i++) {
        MPI_Request req;
        if (rank == 0) {
            MPI_Irecv(big, 100, MPI_INT, 1, 1, MPI_COMM_WORLD, &req);
            PMPI_Wait(&req, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Send(big, 100, MPI_INT, 0, 1, MPI_COMM_WORLD);
        }
        MPI_Iallreduce(in, out, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
