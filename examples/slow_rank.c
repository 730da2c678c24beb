/* examples/slow_rank.c — a job with a known time profile: every rank computes (sleeps) a
 * little and then meets the others in MPI_Allreduce, once per iteration; one rank computes
 * far longer in a known range of iterations, so the others wait for it inside the
 * collective.
 *
 *   mpirun -np 4 ./slow_rank ITERATIONS STEP_MS SLOW_RANK SLOW_FROM SLOW_TO SLOW_MS
 *
 * Iterations SLOW_FROM .. SLOW_TO-1 of rank SLOW_RANK compute SLOW_MS milliseconds instead
 * of STEP_MS. Prints nothing; exits 0. */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

static void compute_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 7)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int iterations = atoi(argv[1]), slow_rank = atoi(argv[3]);
    int slow_from = atoi(argv[4]), slow_to = atoi(argv[5]);
    long step_ms = atol(argv[2]), slow_ms = atol(argv[6]);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double value = rank, sum = 0;
    for (int i = 0; i < iterations; i++) {
        int slow = rank == slow_rank && i >= slow_from && i < slow_to;
        compute_ms(slow ? slow_ms : step_ms);
        MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
