/*
 * families.c — communicator families with known traffic (tests/hooks/test_families.py).
 * Run on 8 ranks, ranks 0-3 on one host and 4-7 on another (STACKLENS_HOST).
 *
 *   grid    MPI_Cart_create 2x4 (periodic in neither dimension), then
 *   rows    MPI_Cart_sub keeping dimension 1: 2 rows of 4 ranks; 10 x MPI_Allreduce of
 *           1024 doubles (8192 bytes per call and rank)
 *   cols    MPI_Cart_sub keeping dimension 0: 4 columns of 2 ranks; 5 x MPI_Allreduce of
 *           128 ints (512 bytes)
 *   node    MPI_Comm_split colour rank / 4, key rank: the ranks of one host; 3 x
 *           MPI_Allreduce of 8 doubles (64 bytes)
 *   cross   MPI_Comm_split colour rank % 4, key -rank: one rank of each host; 2 x
 *           MPI_Bcast of 256 bytes from rank 0 of the group
 *   pp      MPI_Comm_dup of MPI_COMM_WORLD named "pp": stage i sends 4 messages of 1000
 *           bytes to stage i + 1 (MPI_Send / MPI_Recv)
 *   world   1 x MPI_Allreduce of one double on MPI_COMM_WORLD
 * Every communicator is freed before MPI_Finalize.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 8) {
        fprintf(stderr, "families: run on 8 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static double big[1024], small[8], one[1];
    static int mid[128];
    static char bytes[1000], block[256];

    MPI_Comm grid, rows, cols, node, cross, pp;
    int dims[2] = { 2, 4 }, periods[2] = { 0, 0 };
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    int keep_rows[2] = { 0, 1 }, keep_cols[2] = { 1, 0 };
    MPI_Cart_sub(grid, keep_rows, &rows);
    MPI_Cart_sub(grid, keep_cols, &cols);
    for (int i = 0; i < 10; i++)
        MPI_Allreduce(MPI_IN_PLACE, big, 1024, MPI_DOUBLE, MPI_SUM, rows);
    for (int i = 0; i < 5; i++)
        MPI_Allreduce(MPI_IN_PLACE, mid, 128, MPI_INT, MPI_SUM, cols);

    MPI_Comm_split(MPI_COMM_WORLD, rank / 4, rank, &node);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 4, -rank, &cross);
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(MPI_IN_PLACE, small, 8, MPI_DOUBLE, MPI_SUM, node);
    for (int i = 0; i < 2; i++)
        MPI_Bcast(block, 256, MPI_CHAR, 0, cross);

    MPI_Comm_dup(MPI_COMM_WORLD, &pp);
    MPI_Comm_set_name(pp, "pp");
    int stage;
    MPI_Comm_rank(pp, &stage);
    for (int i = 0; i < 4; i++) {
        if (stage > 0)
            MPI_Recv(bytes, 1000, MPI_CHAR, stage - 1, 7, pp, MPI_STATUS_IGNORE);
        if (stage < size - 1)
            MPI_Send(bytes, 1000, MPI_CHAR, stage + 1, 7, pp);
    }
    MPI_Allreduce(MPI_IN_PLACE, one, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    MPI_Comm *all[] = { &pp, &cross, &node, &cols, &rows, &grid };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        MPI_Comm_free(all[i]);
    MPI_Finalize();
    return 0;
}
