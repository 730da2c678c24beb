/*
 * rma_atomic.c — the accumulate and atomic one-sided operations, each rank on the next
 * rank's window of 8 longs (MPI_Win_allocate), under MPI_Win_lock_all; see suite.h for
 * what it prints. (Never on its own window: Open MPI 4.1.4's osc/rdma dies of SIGSEGV
 * in MPI_Compare_and_swap on the origin's own window over vader, hooks or not.) Each
 * rank: MPI_Accumulate of 2 longs (MPI_SUM, at 0), MPI_Get_accumulate of 1
 * long (MPI_SUM, at 2), MPI_Fetch_and_op (MPI_SUM of 1, at 3), MPI_Compare_and_swap (at
 * 4: 0 -> rank + 1), MPI_Raccumulate of 1 long (MPI_MAX, at 5) and
 * MPI_Rget_accumulate of 1 long (MPI_SUM, at 6), each completed by MPI_Wait, then
 * MPI_Win_flush of the next rank. Payload bytes: origin count x type, one element for Fetch_and_op
 * and Compare_and_swap.
 */
#include "suite.h"

int main(int argc, char **argv)
{
    int rank, size;
    suite_init(&argc, &argv, &rank, &size);
    long *base;
    MPI_Win win;
    MPI_Win_allocate(8 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    suite_count("MPI_Win_allocate", 0);
    memset(base, 0, 8 * sizeof(long));
    MPI_Barrier(MPI_COMM_WORLD); /* the windows are zero before anyone adds */
    suite_count("MPI_Barrier", 0);
    const long L = sizeof(long);
    long two[2] = { 1, 10 }, one = 1, old = -1, cmp = 0, me = rank + 1, was = -1;
    long mx = rank, res = -1;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Request req;
    MPI_Win_lock_all(0, win);
    suite_count("MPI_Win_lock_all", 0);
    MPI_Accumulate(two, 2, MPI_LONG, next, 0, 2, MPI_LONG, MPI_SUM, win);
    suite_count("MPI_Accumulate", 2 * L);
    MPI_Get_accumulate(&one, 1, MPI_LONG, &old, 1, MPI_LONG, next, 2, 1, MPI_LONG, MPI_SUM, win);
    suite_count("MPI_Get_accumulate", L);
    MPI_Fetch_and_op(&one, &old, MPI_LONG, next, 3, MPI_SUM, win);
    suite_count("MPI_Fetch_and_op", L);
    MPI_Compare_and_swap(&me, &cmp, &was, MPI_LONG, next, 4, win);
    suite_count("MPI_Compare_and_swap", L);
    MPI_Raccumulate(&mx, 1, MPI_LONG, next, 5, 1, MPI_LONG, MPI_MAX, win, &req);
    suite_count("MPI_Raccumulate", L);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    MPI_Rget_accumulate(&one, 1, MPI_LONG, &res, 1, MPI_LONG, next, 6, 1, MPI_LONG, MPI_SUM, win,
                        &req);
    suite_count("MPI_Rget_accumulate", L);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    suite_count("MPI_Wait", 0);
    MPI_Win_flush(next, win);
    suite_count("MPI_Win_flush", 0);
    MPI_Win_unlock_all(win);
    suite_count("MPI_Win_unlock_all", 0);
    suite_check(old == 0 && res == 0 && was == 0, "fetched values");
    MPI_Barrier(MPI_COMM_WORLD); /* every operation on this window is done */
    suite_count("MPI_Barrier", 0);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win); /* the window's memory, made visible */
    suite_count("MPI_Win_lock", 0);
    suite_check(base[0] == 1 && base[1] == 10, "accumulate");
    suite_check(base[2] == 1 && base[3] == 1 && base[6] == 1, "atomics");
    suite_check(base[4] == prev + 1 && base[5] == prev, "cas max");
    MPI_Win_unlock(rank, win);
    suite_count("MPI_Win_unlock", 0);
    MPI_Win_free(&win);
    suite_count("MPI_Win_free", 0);
    return suite_end();
}
