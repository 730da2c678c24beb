"""Overhead of libstacklens, measured in one run against the same programs without it.

Prints: ns added per MPI call (0-byte ping-pong, 2 ranks, shared memory), percent slowdown
of a 4 KiB write() loop to tmpfs (/dev/shm), and the RSS added per rank with 1,024 peers
(the tables of a 1,024-rank world, from a 1,024-rank-sized allocation estimate is not
possible on 2 cores, so the library's per-rank allocation is reported for world size 1,024
by the sizes in the C structs; see bench/RESULTS.md). Not a timed test.

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
}


def build(out: Path) -> None:
    """Compiles the two benchmark programs into out."""
    subprocess.run(
        ["mpicc", "-O2", "-o", out / "pingpong", HERE / "overhead_pingpong.c"], check=True
    )
    subprocess.run(["cc", "-O2", "-o", out / "write", HERE / "overhead_write.c"], check=True)


def run(cmd: list[str], preload: bool) -> float:
    """Runs cmd (with or without the library) and returns the number it prints."""
    env = {**os.environ, **MPI_ENV}
    if preload:
        env["LD_PRELOAD"] = str(LIB)
        cmd = [*cmd[:1], "-x", "LD_PRELOAD", *cmd[1:]] if cmd[0] == "mpirun" else cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    """Measures and prints the three ratios."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trips", type=int, default=200000)
    p.add_argument("--writes", type=int, default=200000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        build(out)
        ping = ["mpirun", "-np", "2", str(out / "pingpong"), str(a.trips)]
        base = [run(ping, False) for _ in range(a.repeat)]
        hooked = [run(ping, True) for _ in range(a.repeat)]
        print(
            f"MPI call (0-byte ping-pong): {statistics.median(base):.1f} ns without, "
            f"{statistics.median(hooked):.1f} ns with: "
            f"+{statistics.median(hooked) - statistics.median(base):.1f} ns per call"
        )
        wr = [str(out / "write"), f"/dev/shm/stacklens-bench-{os.getpid()}", str(a.writes)]
        base = [run(wr, False) for _ in range(a.repeat)]
        hooked = [run(wr, True) for _ in range(a.repeat)]
        os.unlink(wr[1])
        b, h = statistics.median(base), statistics.median(hooked)
        print(
            f"4 KiB write() to tmpfs: {b:.0f} ns without, {h:.0f} ns with: "
            f"{100 * (h - b) / b:+.1f} %"
        )


if __name__ == "__main__":
    main()
