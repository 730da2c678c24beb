/*
 * files.c — a checkpointing-like pattern: every rank opens a file, writes 64
 * bytes, closes it and calls MPI_Barrier, N times.
 *
 *   files same N DIR       always DIR/r<rank> (one file reopened N times)
 *   files distinct N DIR   DIR/r<rank>.<i>, i = 0 .. N-1 (N distinct files)
 *
 * Expected per rank: N opens and N x 64 bytes written under DIR (beyond
 * STACKLENS_MAX_KEYS distinct files in the "<other>" record of the POSIX
 * layer), N MPI_Barrier calls, and a normal end.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 4 || (strcmp(argv[1], "same") != 0 && strcmp(argv[1], "distinct") != 0)) {
        fprintf(stderr, "usage: files same|distinct N DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rank, n = atoi(argv[2]), distinct = strcmp(argv[1], "distinct") == 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char block[64], path[4096];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < n; i++) {
        if (distinct)
            snprintf(path, sizeof path, "%s/r%d.%d", argv[3], rank, i);
        else
            snprintf(path, sizeof path, "%s/r%d", argv[3], rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block || close(fd) != 0) {
            perror(path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
