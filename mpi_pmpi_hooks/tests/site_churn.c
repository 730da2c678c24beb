/*
 * site_churn.c — call sites that keep taking each other's cache slots
 * (tests/hooks/test_callsites.py): 2 threads (MPI_THREAD_MULTIPLE) each call
 * MPI_Barrier ITERS times from each of SITES distinct call sites (one
 * straight-line function of SITES calls, so every call has its own return
 * address), thread t on its own duplicate of MPI_COMM_SELF, with a 300 us pause
 * after each round (so that a run of 400 rounds spans several 20 ms intervals).
 * With more keys per thread than its cache has slots (callsite.h, SL_SITE_CACHE),
 * the keys sharing a slot take it from each other at every call, while the sender
 * reads the blocks.
 *
 * Usage: site_churn ITERS
 *
 * EXPECTED TOTALS (one rank). Per thread t and site: ITERS calls of MPI_Barrier
 * on thread t's duplicate, 0 bytes; so SITES x 2 (site, communicator) keys, each
 * of ITERS calls. Exit status 1 if MPI_THREAD_MULTIPLE is not provided.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 2
#define SITES 500

/* One call site each: 10, 100 and 500 of them in a row. */
#define SITE MPI_Barrier(comm);
#define SITES_10 SITE SITE SITE SITE SITE SITE SITE SITE SITE SITE
#define SITES_100 SITES_10 SITES_10 SITES_10 SITES_10 SITES_10 \
                  SITES_10 SITES_10 SITES_10 SITES_10 SITES_10
#define SITES_500 SITES_100 SITES_100 SITES_100 SITES_100 SITES_100

static int iters;
static MPI_Comm comms[THREADS];

/* One round: a barrier at each of the SITES sites on comm. */
__attribute__((noinline)) static void round_of_sites(MPI_Comm comm)
{
    SITES_500
}

/* Thread t's ITERS rounds on its own communicator. */
static void *churn(void *arg)
{
    MPI_Comm comm = comms[(long)arg];
    struct timespec pause = { 0, 300000 };
    for (int i = 0; i < iters; i++) {
        round_of_sites(comm);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "site_churn: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Finalize();
        return 1;
    }
    iters = argc > 1 ? atoi(argv[1]) : 100;
    for (int t = 0; t < THREADS; t++)
        MPI_Comm_dup(MPI_COMM_SELF, &comms[t]);
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, churn, (void *)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    for (int t = 0; t < THREADS; t++)
        MPI_Comm_free(&comms[t]);
    MPI_Finalize();
    return 0;
}
