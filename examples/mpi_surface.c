/*
 * mpi_surface.c — a known pattern over the wrapped MPI surface, for exact
 * checks of what stacklens reports (tests/hooks/test_surface.py computes the
 * expected values from the formulas below). Run with 4 ranks (any size >= 2
 * works); argv[1] is a directory for the files it writes.
 *
 *   Irecv + Waitall: rank r receives from every other rank p a message of
 *     100*(r+1)+p bytes, posted with a larger count (4096): the status gives
 *     the real size. Isend side counts the same bytes.
 *   Persistent: ranks 0 and 1 exchange 3 times 64 bytes (Send_init/Recv_init,
 *     Start, Wait).
 *   Collectives: Barrier; Bcast of 1000 bytes from root 1; Allreduce of 10
 *     ints; Alltoall of 8 bytes to every rank; on a split communicator of the
 *     even / odd ranks an Allreduce of 1 double.
 *   RMA: rank r puts 16 bytes into rank (r+1)%size and gets 8 bytes from
 *     rank (r+2)%size inside one fence epoch.
 *   MPI-IO: every rank writes 1000 bytes at offset 1000*r of DIR/mpiio.dat
 *     (write_at_all).
 *   POSIX: rank r writes 3 times 4096 bytes to DIR/posix.<r> and reads them
 *     back in one read of 12288.
 *   stdio: rank r fwrites 5 records of 100 bytes to DIR/stdio.<r>.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Point-to-point: uneven sizes, receive count larger than the message. */
static void p2p(int rank, int size)
{
    char *rbuf = calloc((size_t)size, 4096), *sbuf = calloc(1, 4096);
    MPI_Request *req = calloc(2 * (size_t)size, sizeof *req);
    int n = 0;
    for (int p = 0; p < size; p++)
        if (p != rank)
            MPI_Irecv(rbuf + 4096 * p, 4096, MPI_BYTE, p, 7, MPI_COMM_WORLD, &req[n++]);
    for (int p = 0; p < size; p++)
        if (p != rank)
            MPI_Isend(sbuf, 100 * (p + 1) + rank, MPI_BYTE, p, 7, MPI_COMM_WORLD, &req[n++]);
    MPI_Status *st = calloc(2 * (size_t)size, sizeof *st);
    MPI_Waitall(n, req, st);
    free(st);
    free(rbuf);
    free(sbuf);
    free(req);
}

/* Persistent requests between ranks 0 and 1. */
static void persistent(int rank)
{
    if (rank > 1)
        return;
    char s[64] = { 0 }, r[64];
    MPI_Request sreq, rreq;
    MPI_Send_init(s, 64, MPI_BYTE, 1 - rank, 9, MPI_COMM_WORLD, &sreq);
    MPI_Recv_init(r, 64, MPI_BYTE, 1 - rank, 9, MPI_COMM_WORLD, &rreq);
    for (int i = 0; i < 3; i++) {
        MPI_Start(&rreq);
        MPI_Start(&sreq);
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
        MPI_Wait(&rreq, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&sreq);
    MPI_Request_free(&rreq);
}

/* Collectives on the world and on a split communicator. */
static void collectives(int rank, int size)
{
    char bbuf[1000] = { 0 };
    int ibuf[10] = { 0 }, iout[10];
    char *a2a = calloc((size_t)size, 16);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(bbuf, 1000, MPI_BYTE, 1, MPI_COMM_WORLD);
    MPI_Allreduce(ibuf, iout, 10, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Alltoall(a2a, 8, MPI_BYTE, a2a + 8 * size, 8, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    double d = rank, dsum;
    MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, half);
    MPI_Comm_free(&half);
    free(a2a);
}

/* One fence epoch of Put and Get. */
static void rma(int rank, int size)
{
    char *base;
    MPI_Win win;
    MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    char src[16] = { 0 }, dst[8];
    MPI_Win_fence(0, win);
    MPI_Put(src, 16, MPI_BYTE, (rank + 1) % size, 0, 16, MPI_BYTE, win);
    MPI_Get(dst, 8, MPI_BYTE, (rank + 2) % size, 32, 8, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
}

/* MPI-IO: 1000 bytes per rank into one shared file. */
static void mpiio(int rank, const char *dir)
{
    char path[4096], buf[1000] = { 0 };
    snprintf(path, sizeof path, "%s/mpiio.dat", dir);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, 1000 * rank, buf, 1000, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
}

/* POSIX and stdio files of this rank. */
static int files(int rank, const char *dir)
{
    char path[4096], buf[12288] = { 0 };
    snprintf(path, sizeof path, "%s/posix.%d", dir, rank);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0)
        return 1;
    for (int i = 0; i < 3; i++)
        if (write(fd, buf, 4096) != 4096)
            return 1;
    lseek(fd, 0, SEEK_SET);
    if (read(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        return 1;
    close(fd);
    snprintf(path, sizeof path, "%s/stdio.%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f == NULL || fwrite(buf, 100, 5, f) != 5)
        return 1;
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    p2p(rank, size);
    persistent(rank);
    collectives(rank, size);
    rma(rank, size);
    mpiio(rank, dir);
    int bad = files(rank, dir);
    MPI_Finalize();
    if (rank == 0)
        printf("mpi_surface: done\n");
    return bad;
}
