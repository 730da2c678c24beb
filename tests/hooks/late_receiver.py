"""late_receiver.py — an mpi4py job of two ranks, for tests/hooks/test_monitored.py: rank 0
sends 8 MiB to rank 1 with MPI_Send (a rendezvous: the call returns only once rank 1
receives) while rank 1 computes (sleeps) 800 ms before it posts the receive, so the send
is blocked over several of the hooks' 100 ms intervals. Prints nothing."""

import sys
import time

from mpi4py import MPI

SIZE = 8 << 20


def main() -> int:
    comm = MPI.COMM_WORLD
    buf = bytearray(SIZE)
    comm.Barrier()
    if comm.rank == 0:
        comm.Send(buf, dest=1)
    else:
        time.sleep(0.8)
        comm.Recv(buf, source=0)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
