/* tests/incidents/late_site.c — a job whose rank comes late to one collective at a known
 * line, for tests/incidents/test_incident_callsites.py:
 *
 *   mpirun -np 2 ./late_site DIR NORMAL LATE
 *
 * Every iteration every rank computes (sleeps) 100 ms and meets the others in two
 * MPI_Allreduce calls of 8 KiB, at the lines marked site:steady and site:late. Rank 1
 * computes 50 ms more before the first, every iteration (its partners wait for it there
 * all along: the job's steady waiting); in the LATE iterations after the NORMAL first ones
 * it also computes 540 ms before the second, so its partners' waiting rises at site:late
 * alone. Rank 1 notes the wall-clock time (ns) its late iterations begin in DIR/late_from. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define COUNT 1024 /* doubles: 8 KiB */

static double send[COUNT], recv[COUNT];

static void compute_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {
    }
}

static void note_time(const char *dir)
{
    char path[4096];
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(path, sizeof path, "%s/late_from", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        MPI_Abort(MPI_COMM_WORLD, 3);
    fprintf(f, "%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
    fclose(f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 4)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int normal = atoi(argv[2]), late = atoi(argv[3]);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < normal + late; i++) {
        compute_ms(100 + (rank == 1 ? 50 : 0));
        MPI_Allreduce(send, recv, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site:steady */
        if (rank == 1 && i == normal)
            note_time(argv[1]);
        if (rank == 1 && i >= normal)
            compute_ms(540);
        MPI_Allreduce(send, recv, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site:late */
    }
    MPI_Finalize();
    return 0;
}
