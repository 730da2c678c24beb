/* tests/callsites/opener.c — an MPI program that opens and closes files from known lines
 * (issue #26 point 1). Arguments: a directory, n. Every rank, on files of its own in the
 * directory:
 *   posix.<rank>: open() for writing n times and for reading 2n times, from two lines,
 *                 each closed from a line of its own; creat() once, then closed;
 *   stdio.<rank>: the same with fopen() and fclose(); then open() + fdopen() once,
 *                 closed by fclose() (the POSIX descriptor goes with it); then fopen()
 *                 once, its stream moved by freopen() to freopen.<rank>, 100 bytes
 *                 written there with fwrite(), fclose();
 *   inmpi.<rank>: open(), then closed inside MPI_Wait (by a generalized request's
 *                 free function), and its number taken by a pipe that one byte goes
 *                 through (status 3 if the pipe did not get the number);
 *   mpiio (one file for all ranks): MPI_File_open + MPI_File_close n times;
 * and, not tracked (never at a call site): /dev/null opened and closed with open/close
 * and fopen/fclose, and an open of a file that does not exist. Each marked line is found
 * by its marker in tests/callsites/test_opens_closes.py. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) static int posix_files(const char *path, const char *missing, int n)
{
    int fd;
    for (int i = 0; i < n; i++) {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* site:open_write */
        if (fd < 0)
            return 1;
        close(fd); /* site:close_write */
    }
    for (int i = 0; i < 2 * n; i++) {
        fd = open(path, O_RDONLY); /* site:open_read */
        if (fd < 0)
            return 1;
        close(fd); /* site:close_read */
    }
    fd = creat(path, 0600); /* site:creat */
    if (fd < 0)
        return 1;
    close(fd); /* site:close_creat */
    fd = open("/dev/null", O_RDONLY); /* site:untracked_open */
    if (fd < 0)
        return 1;
    close(fd); /* site:untracked_close */
    fd = open(missing, O_RDONLY); /* site:failed_open */
    return fd < 0 ? 0 : 1;
}

__attribute__((noinline)) static int stdio_files(const char *path, const char *other, int n)
{
    static const char block[100];
    FILE *f;
    for (int i = 0; i < n; i++) {
        f = fopen(path, "w"); /* site:fopen_write */
        if (f == NULL)
            return 1;
        fclose(f); /* site:fclose_write */
    }
    for (int i = 0; i < 2 * n; i++) {
        f = fopen(path, "r"); /* site:fopen_read */
        if (f == NULL)
            return 1;
        fclose(f); /* site:fclose_read */
    }
    int fd = open(path, O_RDONLY); /* site:open_fdopen */
    f = fd < 0 ? NULL : fdopen(fd, "r"); /* site:fdopen */
    if (f == NULL)
        return 1;
    fclose(f); /* site:fclose_fdopen */
    f = fopen(path, "r"); /* site:fopen_freopen */
    if (f == NULL)
        return 1;
    f = freopen(other, "w", f); /* site:freopen */
    if (f == NULL || fwrite(block, 1, sizeof block, f) != sizeof block) /* site:fwrite_freopen */
        return 1;
    fclose(f); /* site:fclose_freopen */
    f = fopen("/dev/null", "r"); /* site:untracked_fopen */
    if (f == NULL)
        return 1;
    fclose(f); /* site:untracked_fclose */
    return 0;
}

/* A generalized request's callbacks: free_fn closes the descriptor in extra. MPI calls
 * it inside MPI_Wait, so that close is inside MPI. */
static int query_fn(void *extra, MPI_Status *status)
{
    (void)extra;
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_fn(void *extra)
{
    close(*(int *)extra); /* site:close_in_mpi */
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* Opens path, closes it inside MPI_Wait, and reads a byte through a pipe that takes its
 * number: 3 if the pipe did not get the number. */
__attribute__((noinline)) static int close_inside_mpi(const char *path)
{
    MPI_Request request;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* site:open_in_mpi */
    if (fd < 0)
        return 1;
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &fd, &request);
    MPI_Grequest_complete(request);
    MPI_Wait(&request, MPI_STATUS_IGNORE); /* site:wait */
    int ends[2];
    char byte = 'x';
    if (pipe(ends) != 0)
        return 1;
    if (ends[0] != fd)
        return 3;
    int rc = write(ends[1], &byte, 1) == 1 && read(ends[0], &byte, 1) == 1 ? 0 : 1;
    close(ends[0]);
    close(ends[1]);
    return rc;
}

__attribute__((noinline)) static int mpiio_files(const char *path, int n)
{
    MPI_File fh;
    for (int i = 0; i < n; i++) {
        int rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh); /* site:mpi_open */
        if (rc != MPI_SUCCESS)
            return 1;
        MPI_File_close(&fh); /* site:mpi_close */
    }
    return 0;
}

int main(int argc, char **argv)
{
    char posix[4096], stdio[4096], other[4096], missing[4096], inmpi[4096], mpiio[4096];
    int rank, n = argc > 2 ? atoi(argv[2]) : 3;
    if (argc < 2)
        return 2;
    MPI_Init(&argc, &argv); /* site:init */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(posix, sizeof posix, "%s/posix.%d", argv[1], rank);
    snprintf(stdio, sizeof stdio, "%s/stdio.%d", argv[1], rank);
    snprintf(other, sizeof other, "%s/freopen.%d", argv[1], rank);
    snprintf(missing, sizeof missing, "%s/missing.%d", argv[1], rank);
    snprintf(inmpi, sizeof inmpi, "%s/inmpi.%d", argv[1], rank);
    snprintf(mpiio, sizeof mpiio, "%s/mpiio", argv[1]);
    int rc = posix_files(posix, missing, n);
    if (rc == 0)
        rc = stdio_files(stdio, other, n);
    if (rc == 0)
        rc = close_inside_mpi(inmpi);
    if (rc == 0)
        rc = mpiio_files(mpiio, n);
    MPI_Finalize(); /* site:finalize */
    return rc;
}
