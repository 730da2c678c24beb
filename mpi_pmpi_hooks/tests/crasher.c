/*
 * crasher.c — a job whose rank 1 dies of a signal within its first interval, after
 * MPI_Init and a window allocation (the shape of a one-sided benchmark that crashes in
 * its first second): `crasher segv|abort`.
 *
 * Every rank: MPI_Init, MPI_Win_allocate of 4096 bytes, 3 MPI_Barrier calls; rank 1
 * then sends rank 0 two messages of 1000 bytes (MPI_Send, tag 7), which rank 0
 * receives (MPI_Recv). Then every rank sleeps 600 ms (the sender thread takes its
 * 100 ms crash snapshots meanwhile) and rank 1 dies: a write through a null pointer
 * (SIGSEGV) or abort() (SIGABRT). The other ranks wait in MPI_Recv for a message that
 * never comes; the launcher ends them. Run with a reporting interval far longer than
 * the job: no rank sends a frame before the crash.
 *
 * Expected, for rank 1: MPI_Init 1, MPI_Win_allocate 1 (4096 bytes), MPI_Barrier 3,
 * MPI_Send 2 (2000 bytes), p2p to rank 0: 2 messages, 2000 bytes; its final frame
 * killed. Rank 0 the same but MPI_Recv 2 (2000 bytes received from rank 1) instead of
 * the sends.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    void *base;
    MPI_Win win;
    MPI_Win_allocate(4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < 3; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    char buf[1000];
    memset(buf, 1, sizeof buf);
    for (int i = 0; i < 2; i++) {
        if (rank == 1)
            MPI_Send(buf, (int)sizeof buf, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        else if (rank == 0)
            MPI_Recv(buf, (int)sizeof buf, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    struct timespec pause = { 0, 600000000L };
    nanosleep(&pause, NULL);
    if (rank == 1) {
        if (argc > 1 && strcmp(argv[1], "abort") == 0)
            abort();
        int *volatile nowhere = NULL; /* volatile: the compiler cannot see it is null */
        *nowhere = 1;                 /* SIGSEGV */
    }
    int x;
    MPI_Recv(&x, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
