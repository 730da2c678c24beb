/* examples/incident_job.c — the two jobs of the staged incident of `stacklens demo`
 * (stacklens_cli/demo_incident.py): they run side by side until SECONDS have passed, and
 * behave differently while the file FLAG exists (the demo creates it when it congests the
 * shared spine link, and removes it afterwards).
 *
 *   mpirun -np 2 ./incident_job solver SECONDS FLAG       the victim
 *   mpirun -np 2 ./incident_job checkpoint SECONDS FLAG DIR  the aggressor
 *
 * solver: every iteration each rank computes (sleeps) 20 ms, rank 0 5 ms longer, meets
 * the other in MPI_Allreduce over 128 KiB, then sends it 256 KiB; while FLAG exists rank 0
 * arrives 200 ms late (its data is stuck behind the congested link), so the other waits in
 * the collective: the job's collective time per byte rises (about 40-fold).
 * checkpoint: every iteration 20 ms of compute and 4 MiB to the other rank (the bulk of
 * the spine link's traffic); while FLAG exists it also writes a 4 MiB checkpoint per rank
 * with MPI_File_write_at_all to DIR/ckpt.dat every tenth iteration.
 * Exits 0 after SECONDS; prints nothing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void compute_ms(long ms)
{
    struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) {
    }
}

enum { P2P_SOLVER = 256 << 10, P2P_CHECKPOINT = 4 << 20, REDUCE = (128 << 10) / 8,
       CKPT = 4 << 20 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int checkpoint = argc == 5 && strcmp(argv[1], "checkpoint") == 0;
    if (size != 2 || !(checkpoint || (argc == 4 && strcmp(argv[1], "solver") == 0)))
        MPI_Abort(MPI_COMM_WORLD, 2);
    double seconds = atof(argv[2]);
    const char *flag = argv[3];
    char path[4096];
    if (checkpoint)
        snprintf(path, sizeof path, "%s/ckpt.dat", argv[4]);
    size_t p2p = checkpoint ? P2P_CHECKPOINT : P2P_SOLVER;
    char *out = calloc(p2p, 1), *in = calloc(p2p, 1), *ckpt = checkpoint ? calloc(CKPT, 1) : NULL;
    double *vec = calloc(REDUCE, sizeof *vec), *sum = calloc(REDUCE, sizeof *sum);
    if (!out || !in || !vec || !sum || (checkpoint && !ckpt))
        MPI_Abort(MPI_COMM_WORLD, 3);
    double start = MPI_Wtime();
    int stop = 0, written = 0;
    while (!stop) {
        int now = 0; /* rank 0 decides, so both ranks agree on the phase */
        if (rank == 0)
            now = access(flag, F_OK) == 0;
        MPI_Bcast(&now, 1, MPI_INT, 0, MPI_COMM_WORLD);
        compute_ms(20 + (rank == 0 && !checkpoint ? 5 + (now ? 200 : 0) : 0));
        if (!checkpoint) /* the one who arrived first waits here for the late one */
            MPI_Allreduce(vec, sum, REDUCE, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Sendrecv(out, (int)p2p, MPI_BYTE, 1 - rank, 0, in, (int)p2p, MPI_BYTE, 1 - rank, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (checkpoint && now && ++written % 10 == 1) {
            MPI_File fh;
            MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                          &fh);
            MPI_File_write_at_all(fh, (MPI_Offset)rank * CKPT, ckpt, CKPT, MPI_BYTE,
                                  MPI_STATUS_IGNORE);
            MPI_File_close(&fh);
        }
        double elapsed = MPI_Wtime() - start;
        if (rank == 0)
            stop = elapsed >= seconds;
        MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    free(out), free(in), free(ckpt), free(vec), free(sum);
    MPI_Finalize();
    return 0;
}
