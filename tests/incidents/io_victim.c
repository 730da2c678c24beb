/* tests/incidents/io_victim.c — a job whose file system becomes slow, for
 * tests/incidents/test_io_victim.py:
 *
 *   mpirun -np 2 ./io_victim DIR MODE NORMAL_S SLOW_S
 *
 * Every rank writes its 1 MiB block (at offset rank x 1 MiB of one shared file) and then
 * computes (sleeps) 100 ms, for NORMAL_S seconds into DIR/fast/data, then, after a
 * barrier at which rank 0 notes the wall-clock time (ns) in DIR/slow_from, for SLOW_S
 * seconds into DIR/slow/data: the test preloads tests/incidents/slowfs.c, which makes
 * every write under DIR/slow take longer, as a slowed file system does. MODE mpiio writes
 * with MPI_File_write_at (the file opened on MPI_COMM_WORLD), MODE posix with pwrite;
 * both phases write through write_block, so every write is at one call site (the line
 * marked site:write). Each rank prints "writes <fast> <slow>": its writes to each file. */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (1 << 20)
#define PERIOD_MS 100

static char block[BLOCK];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void compute_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {
    }
}

/* One open file: an MPI file handle (mpiio) or a descriptor (posix). */
typedef struct target {
    int posix;
    MPI_File fh;
    int fd;
} target;

static target open_target(const char *path, int posix)
{
    target t = { .posix = posix, .fh = MPI_FILE_NULL, .fd = -1 };
    if (posix)
        t.fd = open(path, O_WRONLY | O_CREAT, 0644);
    else if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE,
                           MPI_INFO_NULL, &t.fh) != MPI_SUCCESS)
        t.fh = MPI_FILE_NULL;
    if ((posix && t.fd < 0) || (!posix && t.fh == MPI_FILE_NULL))
        MPI_Abort(MPI_COMM_WORLD, 3);
    return t;
}

static void close_target(target *t)
{
    if (t->posix)
        close(t->fd);
    else
        MPI_File_close(&t->fh);
}

/* Write this rank's block. */
__attribute__((noinline)) static void write_block(target *t, int rank)
{
    MPI_Offset at = (MPI_Offset)rank * BLOCK;
    int ok;
    if (t->posix)
        ok = pwrite(t->fd, block, BLOCK, (off_t)at) == BLOCK; /* site:write-posix */
    else
        ok = !MPI_File_write_at(t->fh, at, block, BLOCK, MPI_BYTE, MPI_STATUS_IGNORE); /* site:write-mpiio */
    if (!ok)
        MPI_Abort(MPI_COMM_WORLD, 4);
}

/* Write and compute for `seconds` into `path`; the number of writes. */
static long phase(const char *path, int posix, int rank, double seconds)
{
    target t = open_target(path, posix);
    long writes = 0;
    double until = now_s() + seconds;
    while (now_s() < until) {
        write_block(&t, rank);
        writes++;
        compute_ms(PERIOD_MS);
    }
    /* the ranks close together: a collective MPI_File_close would otherwise wait for the
     * rank still writing, and its time rise with the slow writes' */
    MPI_Barrier(MPI_COMM_WORLD);
    close_target(&t);
    return writes;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 5)
        MPI_Abort(MPI_COMM_WORLD, 2);
    const char *dir = argv[1];
    int posix = strcmp(argv[2], "posix") == 0;
    double normal = atof(argv[3]), slow = atof(argv[4]);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(block, 'x', sizeof block);
    char path[4096];
    snprintf(path, sizeof path, "%s/fast/data", dir);
    long fast = phase(path, posix, rank, normal);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        snprintf(path, sizeof path, "%s/slow_from", dir);
        FILE *f = fopen(path, "w");
        if (f == NULL)
            MPI_Abort(MPI_COMM_WORLD, 5);
        fprintf(f, "%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/slow/data", dir);
    long slowed = phase(path, posix, rank, slow);
    printf("writes %ld %ld\n", fast, slowed);
    MPI_Finalize();
    return 0;
}
