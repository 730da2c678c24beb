/*
 * sigterm.c — a job that is killed with SIGTERM mid-run. Run with 2 ranks;
 * argv[1] is a directory.
 *
 * Rank r sends 5 messages of 777*(r+1) bytes to rank 1-r and receives the
 * peer's 5 (MPI_Send / MPI_Recv, rank 0 first), then MPI_Barrier, then
 * writes its pid to DIR/pid.<r> and sleeps until it is killed. It installs
 * no signal handler. EXPECTED (delivered only if the library flushes on
 * SIGTERM when the interval is long): rank r sent 5 messages,
 * 3885*(r+1) bytes, to 1-r; 5 MPI_Send, 5 MPI_Recv, 1 MPI_Barrier calls.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char buf[2000] = { 0 };
    for (int turn = 0; turn < 2; turn++) {
        for (int i = 0; i < 5; i++) {
            if (turn == rank)
                MPI_Send(buf, 777 * (rank + 1), MPI_BYTE, 1 - rank, i, MPI_COMM_WORLD);
            else
                MPI_Recv(buf, sizeof buf, MPI_BYTE, 1 - rank, i, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/pid.%d", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return 1;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    rename(tmp, path);
    for (;;)
        pause();
}
