/*
 * threads.c — MPI_THREAD_MULTIPLE: 4 threads per rank call MPI at the same
 * time, each on its own tag. Run with 2 ranks.
 *
 * EXPECTED TOTALS. Thread t (0..3) of rank r exchanges with rank 1-r
 * exactly 50*(t+1) messages of 100*(t+1)+r bytes (MPI_BYTE, tag t), each
 * message i with MPI_Isend + MPI_Recv + MPI_Wait. So rank r sends to 1-r
 *     msgs  = sum_t 50*(t+1)                 = 500
 *     bytes = sum_t 50*(t+1) * (100*(t+1)+r) = 150000 + 500*r
 * and receives from 1-r the other rank's totals. Per rank: MPI_Isend 500
 * calls, MPI_Recv 500, MPI_Wait 500, MPI_Init_thread 1, MPI_Barrier 1.
 * Exit status 1 if MPI_THREAD_MULTIPLE is not provided or a size differs.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 4

static int rank;

/* One thread's exchange with the other rank on tag t; returns 1 on a size mismatch. */
static void *exchange(void *arg)
{
    int t = (int)(long)arg, peer = 1 - rank, bad = 0;
    int n = 50 * (t + 1), mine = 100 * (t + 1) + rank, theirs = 100 * (t + 1) + peer;
    char *sbuf = calloc(1, (size_t)mine), *rbuf = calloc(1, (size_t)theirs + 16);
    for (int i = 0; i < n; i++) {
        MPI_Request req;
        MPI_Status st;
        int got = 0;
        MPI_Isend(sbuf, mine, MPI_BYTE, peer, t, MPI_COMM_WORLD, &req);
        MPI_Recv(rbuf, theirs + 16, MPI_BYTE, peer, t, MPI_COMM_WORLD, &st);
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
    pthread_t th[NTHREADS];
    for (long t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, exchange, (void *)t);
    int bad = 0;
    for (int t = 0; t < NTHREADS; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        bad |= (int)(long)rc;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0)
        printf("threads: %s\n", bad ? "MISMATCH" : "ok");
    return bad;
}
