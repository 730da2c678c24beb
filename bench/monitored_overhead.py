"""What monitoring the traffic (the MPI's own counts per peer) adds per MPI call, counted
in instructions (valgrind's callgrind), so the figure does not depend on what else the
machine runs.

Runs bench/overhead_calls.c (one rank, 0-byte Isend + Recv + Wait to itself, 3 calls per
iteration) under callgrind with --trips and 2 x --trips iterations, and prints the
instructions of one iteration (the difference of the two runs over --trips: start-up and
the final frame cancel out), for: no library; no library with Open MPI's monitoring
component on (`OMPI_MCA_pml_monitoring_enable=1`: what the MPI itself costs once monitored);
and each --lib with STACKLENS_MONITOR_TRAFFIC=off and =auto (the library sets the monitoring
variable itself). The sender thread reports once an hour (nothing in between), the
collector is unreachable and the spool off. Not a timed test: run it by hand and copy the
figures into bench/RESULTS.md.

    .venv/bin/python -m bench.monitored_overhead [--trips N] [--lib SO]...
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from pathlib import Path

from bench.overhead import LIB, MPI_ENV

HERE = Path(__file__).resolve().parent
#: The library's settings for every run (an hour between frames: none during the loop).
QUIET = {**MPI_ENV, "STACKLENS_INTERVAL_MS": "3600000"}


def instructions(calls: Path, trips: int, lib: Path | None, **extra: str) -> int:
    """Instructions callgrind counted in the rank (all its threads) for `trips` iterations."""
    with tempfile.TemporaryDirectory(prefix="stacklens-cg-") as d:
        out = Path(d) / "callgrind.out"
        env = {**os.environ, **QUIET, **extra}
        env.pop("LD_PRELOAD", None)
        cmd = ["mpirun", "-np", "1"]
        if lib is not None:
            env["LD_PRELOAD"] = str(lib)
            cmd += ["-x", "LD_PRELOAD"]
        cmd += ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(calls)]
        subprocess.run([*cmd, str(trips)], env=env, capture_output=True, check=True)
        match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        assert match, f"no instruction total in {out}"
        return int(match.group(1))


def per_iteration(calls: Path, trips: int, lib: Path | None, **extra: str) -> float:
    """Instructions of one iteration (3 MPI calls): the difference of 2 x trips and trips."""
    one = instructions(calls, trips, lib, **extra)
    two = instructions(calls, 2 * trips, lib, **extra)
    return (two - one) / trips


def main() -> None:
    """Measures and prints the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trips", type=int, default=20000)
    p.add_argument("--lib", type=Path, action="append", help=f"library (default {LIB})")
    a = p.parse_args()
    libs = [lib.resolve() for lib in a.lib] if a.lib else [LIB]
    with tempfile.TemporaryDirectory(prefix="stacklens-monitored-bench-") as d:
        calls = Path(d) / "calls"
        subprocess.run(["mpicc", "-O2", "-o", calls, HERE / "overhead_calls.c"], check=True)
        base = per_iteration(calls, a.trips, None)
        monitored = per_iteration(calls, a.trips, None, OMPI_MCA_pml_monitoring_enable="1")
        print(f"no library: {base:.0f} instructions per iteration (3 MPI calls)")
        print(f"no library, Open MPI monitoring on: {monitored:.0f} ({monitored - base:+.0f})")
        for lib in libs:
            for mode in ("off", "auto"):
                # the setting under both its names: a library built before the rename reads
                # STACKLENS_MEASURE_WIRE; a newer one reads the new name and ignores the old
                n = per_iteration(calls, a.trips, lib, STACKLENS_MONITOR_TRAFFIC=mode,
                                  STACKLENS_MEASURE_WIRE=mode)  # fmt: skip
                print(f"{lib} MONITOR_TRAFFIC={mode}: {n:.0f} ({n - base:+.0f} per iteration, "
                      f"{(n - base) / 3:+.1f} per call)")  # fmt: skip


if __name__ == "__main__":
    main()
