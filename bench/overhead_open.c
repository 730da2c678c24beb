/*
 * overhead_open.c — argv[2] open() + close() pairs of the file argv[1]
 * (O_WRONLY, created first); prints the ns per pair over the whole loop and
 * the 10th percentile of the ns per pair of its chunks of 256 pairs (the
 * steady cost, with less of the time other processes took the core). Under
 * the hooks each pair is an open and a close of a tracked file, both counted
 * at their call sites (issue #26 point 1): the call-site cost of opens and
 * closes, on top of the file bookkeeping (an open reads its path from /proc).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[2]);
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0 || close(fd) != 0)
        return 1;
    int nchunks = n / CHUNK;
    double *chunk = calloc(nchunks > 0 ? (size_t)nchunks : 1, sizeof *chunk);
    if (chunk == NULL)
        return 1;
    struct timespec a, b, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &a);
    c0 = a;
    for (int i = 0; i < n; i++) {
        if (i % CHUNK == 0 && i > 0) {
            clock_gettime(CLOCK_MONOTONIC, &c1);
            chunk[i / CHUNK - 1] = ns_between(c0, c1) / CHUNK;
            c0 = c1;
        }
        fd = open(argv[1], O_WRONLY);
        if (fd < 0 || close(fd) != 0)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (nchunks > 0 && n % CHUNK == 0)
        chunk[nchunks - 1] = ns_between(c0, b) / CHUNK;
    qsort(chunk, (size_t)nchunks, sizeof *chunk, by_value);
    printf("%.3f %.3f\n", ns_between(a, b) / n, nchunks > 0 ? chunk[nchunks / 10] : 0.0);
    return 0;
}
