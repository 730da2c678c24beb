"""py_sites.py — an mpi4py program whose call sites are known, for
tests/callsites/test_python.py (any number of ranks >= 2).

Every rank: 3 uppercase Allreduce of 8 float64 (64 bytes) from the line marked small and 5
of 500 float64 (4000 bytes) from the line marked large, both in `reduce_all`, called from
two lines of `main` (marked first and second: 1 and 2 rounds); then rank 0 sends 25 int32
(100 bytes) to every other rank with the uppercase Send in `exchange` (marked send), which
receives them with the uppercase Recv (marked recv), called from `main` (marked
exchange). Then one Barrier from a Python thread (marked thread) and one from a generator
(marked generator). `from mpi4py import MPI` (marked init) initialises MPI. Under MPICH mpi4py 4
calls the MPI-4 large-count functions (MPI_Send_c).
"""

from __future__ import annotations

import threading
from array import array

from mpi4py import MPI  # site:init


def reduce_all(comm: MPI.Comm, rounds: int) -> None:
    """3 small and 5 large sums per round."""
    for _ in range(rounds):
        for _ in range(3):
            small = array("d", [1.0] * 8)
            comm.Allreduce(MPI.IN_PLACE, small, op=MPI.SUM)  # site:small
        for _ in range(5):
            large = array("d", [1.0] * 500)
            comm.Allreduce(MPI.IN_PLACE, large, op=MPI.SUM)  # site:large


def exchange(comm: MPI.Comm) -> None:
    """Rank 0 sends 100 bytes to every other rank."""
    data = array("i", range(25))
    if comm.Get_rank() == 0:
        for peer in range(1, comm.Get_size()):
            comm.Send(data, dest=peer, tag=7)  # site:send
    else:
        comm.Recv(data, source=0, tag=7)  # site:recv


def barrier_in_thread(comm: MPI.Comm) -> None:
    """One Barrier from another Python thread."""
    worker = threading.Thread(target=lambda: comm.Barrier())  # site:thread
    worker.start()
    worker.join()


def barriers(comm: MPI.Comm):  # type: ignore[no-untyped-def]
    """A generator making one Barrier."""
    comm.Barrier()  # site:generator
    yield


def main() -> None:
    """The pattern of the module doc."""
    comm = MPI.COMM_WORLD
    reduce_all(comm, 1)  # site:first
    reduce_all(comm, 2)  # site:second
    exchange(comm)  # site:exchange
    barrier_in_thread(comm)
    for _ in barriers(comm):
        pass


if __name__ == "__main__":
    main()
