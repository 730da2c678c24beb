"""mix_job.py DIR — an mpi4py job with known traffic for the attribution test: rank r sends
4 * (1000 + r) bytes to rank r + 1 (a ring), all ranks allreduce 8,192 doubles, rank r
puts 2,000 * (r + 1) bytes into rank r + 1's window and gets 3,000 bytes from rank r - 1's,
and rank r writes 4,096 * (r + 1) bytes to DIR/out.<r>."""

import array
import os
import sys

from mpi4py import MPI


def main() -> int:
    comm = MPI.COMM_WORLD
    rank, size = comm.rank, comm.size
    out = bytearray(4 * (1000 + rank))
    into = bytearray(4 * (1000 + (rank - 1) % size))
    request = comm.Irecv(into, source=(rank - 1) % size)
    comm.Send(out, dest=(rank + 1) % size)
    request.Wait()
    values = array.array("d", [float(rank)] * 8192)
    total = array.array("d", [0.0] * 8192)
    comm.Allreduce(values, total, op=MPI.SUM)
    window = MPI.Win.Create(bytearray(8192), comm=comm)
    window.Fence()
    window.Put(bytearray(2000 * (rank + 1)), (rank + 1) % size)
    window.Fence()
    fetched = bytearray(3000)
    window.Get(fetched, (rank - 1) % size)
    window.Fence()
    window.Free()
    with open(os.path.join(sys.argv[1], f"out.{rank}"), "wb") as f:
        f.write(b"x" * (4096 * (rank + 1)))
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
