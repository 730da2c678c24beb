/*
 * comm_reuse.c — a freed communicator's id taken by one made another way, on 4 ranks.
 * A = MPI_Comm_split(MPI_COMM_WORLD, 0, rank): the world's group again; 3
 * MPI_Allreduce of 1 int on A; A freed. Then B = MPI_Comm_dup(MPI_COMM_WORLD): the
 * same group, so the id A gave back (src/handles.h); 5 MPI_Allreduce of 2 ints on B;
 * B freed. Then the same split again, twice in a loop (C, D: made as A was, at A's
 * line, so they may share A's id), 1 MPI_Allreduce of 1 int on each, each freed.
 * Expected per rank: A's and the loop's 5 Allreduce calls (20 B) on communicators
 * described as made by the split at its line, B's 5 calls (40 B) on one described as a
 * dup of the world: never one under the other's description.
 */
#include <mpi.h>

/* n MPI_Allreduce of count ints on comm, then comm freed. */
static void use_and_free(MPI_Comm *comm, int n, int count)
{
    int in[2] = { 1, 2 }, out[2];
    for (int i = 0; i < n; i++)
        MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, *comm);
    MPI_Comm_free(comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm a, b;
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &a); /* the split */
    use_and_free(&a, 3, 1);
    MPI_Comm_dup(MPI_COMM_WORLD, &b); /* the dup */
    use_and_free(&b, 5, 2);
    for (int i = 0; i < 2; i++) {
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c); /* the loop's split */
        use_and_free(&c, 1, 1);
    }
    MPI_Finalize();
    return 0;
}
