/*
 * monitored_pattern.c — known collective and point-to-point traffic for the
 * monitored traffic test (tests/hooks/test_monitored.py), for n >= 2 ranks:
 *
 *   1. MPI_Allreduce of 1000 doubles (MPI_SUM) on MPI_COMM_WORLD;
 *   2. MPI_Bcast of 100 doubles from root 0;
 *   3. a ring: rank r sends 10 x (r + 1) doubles to rank (r + 1) % n (tag 7) and
 *      receives from rank (r - 1 + n) % n;
 *   4. MPI_Barrier.
 *
 * Each phase is followed by a 150 ms pause, so the traffic spreads over several
 * reporting intervals. What the MPI sends for the collectives is the MPI's
 * choice (its algorithms); the test compares what is stored with what Open MPI's
 * monitoring component itself reports at MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

/* Sleeps 150 ms. */
static void pause_phase(void)
{
    struct timespec ts = { 0, 150 * 1000 * 1000 };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    static double in[1000], out[1000], ring[10 * 64];
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size > 64) {
        fprintf(stderr, "monitored_pattern: 2 to 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < 1000; i++)
        in[i] = rank + i;
    MPI_Allreduce(in, out, 1000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    pause_phase();
    MPI_Bcast(out, 100, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    pause_phase();
    int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
    MPI_Sendrecv(out, 10 * (rank + 1), MPI_DOUBLE, next, 7, ring, 10 * (prev + 1), MPI_DOUBLE,
                 prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    pause_phase();
    MPI_Barrier(MPI_COMM_WORLD);
    pause_phase();
    MPI_Finalize();
    return 0;
}
