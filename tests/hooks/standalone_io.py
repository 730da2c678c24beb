"""Standalone (non-MPI) programs run under the hook library by test_standalone_io.py.

    python standalone_io.py fds DIR FD     the sender thread's descriptor table
    python standalone_io.py threads DIR T W N

fds: writes DIR/data.bin (8 x 4 KiB, os.write), keeps it open until the sender thread has
a socket to the collector (at most 10 s), then prints one JSON line: the targets of the
program's descriptors (/proc/self/fd) and of every thread's table
(/proc/self/task/<tid>/fd). It then closes FD, a pipe end inherited from the test, and
waits for a line on stdin before it exits.

threads: W waves of T threads; in each wave thread t writes N * (t + 1) records of
100 * (t + 1) bytes to DIR/threads.bin through one shared descriptor (os.write) and reads
them back with os.pread, so the program writes and reads
W * sum_t N * (t + 1) records and W * sum_t N * (t + 1) * 100 * (t + 1) bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time


def targets(path: str) -> dict[str, str]:
    """fd -> readlink target of a /proc fd directory (descriptors gone meanwhile left out)."""
    out = {}
    for name in os.listdir(path):
        with contextlib.suppress(OSError):
            out[name] = os.readlink(f"{path}/{name}")
    return out


def tables() -> dict[str, dict[str, str]]:
    """Every thread's descriptor table by thread id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            out[tid] = targets(f"/proc/self/task/{tid}/fd")
    return out


def fds(directory: str, inherited: int) -> None:
    fd = os.open(f"{directory}/data.bin", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for _ in range(8):
        os.write(fd, b"x" * 4096)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        threads = tables()
        if any(t.startswith("socket:") for fds in threads.values() for t in fds.values()):
            break
        time.sleep(0.02)
    print(json.dumps({"app": targets("/proc/self/fd"), "threads": threads}), flush=True)
    os.close(inherited)
    sys.stdin.readline()
    os.close(fd)


def threads(directory: str, nthreads: int, waves: int, n: int) -> None:
    fd = os.open(f"{directory}/threads.bin", os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)

    def work(t: int) -> None:
        size = 100 * (t + 1)
        for _ in range(n * (t + 1)):
            os.write(fd, b"y" * size)
            assert len(os.pread(fd, size, 0)) == size

    for _ in range(waves):
        pool = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    os.close(fd)


if __name__ == "__main__":
    if sys.argv[1] == "fds":
        fds(sys.argv[2], int(sys.argv[3]))
    else:
        threads(sys.argv[2], *map(int, sys.argv[3:6]))
