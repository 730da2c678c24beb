/*
 * threads.c — MPI_THREAD_MULTIPLE: on every rank 3 threads call MPI at once; see suite.h
 * for what it prints (the counts of all threads of the rank). Thread t of rank 0 sends
 * rank 1 20 messages of 100 (t + 1) bytes (MPI_Send, tag t), which thread t of rank 1
 * receives (MPI_Recv); then every thread makes 10 MPI_Allreduce of 4 ints on a
 * communicator of its own (MPI_Comm_dup in the main thread, before the threads start).
 */
#include "suite.h"

#define THREADS 3

static int rank, size;
static MPI_Comm comms[THREADS];

static void *work(void *arg)
{
    int t = (int)(long)arg;
    char buf[THREADS * 100];
    memset(buf, t, sizeof buf);
    int ok = 1;
    for (int i = 0; i < 20; i++) {
        if (rank == 0) {
            MPI_Send(buf, 100 * (t + 1), MPI_BYTE, 1, t, MPI_COMM_WORLD);
            suite_count_locked("MPI_Send", 100 * (t + 1));
        } else if (rank == 1) {
            MPI_Status st;
            MPI_Recv(buf, (int)sizeof buf, MPI_BYTE, 0, t, MPI_COMM_WORLD, &st);
            int n;
            MPI_Get_count(&st, MPI_BYTE, &n);
            suite_count_locked("MPI_Recv", n);
            ok &= n == 100 * (t + 1) && buf[n - 1] == t;
        }
    }
    int in[4] = { t, t, t, t }, out[4];
    for (int i = 0; i < 10; i++) {
        MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, comms[t]);
        suite_count_locked("MPI_Allreduce", 16);
        ok &= out[3] == t * size;
    }
    return (void *)(long)ok;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    suite_count("MPI_Init_thread", 0);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    suite_rank = rank;
    suite_check(provided == MPI_THREAD_MULTIPLE, "thread multiple");
    for (int t = 0; t < THREADS; t++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
        suite_count("MPI_Comm_dup", 0);
    }
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, work, (void *)(long)t);
    int ok = 1;
    for (int t = 0; t < THREADS; t++) {
        void *result;
        pthread_join(threads[t], &result);
        ok &= (int)(long)result;
    }
    suite_check(ok, "threads' messages and sums");
    for (int t = 0; t < THREADS; t++) {
        MPI_Comm_free(&comms[t]);
        suite_count("MPI_Comm_free", 0);
    }
    return suite_end();
}
