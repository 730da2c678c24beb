"""py_pattern.py — an mpi4py program with a known pattern, for tests/hooks/test_languages.py.

Any number of ranks >= 2. Pairs (a, b), a < b, are walked in the same order on every rank;
in a pair, a sends first. Per ordered pair (r, p), r != p, rank r sends rank p:
  * one numpy float64 array of 10*(p+1)+r elements with the uppercase Send
    (8*(10*(p+1)+r) bytes, received with the uppercase Recv into a larger buffer);
  * rank 0 only: one pickled object with the lowercase send, PICKLED below (the test
    computes its size with the same pickle protocol as mpi4py).
Then one uppercase Allreduce of 4 int64 (32 bytes). Exit status 1 on a size mismatch.
Under MPICH, mpi4py 4 calls the MPI-4 large-count functions (MPI_Send_c, ...).
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

#: The object rank 0 sends to every other rank with the lowercase (pickle) send.
PICKLED = {"rank": 0, "values": list(range(10)), "name": "stacklens"}


def main() -> int:
    """Runs the pattern; returns the exit status."""
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    bad = 0
    inbox = np.empty(10 * (size + 1) + size, dtype=np.float64)
    for a in range(size):
        for b in range(a + 1, size):
            if rank not in (a, b):
                continue
            peer = b if rank == a else a
            mine = np.zeros(10 * (peer + 1) + rank, dtype=np.float64)
            status = MPI.Status()
            for turn in (a, b):
                if turn == rank:
                    comm.Send(mine, dest=peer, tag=1)
                    if rank == 0:
                        comm.send(PICKLED, dest=peer, tag=2)
                else:
                    comm.Recv(inbox, source=peer, tag=1, status=status)
                    bad |= status.Get_count(MPI.DOUBLE) != 10 * (rank + 1) + peer
                    if peer == 0:
                        bad |= comm.recv(source=peer, tag=2) != PICKLED
    total = np.zeros(4, dtype=np.int64)
    comm.Allreduce(np.ones(4, dtype=np.int64), total, op=MPI.SUM)
    bad |= int(total[0]) != size
    return int(bad)


if __name__ == "__main__":
    sys.exit(main())
