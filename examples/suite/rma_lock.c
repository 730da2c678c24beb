/*
 * rma_lock.c — passive-target one-sided transfers on a window of 32 ints per rank
 * (MPI_Win_create); see suite.h for what it prints. Rank r, under an exclusive
 * MPI_Win_lock of the next rank, puts 6 ints (at 2 r), flushes, gets 2 ints (at 30) and
 * unlocks; then under MPI_Win_lock_all it puts 3 ints with MPI_Rput (at 16 + 4 r) and
 * gets 1 int with MPI_Rget (at 31), each completed by MPI_Wait, flushes the next rank
 * locally, then every rank, and unlocks all. Payload bytes: origin count x type.
 */
#include "suite.h"

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    int mem[32];
    for (int i = 0; i < 32; i++)
        mem[i] = rank * 100 + i;
    MPI_Win win;
    MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    suite_count("MPI_Win_create", 0);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int six[6] = { 5, 5, 5, 5, 5, rank }, two[2] = { -1, -1 };
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win);
    suite_count("MPI_Win_lock", 0);
    MPI_Put(six, 6, MPI_INT, next, 2 * rank, 6, MPI_INT, win);
    suite_count("MPI_Put", 24);
    MPI_Win_flush(next, win);
    suite_count("MPI_Win_flush", 0);
    MPI_Get(two, 2, MPI_INT, next, 30, 2, MPI_INT, win);
    suite_count("MPI_Get", 8);
    MPI_Win_unlock(next, win);
    suite_count("MPI_Win_unlock", 0);
    suite_check(two[0] == next * 100 + 30 && two[1] == next * 100 + 31, "get");

    MPI_Barrier(MPI_COMM_WORLD); /* every exclusive epoch is over */
    suite_count("MPI_Barrier", 0);
    int three[3] = { 9, 9, rank }, one = -1;
    MPI_Request req;
    MPI_Win_lock_all(0, win);
    suite_count("MPI_Win_lock_all", 0);
    MPI_Rput(three, 3, MPI_INT, next, 16 + 4 * (rank % 3), 3, MPI_INT, win, &req);
    suite_count("MPI_Rput", 12);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    MPI_Rget(&one, 1, MPI_INT, next, 31, 1, MPI_INT, win, &req);
    suite_count("MPI_Rget", 4);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    MPI_Win_flush_local(next, win);
    suite_count("MPI_Win_flush_local", 0);
    MPI_Win_flush_all(win);
    suite_count("MPI_Win_flush_all", 0);
    MPI_Win_unlock_all(win);
    suite_count("MPI_Win_unlock_all", 0);
    suite_check(one == next * 100 + 31, "rget");
    MPI_Barrier(MPI_COMM_WORLD); /* every transfer into this window is done */
    suite_count("MPI_Barrier", 0);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win); /* the window's memory, made visible */
    suite_count("MPI_Win_lock", 0);
    suite_check(mem[2 * prev + 5] == prev && mem[16 + 4 * (prev % 3) + 2] == prev, "put rput");
    MPI_Win_unlock(rank, win);
    suite_count("MPI_Win_unlock", 0);
    MPI_Win_free(&win);
    suite_count("MPI_Win_free", 0);
    return suite_end();
}
