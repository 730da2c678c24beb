"""stall_job.py DIR OUT NORMAL_S STALL_S — an mpi4py job whose file writes stall, for
tests/hooks/test_io_stall_job.py, run with tests/incidents/slowfs.c preloaded (the test
makes every write under DIR/steady a little slow and every write under DIR/stalled very
slow). Every rank rewrites the first 64 KiB of DIR/steady/out.<rank> (one pwrite) every
100 ms for NORMAL_S seconds; then rank 0 goes on so, while rank 1 rewrites the first
64 KiB of DIR/stalled/out.1 back to back for STALL_S seconds. At the end each rank writes
"<steady> <stalled> <ns>" into OUT/writes.<rank>: its writes to each file and the
wall-clock time at which the stalled writes began (a file per rank: the launcher may
interleave the ranks' output)."""

import os
import sys
import time

from mpi4py import MPI

BLOCK = b"x" * (64 << 10)


def rewrite_for(path: str, seconds: float, pause: float) -> int:
    """Rewrite the first block of `path` (then sleep `pause`) until `seconds` have passed;
    the number of writes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    writes = 0
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        os.pwrite(fd, BLOCK, 0)
        writes += 1
        time.sleep(pause)
    os.close(fd)
    return writes


def main() -> int:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    fs, out = sys.argv[1], sys.argv[2]
    normal, stall = float(sys.argv[3]), float(sys.argv[4])
    steady = os.path.join(fs, "steady", f"out.{rank}")
    writes = rewrite_for(steady, normal, 0.1)
    comm.Barrier()
    stalled, began = 0, time.time_ns()
    if rank == 1:
        stalled = rewrite_for(os.path.join(fs, "stalled", "out.1"), stall, 0.0)
    else:
        writes += rewrite_for(steady, stall, 0.1)
    comm.Barrier()
    with open(os.path.join(out, f"writes.{rank}"), "w") as said:
        said.write(f"{writes} {stalled} {began}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
