/*
 * overhead_write.c — argv[2] write() calls of 4 KiB to the file argv[1]
 * (rewound every 256 writes); prints the ns per write over the whole loop,
 * and the 10th percentile of the ns per write of its chunks of 256 writes
 * (each timed on its own: the steady cost, with less of the time other
 * processes took the core). With argv[3] "thread"
 * an idle second thread exists during the loop, as the MPI runtime's threads
 * do in a rank: the kernel then takes a file reference and the file-position
 * lock on every write (a process of one thread skips both). The library's
 * sender thread does not count here: it has a descriptor table of its own
 * (mpi_pmpi_hooks/src/fdtable.h).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
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

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[2]);
    pthread_t thread;
    if (argc > 3 && strcmp(argv[3], "thread") == 0 && pthread_create(&thread, NULL, idle, NULL))
        return 1;
    char buf[4096] = { 0 };
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0)
        return 1;
    int nchunks = n / CHUNK;
    double *chunk = calloc(nchunks > 0 ? (size_t)nchunks : 1, sizeof *chunk);
    if (chunk == NULL)
        return 1;
    struct timespec a, b, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &a);
    c0 = a;
    for (int i = 0; i < n; i++) {
        if (i % CHUNK == 0) {
            if (i > 0) {
                clock_gettime(CLOCK_MONOTONIC, &c1);
                chunk[i / CHUNK - 1] = ns_between(c0, c1) / CHUNK;
                c0 = c1;
            }
            lseek(fd, 0, SEEK_SET);
        }
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (nchunks > 0 && n % CHUNK == 0)
        chunk[nchunks - 1] = ns_between(c0, b) / CHUNK;
    close(fd);
    qsort(chunk, (size_t)nchunks, sizeof *chunk, by_value);
    printf("%.3f %.3f\n", ns_between(a, b) / n, nchunks > 0 ? chunk[nchunks / 10] : 0.0);
    return 0;
}
