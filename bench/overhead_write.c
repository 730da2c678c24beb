/*
 * overhead_write.c — argv[2] write() calls of 4 KiB to the file argv[1]
 * (rewound every 256 writes); prints the ns per write. With argv[3] "thread"
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
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) {
        if (i % 256 == 0)
            lseek(fd, 0, SEEK_SET);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    close(fd);
    printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}
