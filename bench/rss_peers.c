/*
 * rss_peers.c — resident memory of libstacklens for a world of N ranks
 * with every peer touched, measured in ONE process (bench/overhead.py runs
 * it under `mpirun -np 1`, with and without the library preloaded).
 *
 * A real 1,024-rank job does not fit a 2-core machine, so this program
 * interposes three PMPI functions (the executable's definitions come first
 * in symbol lookup, also for the preloaded library):
 *   PMPI_Comm_size(MPI_COMM_WORLD) reports N (argv[1]), so the library sizes
 *     its per-peer, RMA and frame-snapshot tables for N ranks;
 *   PMPI_Send to a rank > 0 returns at once (nothing is sent);
 *   PMPI_Recv from a rank > 0 returns a status with that source and the
 *     requested byte count (PMPI_Status_set_elements).
 * The program then sends and "receives" one message of 64 bytes to/from
 * every rank 1..N-1 through MPI_Send / MPI_Recv (the library's wrappers;
 * without the library, the stubs directly),
 * so every peer entry, both frame snapshots and several histogram rows are
 * written; it waits for a few sender intervals (frames built), then prints
 * VmRSS and VmHWM in KiB from /proc/self/status.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fake_size = 1;

/* World size N for MPI_COMM_WORLD, the real size otherwise. */
int PMPI_Comm_size(MPI_Comm comm, int *size)
{
    static int (*real)(MPI_Comm, int *);
    if (real == NULL)
        real = (int (*)(MPI_Comm, int *))dlsym(RTLD_NEXT, "PMPI_Comm_size");
    if (comm == MPI_COMM_WORLD && fake_size > 1) {
        *size = fake_size;
        return MPI_SUCCESS;
    }
    return real(comm, size);
}

/* A send to a simulated rank: nothing happens. */
int PMPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    (void)buf, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    return MPI_SUCCESS;
}

/* A receive from a simulated rank: a status with its source and count bytes. */
int PMPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Status *status)
{
    (void)buf, (void)comm;
    if (status != MPI_STATUS_IGNORE) {
        memset(status, 0, sizeof *status);
        status->MPI_SOURCE = source;
        status->MPI_TAG = tag;
        status->MPI_ERROR = MPI_SUCCESS;
        PMPI_Status_set_elements(status, type, count);
    }
    return MPI_SUCCESS;
}

/* VmRSS and VmHWM of this process in KiB. */
static void print_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss = -1, hwm = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        sscanf(line, "VmRSS: %ld", &rss);
        sscanf(line, "VmHWM: %ld", &hwm);
    }
    if (f != NULL)
        fclose(f);
    printf("%ld %ld\n", rss, hwm);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    fake_size = n;
    MPI_Init(&argc, &argv);
    /* Without the library, MPI_Send would be the MPI library's own (checking
     * dest against the real size): the baseline calls the stubs directly. */
    const char *preload = getenv("LD_PRELOAD");
    int hooked = preload != NULL && strstr(preload, "libstacklens") != NULL;
    char buf[64] = { 0 };
    for (int p = 1; p < n; p++) {
        if (hooked) {
            MPI_Send(buf, sizeof buf, MPI_BYTE, p, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, sizeof buf, MPI_BYTE, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            PMPI_Send(buf, sizeof buf, MPI_BYTE, p, 0, MPI_COMM_WORLD);
            PMPI_Recv(buf, sizeof buf, MPI_BYTE, p, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    usleep(300 * 1000); /* several 10 ms intervals: the sender builds frames */
    print_rss();
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
