/*
 * ring_allreduce.c — demo workload: a ring exchange plus a small allreduce,
 * repeated with a pause, so stacklens has a few intervals of traffic to show.
 *
 * Usage: ring_allreduce [iterations] [bytes] [sleep_ms]
 *        defaults:       20           65536   100
 *
 * Each iteration, rank R sends one message of (bytes + R) bytes to
 * (R + 1) % size with MPI_Isend, receives one from (R - 1 + size) % size
 * with MPI_Recv, waits for its send (MPI_Wait), then joins an MPI_Allreduce
 * (sum) of 4 doubles, then sleeps sleep_ms.
 *
 * At the end every rank prints exactly one line of what it sent:
 *     rank R sent B bytes in M messages to peer P
 * with B = iterations * (bytes + R), M = iterations, P = (R + 1) % size.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Parses argv[i] as a non-negative number, or returns fallback if absent. */
static long arg_or(int argc, char **argv, int i, long fallback)
{
    if (i >= argc)
        return fallback;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end != '\0' || v < 0) {
        fprintf(stderr, "usage: ring_allreduce [iterations] [bytes] [sleep_ms]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iterations = arg_or(argc, argv, 1, 20);
    long bytes = arg_or(argc, argv, 2, 65536);
    long sleep_ms = arg_or(argc, argv, 3, 100);

    int right = (rank + 1) % size, left = (rank - 1 + size) % size;
    int my_len = (int)(bytes + rank), cap = (int)(bytes + size);
    char *out = calloc((size_t)cap, 1), *in = calloc((size_t)cap, 1);
    if (out == NULL || in == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    struct timespec pause = { .tv_sec = sleep_ms / 1000, .tv_nsec = (sleep_ms % 1000) * 1000000L };

    long long sent_bytes = 0;
    long messages = 0;
    for (long it = 0; it < iterations; it++) {
        MPI_Request req;
        MPI_Isend(out, my_len, MPI_BYTE, right, 0, MPI_COMM_WORLD, &req);
        MPI_Recv(in, cap, MPI_BYTE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        sent_bytes += my_len;
        messages++;

        double local[4] = { rank, it, 1.0, (double)my_len }, global[4];
        MPI_Allreduce(local, global, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (sleep_ms > 0)
            nanosleep(&pause, NULL);
    }

    printf("rank %d sent %lld bytes in %ld messages to peer %d\n", rank, sent_bytes, messages,
           right);
    fflush(stdout);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
