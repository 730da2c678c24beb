/*
 * split_type.c — a node-local communicator (tests/hooks/test_families.py).
 * Run on 4 ranks of one machine.
 *
 *   node    MPI_Comm_split_type MPI_COMM_TYPE_SHARED, key rank: the 4 ranks (one group);
 *           3 x MPI_Allreduce of 16 doubles (128 bytes per call and rank)
 * The communicator is freed before MPI_Finalize.
 */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    static double values[16];
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(MPI_IN_PLACE, values, 16, MPI_DOUBLE, MPI_SUM, node);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
