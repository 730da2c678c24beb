/*
 * callsites.c — call sites with known counts (tests/hooks/test_callsites.py).
 *
 * Every rank of a world of n ranks, each call site marked with a SITE comment
 * that the test finds by its line:
 *   reduce_small(): MPI_Allreduce of 8 doubles (64 bytes), 3 times   SITE small
 *   reduce_large(): MPI_Allreduce of 1000 ints (4000 bytes), 5 times SITE large
 *   main: MPI_Send of 100 bytes to rank + 1 (mod n), 2 times        SITE send
 *         MPI_Recv of the same from rank - 1, 2 times               SITE recv
 *   write_blocks(): write() of 4096 bytes, 3 times, to argv[1].<rank> SITE write
 * reduce_small and reduce_large are called from main (lines marked SITE
 * call_small and call_large: frame 1 of their sites at depth 2).
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void reduce_small(double *v)
{
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(MPI_IN_PLACE, v, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* SITE small */
}

__attribute__((noinline)) static void reduce_large(int *v)
{
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(MPI_IN_PLACE, v, 1000, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* SITE large */
}

__attribute__((noinline)) static int write_blocks(const char *path)
{
    static char block[4096];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) /* SITE write */
            return 1;
    return close(fd);
}

int main(int argc, char **argv)
{
    static double small[8];
    static int large[1000];
    char msg[100], path[4096];
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(msg, rank, sizeof msg);
    reduce_small(small); /* SITE call_small */
    reduce_large(large); /* SITE call_large */
    for (int i = 0; i < 2; i++) {
        MPI_Send(msg, 100, MPI_BYTE, (rank + 1) % size, 0, MPI_COMM_WORLD); /* SITE send */
        MPI_Recv(msg, 100, MPI_BYTE, (rank + size - 1) % size, 0, MPI_COMM_WORLD, /* SITE recv */
                 MPI_STATUS_IGNORE);
    }
    int rc = 0;
    if (argc > 1) {
        snprintf(path, sizeof path, "%s.%d", argv[1], rank);
        rc = write_blocks(path);
    }
    MPI_Finalize();
    return rc;
}
