/*
 * overhead_calls.c — the cost of wrapped MPI calls without a partner: one
 * rank posts a 0-byte MPI_Isend to itself, receives it with MPI_Recv and
 * completes the send with MPI_Wait, argv[1] times (3 calls per iteration;
 * no other rank busy-polls a core). Prints the ns per MPI call, wall-clock
 * and in the thread's CPU time.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CPU time of the calling thread in ns. */
static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    MPI_Init(&argc, &argv);
    char b = 0;
    double c0 = thread_cpu_ns();
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Request req;
        MPI_Isend(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_SELF, &req);
        MPI_Recv(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    double t = MPI_Wtime() - t0;
    double c = thread_cpu_ns() - c0;
    printf("%.3f %.3f\n", t * 1e9 / (3.0 * n), c / (3.0 * n));
    MPI_Finalize();
    return 0;
}
