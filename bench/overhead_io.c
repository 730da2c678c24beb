/*
 * overhead_io.c — the file-call loops of bench/overhead.py.
 *
 *   overhead_io write FILE N [thread]   N write() calls of 4 KiB to FILE
 *                                       (rewound every 256 writes)
 *   overhead_io open FILE N             N open() + close() pairs of FILE
 *                                       (O_WRONLY, created first)
 *
 * The loop is timed in chunks of 256 calls, each on its own, by the wall clock
 * and by the thread's CPU clock (which leaves out the time other processes had
 * the core, the kernel's time in the call included). Prints one line: the mean
 * wall ns per call over the whole loop, the 10th percentile of the chunks' wall
 * ns per call (the steady cost), and the 10th percentile and the median of the
 * chunks' thread-CPU ns per call. With "thread" an idle second thread exists
 * during the write loop, as the MPI runtime's threads do in a rank: the kernel
 * then takes a file reference and the file-position lock on every write (a
 * process of one thread skips both). The library's sender thread does not
 * count here: it has a descriptor table of its own (mpi_pmpi_hooks/src/fdtable.h).
 * Under the hooks each call is counted at its call site (issue #26 point 1).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 256

/* ns from x to y. */
static double ns_between(struct timespec x, struct timespec y)
{
    return (y.tv_sec - x.tv_sec) * 1e9 + (y.tv_nsec - x.tv_nsec);
}

/* qsort order of doubles. */
static int by_value(const void *x, const void *y)
{
    double u = *(const double *)x, v = *(const double *)y;
    return (u > v) - (u < v);
}

/* The idle thread: blocks until the process exits. */
static void *idle(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* One chunk of calls: CHUNK writes of buf to fd from its start (write_mode), or CHUNK
 * open + close pairs of path. Returns 0, or -1 when a call failed. */
static int chunk_of_calls(int write_mode, int fd, const char *path, const char *buf)
{
    if (write_mode) {
        if (lseek(fd, 0, SEEK_SET) != 0)
            return -1;
        for (int i = 0; i < CHUNK; i++)
            if (write(fd, buf, 4096) != 4096)
                return -1;
        return 0;
    }
    for (int i = 0; i < CHUNK; i++) {
        int f = open(path, O_WRONLY);
        if (f < 0 || close(f) != 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int write_mode = strcmp(argv[1], "write") == 0;
    const char *path = argv[2];
    int nchunks = atoi(argv[3]) / CHUNK;
    if (nchunks < 1 || (!write_mode && strcmp(argv[1], "open") != 0))
        return 2;
    pthread_t thread;
    if (argc > 4 && strcmp(argv[4], "thread") == 0 && pthread_create(&thread, NULL, idle, NULL))
        return 1;
    static char buf[4096];
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || (!write_mode && close(fd) != 0))
        return 1;
    double *wall = calloc((size_t)nchunks, sizeof *wall);
    double *cpu = calloc((size_t)nchunks, sizeof *cpu);
    if (wall == NULL || cpu == NULL)
        return 1;
    struct timespec start, w0, w1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &start);
    w0 = start;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (int k = 0; k < nchunks; k++) {
        if (chunk_of_calls(write_mode, fd, path, buf) != 0)
            return 1;
        clock_gettime(CLOCK_MONOTONIC, &w1);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        wall[k] = ns_between(w0, w1) / CHUNK;
        cpu[k] = ns_between(c0, c1) / CHUNK;
        w0 = w1;
        c0 = c1;
    }
    double mean = ns_between(start, w0) / ((double)nchunks * CHUNK);
    if (write_mode)
        close(fd);
    qsort(wall, (size_t)nchunks, sizeof *wall, by_value);
    qsort(cpu, (size_t)nchunks, sizeof *cpu, by_value);
    printf("%.3f %.3f %.3f %.3f\n", mean, wall[nchunks / 10], cpu[nchunks / 10], cpu[nchunks / 2]);
    return 0;
}
