/* tests/compare/phases.c — an MPI program whose call sites change between two runs in a
 * known way, with the same command line: every iteration the slow rank sleeps PHASES_SLOW_MS
 * milliseconds (environment; 0 when unset) before an MPI_Barrier, where the other ranks
 * wait for it, then every rank calls MPI_Allreduce on one double (no rank waits there);
 * with PHASES_BCAST=1 every rank also calls MPI_Bcast on one int. Ranks are split into
 * pairs (the family "split at phases.c:<line>, n groups of 2"); with PHASES_COUNT=n (n > 0)
 * every rank also calls MPI_Allreduce on n doubles in its pair, so two runs differing only
 * in n differ in message size at one line and one family. PHASES_SLOW_RANK chooses the
 * rank that sleeps (default 1). With PHASES_OUT=<path> and PHASES_WRITE=n (n > 0) rank 0
 * writes n bytes to that file (opened once, truncated) in one write() every iteration.
 * Each marked line is found by its marker in the tests. Argument: iterations. */
#include <fcntl.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long env_long(const char *name)
{
    const char *value = getenv(name);
    return value ? atol(value) : 0;
}

static void sleep_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int iterations = argc > 1 ? atoi(argv[1]) : 10, rank, seed = 7;
    long slow_ms = env_long("PHASES_SLOW_MS"), bcast = env_long("PHASES_BCAST");
    long count = env_long("PHASES_COUNT"), write_bytes = env_long("PHASES_WRITE");
    long slow_rank = getenv("PHASES_SLOW_RANK") ? env_long("PHASES_SLOW_RANK") : 1;
    const char *out = getenv("PHASES_OUT");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair); /* site:split */
    double value = rank, sum = 0;
    double *block = count > 0 ? malloc(2 * (size_t)count * sizeof(double)) : NULL;
    if (block)
        memset(block, 0, 2 * (size_t)count * sizeof(double));
    int fd = -1;
    char *chunk = NULL;
    if (rank == 0 && out != NULL && write_bytes > 0) {
        fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        chunk = calloc(1, (size_t)write_bytes);
    }
    for (int i = 0; i < iterations; i++) {
        if (rank == slow_rank)
            sleep_ms(slow_ms);
        MPI_Barrier(MPI_COMM_WORLD); /* site:slow */
        MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* site:steady */
        if (bcast)
            MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD); /* site:extra */
        if (block)
            MPI_Allreduce(block, block + count, (int)count, MPI_DOUBLE, MPI_SUM, pair); /* site:sized */
        if (fd >= 0 && chunk != NULL && write(fd, chunk, (size_t)write_bytes) != write_bytes)
            break;
    }
    if (fd >= 0)
        close(fd);
    free(chunk);
    free(block);
    MPI_Comm_free(&pair);
    MPI_Finalize();
    return 0;
}
