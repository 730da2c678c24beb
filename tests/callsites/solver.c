/* tests/callsites/solver.c — an MPI program whose call sites are known: two MPI_Allreduce
 * sites with different sizes in solve(), one MPI_Bcast in main, and the shared library's
 * exchange() (halo.c). Each marked line is found by its marker in the tests. Built as a
 * PIE, run under ASLR. Argument: iterations. */
#include <mpi.h>
#include <stdlib.h>

void exchange(int n);

__attribute__((noinline)) static double solve(int iterations)
{
    double small = 1.0, big[512] = {0}, out[512];
    for (int i = 0; i < iterations; i++) {
        MPI_Allreduce(&small, out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site:small */
        if (i % 2 == 0)
            MPI_Allreduce(big, out, 512, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site:big */
    }
    return out[0];
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 10, seed = 7;
    MPI_Init(&argc, &argv); /* site:init */
    MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD); /* site:bcast */
    volatile double r = solve(iterations);
    (void)r;
    exchange(3);
    MPI_Finalize(); /* site:finalize */
    return 0;
}
