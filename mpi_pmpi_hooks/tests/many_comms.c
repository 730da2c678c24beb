/*
 * many_comms.c — more communicators than the hooks' bound (tests/hooks/test_families.py,
 * run with STACKLENS_MAX_KEYS=16, its least). Run on 4 ranks.
 *
 *   dups    20 x MPI_Comm_dup of MPI_COMM_WORLD, each followed by one MPI_Allreduce of
 *           one double on the new communicator (8 bytes per call and rank)
 * Every duplicate is freed before MPI_Finalize, the last made first.
 */
#include <mpi.h>

#define DUPS 20

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm dups[DUPS];
    static double one[1];
    for (int i = 0; i < DUPS; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &dups[i]);
        MPI_Allreduce(MPI_IN_PLACE, one, 1, MPI_DOUBLE, MPI_SUM, dups[i]);
    }
    for (int i = DUPS - 1; i >= 0; i--)
        MPI_Comm_free(&dups[i]);
    MPI_Finalize();
    return 0;
}
