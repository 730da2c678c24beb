"""phase_job.py A_S B_S — an mpi4py job of two ranks that changes its communication pattern
half way, for tests/hooks/test_phase_change_job.py. For A_S seconds the ranks compute 40 ms
(rank 0) and 50 ms (rank 1), then meet in MPI_Allreduce over 1 MiB (collective bytes, a
steady 10 ms of waiting per step, so a baseline forms even when the node is loaded and
scheduling noise alone would be no steady signal); then, for B_S seconds, they exchange 4
KiB halos with MPI_Sendrecv after computing 10 ms (rank 0) and 30 ms (rank 1), so rank 0
waits about 20 ms per exchange: hundreds of times more waiting per byte, in point-to-point
calls, legitimately. Prints nothing."""

import sys
import time

import numpy as np
from mpi4py import MPI


def main() -> int:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    a_s, b_s = float(sys.argv[1]), float(sys.argv[2])
    vec, total = np.ones(1 << 17), np.zeros(1 << 17)  # 1 MiB of doubles
    until = time.monotonic() + a_s
    go = 1
    while go:
        time.sleep(0.04 if rank == 0 else 0.05)
        comm.Allreduce(vec, total)
        go = comm.bcast(int(time.monotonic() < until) if rank == 0 else None, root=0)
    out, into = np.ones(4096, dtype=np.uint8), np.zeros(4096, dtype=np.uint8)
    until = time.monotonic() + b_s
    go = 1
    while go:
        time.sleep(0.01 if rank == 0 else 0.03)
        comm.Sendrecv(out, dest=1 - rank, recvbuf=into, source=1 - rank)
        go = comm.bcast(int(time.monotonic() < until) if rank == 0 else None, root=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
