"""hold_job.py STOPFILE — an mpi4py job that idles (a broadcast every 20 ms) until STOPFILE exists.

Used by tests that change things between the hook library's intervals while a job runs.
"""

import os
import sys
import time

from mpi4py import MPI


def main() -> int:
    """Broadcast loop; rank 0 decides when to stop and tells the others."""
    comm = MPI.COMM_WORLD
    stop = False
    while not stop:
        time.sleep(0.02)
        stop = comm.bcast(os.path.exists(sys.argv[1]) if comm.rank == 0 else None, root=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
