/*
 * unfinalized.c — ranks that end without MPI_Finalize, in the shape of a
 * multithreaded latency benchmark: MPI_THREAD_MULTIPLE, a duplicated
 * communicator, one sender thread on rank 0 and two receiver threads on
 * rank 1 handed their work through a condition variable. Run with 2 ranks.
 *
 * Usage: unfinalized MODE [N=100]
 *   return   both ranks return from main without MPI_Finalize; rank 1 spends
 *            a further 100 ms (its report) before it returns, so rank 0's
 *            process ends first
 *   exit     rank 1 calls exit(0) from a receiver thread, rank 0 returns
 *   _exit    rank 1 forks a child that calls _exit(0), then calls _exit(0)
 *            itself; rank 0 returns
 *   blocked  after the barrier every rank starts a thread blocked in MPI_Recv
 *            (on the world communicator, a tag no one sends) and returns from
 *            main while it waits (the MPI_Recv never returns: not counted)
 *
 * EXPECTED TOTALS. Rank 0's sender thread sends N messages of 64 bytes
 * (MPI_BYTE, tag 0..N-1) to rank 1 with MPI_Send; rank 1's two receiver
 * threads receive N/2 each with MPI_Recv. Per rank: MPI_Init_thread 1,
 * MPI_Comm_dup 1, MPI_Barrier 1 (on the duplicate, after the messages). No
 * MPI_Finalize. Exit status 0.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static MPI_Comm comm;
static int messages = 100;
static const char *mode;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static int started;

/* Waits for the main thread's go (the benchmark's start signal). */
static void wait_go(void)
{
    pthread_mutex_lock(&lock);
    while (!started)
        pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
}

/* Rank 0: every message to rank 1. */
static void *sender(void *arg)
{
    (void)arg;
    char buf[64] = { 0 };
    wait_go();
    for (int i = 0; i < messages; i++)
        MPI_Send(buf, sizeof buf, MPI_BYTE, 1, i, comm);
    return NULL;
}

/* Rank 1: every second message, from the first (t = 0) or second (t = 1). */
static void *receiver(void *arg)
{
    int t = (int)(long)arg;
    char buf[64];
    wait_go();
    for (int i = t; i < messages; i += 2)
        MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, i, comm, MPI_STATUS_IGNORE);
    return NULL;
}

/* exit() from a thread of its own. */
static void *exit_thread(void *arg)
{
    (void)arg;
    exit(0);
}

/* Sleeps ms milliseconds. */
/* Blocks in an MPI_Recv that no message matches, until the process ends. */
static void *blocked_thread(void *arg)
{
    (void)arg;
    char buf[8];
    MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, 32000, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return NULL;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    int provided, rank;
    mode = argc > 1 ? argv[1] : "return";
    if (argc > 2)
        messages = atoi(argv[2]);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE)
        return 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    pthread_t threads[2];
    int n = rank == 0 ? 1 : 2;
    for (int t = 0; t < n; t++)
        pthread_create(&threads[t], NULL, rank == 0 ? sender : receiver, (void *)(long)t);
    pthread_mutex_lock(&lock);
    started = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    for (int t = 0; t < n; t++)
        pthread_join(threads[t], NULL);
    MPI_Barrier(comm);
    if (rank == 1 && strcmp(mode, "exit") == 0) {
        pthread_t ender;
        pthread_create(&ender, NULL, exit_thread, NULL);
        pthread_join(ender, NULL);
    }
    if (strcmp(mode, "blocked") == 0) {
        pthread_t waiter;
        pthread_create(&waiter, NULL, blocked_thread, NULL);
        pause_ms(50); /* inside MPI_Recv by now */
    }
    if (rank == 1 && strcmp(mode, "_exit") == 0) {
        if (fork() == 0)
            _exit(0);
        _exit(0);
    }
    if (rank == 1)
        pause_ms(100);
    printf("rank %d: %d messages\n", rank, messages);
    return 0;
}
