"""Overhead of libstacklens, measured against the same programs without it.

Prints, each a median of --repeat runs:
  * ns added per MPI call, one rank, 0-byte messages to itself (Isend + Recv + Wait): the
    wrapper cost without a partner rank competing for a core;
  * ns added per MPI call, 0-byte ping-pong between 2 ranks (shared memory);
  * percent slowdown of a 4 KiB write() loop to a file the library tracks (a regular file
    in the current directory's file system) and to one it does not (/dev/shm); the
    tracked file twice: in a process of one thread (the library's sender thread, started
    at the first tracked open, then makes the kernel take a file reference and the
    file-position lock on every write) and in one that already has a second thread, as
    an MPI rank has (the library's own cost per write);
  * resident memory the library adds to a rank of a 1,024-rank world with every peer
    touched (bench/rss_peers.c: one process that interposes PMPI_Comm_size/Send/Recv,
    because 1,024 real ranks do not fit this machine), and for a 2-rank world.
Not a timed test: run it by hand and copy the figures into bench/RESULTS.md.

    .venv/bin/python -m bench.overhead [--trips N] [--writes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE.parent / "mpi_pmpi_hooks" / "build" / "libstacklens.so"
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "STACKLENS_COLLECTOR": "127.0.0.1:9",
    "STACKLENS_SPOOL_DIR": "off",
    "STACKLENS_FINALIZE_TIMEOUT_MS": "100",
    "STACKLENS_JOB_ID": "bench-overhead",
}


def build(out: Path) -> None:
    """Compiles the benchmark programs into out."""
    for name in ("pingpong", "calls"):
        src = HERE / f"overhead_{name}.c"
        subprocess.run(["mpicc", "-O2", "-o", out / name, src], check=True)
    write = ["cc", "-O2", "-pthread", "-o", out / "write", HERE / "overhead_write.c"]
    subprocess.run(write, check=True)
    rss = ["mpicc", "-O2", "-rdynamic", "-o", out / "rss_peers", HERE / "rss_peers.c", "-ldl"]
    subprocess.run(rss, check=True)


def run(cmd: list[str], preload: bool, **extra: str) -> list[float]:
    """Runs cmd (with or without the library) and returns the numbers of its last line."""
    env = {**os.environ, **MPI_ENV, **extra}
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(LIB)
        cmd = [*cmd[:1], "-x", "LD_PRELOAD", *cmd[1:]] if cmd[0] == "mpirun" else cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return [float(x) for x in out.strip().splitlines()[-1].split()]


def compare(cmd: list[str], repeat: int, **extra: str) -> tuple[float, float]:
    """Medians of the first number cmd prints, without and with the library (interleaved)."""
    base, hooked = [], []
    for _ in range(repeat):
        base.append(run(cmd, False, **extra)[0])
        hooked.append(run(cmd, True, **extra)[0])
    return statistics.median(base), statistics.median(hooked)


def main() -> None:
    """Measures and prints the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trips", type=int, default=200000)
    p.add_argument("--writes", type=int, default=200000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(dir=".") as d:
        out = Path(d).resolve()
        build(out)
        idle = {"STACKLENS_INTERVAL_MS": "1000"}
        b, h = compare(["mpirun", "-np", "1", str(out / "calls"), str(a.trips)], a.repeat, **idle)
        print(f"MPI call, 1 rank, self messages: {b:.1f} ns without, {h:.1f} ns with: "
              f"+{h - b:.1f} ns per call")  # fmt: skip
        ping = ["mpirun", "-np", "2", str(out / "pingpong"), str(a.trips)]
        b, h = compare(ping, a.repeat, **idle)
        print(f"MPI call, 2-rank ping-pong: {b:.1f} ns without, {h:.1f} ns with: "
              f"{h - b:+.1f} ns per call")  # fmt: skip
        shm = Path(f"/dev/shm/stacklens-bench-{os.getpid()}")
        for label, path, mode in (
            ("tracked file, 1-thread process", out / "bench.dat", "single"),
            ("tracked file, 2-thread process", out / "bench.dat", "thread"),
            ("/dev/shm (not tracked)", shm, "single"),
        ):
            b, h = compare([str(out / "write"), str(path), str(a.writes), mode], a.repeat)
            path.unlink()
            print(f"4 KiB write(), {label}: {b:.0f} ns without, {h:.0f} ns with: "
                  f"{100 * (h - b) / b:+.1f} %")  # fmt: skip
        fast = {"STACKLENS_INTERVAL_MS": "10"}
        for n in (2, 1024):
            cmd = ["mpirun", "-np", "1", str(out / "rss_peers"), str(n)]
            base = run(cmd, False, **fast)[0]
            hooked = run(cmd, True, **fast)[0]
            print(f"RSS, world of {n} ranks, every peer touched: {base:.0f} KiB without, "
                  f"{hooked:.0f} KiB with: +{(hooked - base) / 1024:.2f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
