/*
 * threads.c — MPI_THREAD_MULTIPLE: T threads per rank call MPI at the same
 * time, each on its own tag, in W waves one after the other (threads of a
 * wave exit before the next wave starts). Run with 2 ranks. The odd threads
 * exchange on a duplicate of MPI_COMM_WORLD (made once, before the waves), so
 * their messages are counted per communicator too (comm_p2p): by the threads
 * concurrently, each into its own counter block's row.
 *
 * Usage: threads [T=4] [W=1] [F=50]
 *
 * EXPECTED TOTALS. In every wave, thread t (0..T-1) of rank r exchanges
 * with rank 1-r exactly F*(t+1) messages of 100*(t+1)+r bytes (MPI_BYTE),
 * each with MPI_Isend + MPI_Recv + MPI_Wait. So rank r sends to 1-r
 *     msgs  = W * sum_t F*(t+1)
 *     bytes = W * sum_t F*(t+1) * (100*(t+1)+r)
 * (defaults: 500 messages, 150000 + 500*r bytes) and receives the other
 * rank's totals; of them, the odd threads' messages on the duplicate. Per rank:
 * MPI_Isend, MPI_Recv and MPI_Wait `msgs` calls
 * each, MPI_Init_thread 1, MPI_Barrier W. Exit status 1 if
 * MPI_THREAD_MULTIPLE is not provided or a size differs.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 256

static int rank, factor = 50, wave;
static MPI_Comm dup; /* the odd threads' communicator */

/* One thread's exchange with the other rank on tag t; returns 1 on a size mismatch. */
static void *exchange(void *arg)
{
    int t = (int)(long)arg, peer = 1 - rank, bad = 0, tag = wave * MAX_THREADS + t;
    MPI_Comm comm = t % 2 ? dup : MPI_COMM_WORLD;
    int n = factor * (t + 1), mine = 100 * (t + 1) + rank, theirs = 100 * (t + 1) + peer;
    char *sbuf = calloc(1, (size_t)mine), *rbuf = calloc(1, (size_t)theirs + 16);
    for (int i = 0; i < n; i++) {
        MPI_Request req;
        MPI_Status st;
        int got = 0;
        MPI_Isend(sbuf, mine, MPI_BYTE, peer, tag, comm, &req);
        MPI_Recv(rbuf, theirs + 16, MPI_BYTE, peer, tag, comm, &st);
        MPI_Get_count(&st, MPI_BYTE, &got);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        bad |= got != theirs;
    }
    free(sbuf);
    free(rbuf);
    return (void *)(long)bad;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Finalize();
        return 1;
    }
    int nthreads = argc > 1 ? atoi(argv[1]) : 4, waves = argc > 2 ? atoi(argv[2]) : 1;
    if (argc > 3)
        factor = atoi(argv[3]);
    if (nthreads < 1 || nthreads > MAX_THREADS || waves < 1 || factor < 1) {
        fprintf(stderr, "usage: threads [threads 1..%d] [waves] [factor]\n", MAX_THREADS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bad = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    for (wave = 0; wave < waves; wave++) {
        pthread_t th[MAX_THREADS];
        for (long t = 0; t < nthreads; t++)
            pthread_create(&th[t], NULL, exchange, (void *)t);
        for (int t = 0; t < nthreads; t++) {
            void *rc;
            pthread_join(th[t], &rc);
            bad |= (int)(long)rc;
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Comm_free(&dup);
    MPI_Finalize();
    if (rank == 0)
        printf("threads: %s\n", bad ? "MISMATCH" : "ok");
    return bad;
}
