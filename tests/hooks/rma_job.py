"""rma_job.py DIR NORMAL_S LATE_S — an mpi4py job of two ranks synchronising one-sided
transfers, for tests/hooks/test_rma_victim_job.py. Each iteration rank 0 computes 10 ms
and rank 1 60 ms (rank 0 waits about 50 ms in the first MPI_Win_fence: a steady
baseline that a loaded machine's noise of some ms does not blur), then each puts 1 MiB
into the other's window between two MPI_Win_fence calls; for NORMAL_S seconds, then for
LATE_S seconds rank 1 computes 540 ms more (it arrives late), so rank 0 waits about 12
times as long in MPI_Win_fence: time blocked in RMA synchronisation. Rank 1 writes the
wall-clock time (ns) it starts being late into DIR/late. Prints nothing."""

import os
import sys
import time

import numpy as np
from mpi4py import MPI


def main() -> int:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    out, normal, late = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    local = np.zeros(1 << 17)  # 1 MiB of doubles, the window
    data = np.ones(1 << 17)
    win = MPI.Win.Create(local, comm=comm)
    for phase, seconds in ((0, normal), (1, late)):
        if phase and rank == 1:
            with open(os.path.join(out, "late.tmp"), "w") as note:
                note.write(f"{time.time_ns()}\n")
            os.rename(os.path.join(out, "late.tmp"), os.path.join(out, "late"))
        until = time.monotonic() + seconds
        go = 1
        while go:
            time.sleep(0.01 if rank == 0 else 0.06 + (0.54 if phase else 0.0))
            win.Fence()
            win.Put(data, 1 - rank)
            win.Fence()
            go = comm.bcast(int(time.monotonic() < until) if rank == 0 else None, root=0)
    win.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
