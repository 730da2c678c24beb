"""rail_job.py STOPFILE OUTDIR — an mpi4py job of two halves: every rank exchanges CHUNK
bytes with its partner in the other half (rank + size/2) every 20 ms until STOPFILE exists
(rank 0 decides and tells the others with an MPI_Bcast of one byte), then writes how many
exchanges it made to OUTDIR/<rank>.

Used by tests/fabric/test_rails.py: with the halves on two hosts, each rank's bytes cross
the fabric on the rail it is bound to.
"""

import os
import sys
import time
from pathlib import Path

from mpi4py import MPI

#: Bytes each rank sends its partner per exchange.
CHUNK = 2_000_000


def main() -> int:
    """Exchange until told to stop; record the exchanges."""
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    peer = (rank + size // 2) % size
    out, back, flag = bytearray(CHUNK), bytearray(CHUNK), bytearray(1)
    exchanges = 0
    while True:
        comm.Sendrecv([out, MPI.BYTE], dest=peer, recvbuf=[back, MPI.BYTE], source=peer)
        exchanges += 1
        if rank == 0:
            flag[0] = os.path.exists(sys.argv[1])
        comm.Bcast([flag, MPI.BYTE], root=0)
        if flag[0]:
            break
        time.sleep(0.02)
    Path(sys.argv[2], str(rank)).write_text(str(exchanges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
