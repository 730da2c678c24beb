/*
 * rma_pscw.c — one-sided transfers in post/start/complete/wait epochs on a window of
 * 16 ints per rank (MPI_Win_create over the program's own array); see suite.h for what
 * it prints. Rank r exposes its window to the previous rank and accesses the next one:
 * puts 5 ints (at 0) and gets 1 int (at 15). Payload bytes: origin count x type.
 */
#include "suite.h"

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    int mem[16];
    for (int i = 0; i < 16; i++)
        mem[i] = rank * 100 + i;
    MPI_Win win;
    MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    suite_count("MPI_Win_create", 0);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Group world, exposed_to, access;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    suite_count("MPI_Comm_group", 0);
    MPI_Group_incl(world, 1, &prev, &exposed_to);
    MPI_Group_incl(world, 1, &next, &access);
    int put[5] = { 7, 7, 7, 7, rank }, got = -1;
    MPI_Win_post(exposed_to, 0, win);
    suite_count("MPI_Win_post", 0);
    MPI_Win_start(access, 0, win);
    suite_count("MPI_Win_start", 0);
    MPI_Put(put, 5, MPI_INT, next, 0, 5, MPI_INT, win);
    suite_count("MPI_Put", 20);
    MPI_Get(&got, 1, MPI_INT, next, 15, 1, MPI_INT, win);
    suite_count("MPI_Get", 4);
    MPI_Win_complete(win);
    suite_count("MPI_Win_complete", 0);
    MPI_Win_wait(win);
    suite_count("MPI_Win_wait", 0);
    suite_check(got == next * 100 + 15, "get");
    suite_check(mem[0] == 7 && mem[4] == prev, "put");
    MPI_Group_free(&exposed_to);
    MPI_Group_free(&access);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    suite_count("MPI_Win_free", 0);
    return suite_end();
}
