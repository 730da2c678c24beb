/*
 * rma_fence.c — one-sided transfers in fence epochs on a window of 64 ints per rank
 * (MPI_Win_allocate); see suite.h for what it prints. In one epoch rank r puts 4 ints
 * into the next rank (at 4 r), gets 2 ints from the previous one and accumulates 3 ints
 * (MPI_SUM) into the next one (at 32). Payload bytes: origin count x type.
 */
#include "suite.h"

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    int *base;
    MPI_Win win;
    MPI_Win_allocate(64 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    suite_count("MPI_Win_allocate", 0);
    for (int i = 0; i < 64; i++)
        base[i] = rank * 1000 + i;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int put[4] = { rank, rank, rank, rank }, got[2] = { -1, -1 }, acc[3] = { 1, 2, 3 };
    MPI_Win_fence(0, win);
    suite_count("MPI_Win_fence", 0);
    MPI_Put(put, 4, MPI_INT, next, 4 * rank, 4, MPI_INT, win);
    suite_count("MPI_Put", 16);
    MPI_Get(got, 2, MPI_INT, prev, 60, 2, MPI_INT, win);
    suite_count("MPI_Get", 8);
    MPI_Accumulate(acc, 3, MPI_INT, next, 32, 3, MPI_INT, MPI_SUM, win);
    suite_count("MPI_Accumulate", 12);
    MPI_Win_fence(0, win);
    suite_count("MPI_Win_fence", 0);
    suite_check(got[0] == prev * 1000 + 60 && got[1] == prev * 1000 + 61, "get");
    suite_check(base[4 * prev] == prev && base[4 * prev + 3] == prev, "put");
    suite_check(base[34] == rank * 1000 + 34 + 3, "accumulate");
    MPI_Win_free(&win);
    suite_count("MPI_Win_free", 0);
    return suite_end();
}
