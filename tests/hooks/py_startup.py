"""py_startup.py — an mpi4py program whose imports come before MPI_Init (mpi4py calls it
at `from mpi4py import MPI`), for tests/hooks/test_exact_counts.py.

After MPI_Init each rank appends 1024 bytes to OUT (sys.argv[1]) with one open and one
write, the ranks taking turns a Barrier apart.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI


def main() -> int:
    """Each rank appends 1024 bytes to sys.argv[1] in turn; returns the exit status."""
    comm = MPI.COMM_WORLD
    for turn in range(comm.Get_size()):
        if turn == comm.Get_rank():
            with open(sys.argv[1], "ab", buffering=0) as out:
                out.write(np.zeros(128, dtype=np.float64).tobytes())
        comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
