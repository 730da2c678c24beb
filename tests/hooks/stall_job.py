"""stall_job.py DIR NORMAL_S STALL_S — an mpi4py job whose file writes stall, for
tests/hooks/test_io_stall_job.py. Every rank rewrites the first 16 MiB of DIR/out.<rank>
(one pwrite) every 100 ms for NORMAL_S seconds; then rank 0 goes on so, while rank 1
rewrites its file back to back for STALL_S seconds, having first written its pid and the
wall-clock time (ns) into DIR/stalling (the test then keeps stopping it, mostly inside a
write: the write returns only when the process is resumed)."""

import os
import sys
import time

from mpi4py import MPI

BLOCK = b"x" * (16 << 20)


def rewrite_for(fd: int, seconds: float, pause: float) -> None:
    """Rewrite the file's first block (then sleep `pause`) until `seconds` have passed."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        os.pwrite(fd, BLOCK, 0)
        time.sleep(pause)


def main() -> int:
    comm = MPI.COMM_WORLD
    rank = comm.rank
    out = sys.argv[1]
    normal, stall = float(sys.argv[2]), float(sys.argv[3])
    fd = os.open(os.path.join(out, f"out.{rank}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    rewrite_for(fd, normal, 0.1)
    comm.Barrier()
    if rank == 1:
        with open(os.path.join(out, "stalling.tmp"), "w") as note:
            note.write(f"{os.getpid()} {time.time_ns()}\n")
        os.rename(os.path.join(out, "stalling.tmp"), os.path.join(out, "stalling"))
        rewrite_for(fd, stall, 0.0)
    else:
        rewrite_for(fd, stall, 0.1)
    os.close(fd)
    comm.Barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
