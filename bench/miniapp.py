"""What stacklens costs a real application: LULESH 2.0's figure of merit (zones per second)
without any tool, under `stacklens run` at its default settings (a real collector on an
embedded PostgreSQL, frames every interval), and, where given, under mpiP `-k 0` (built
from source, --mpip) and Darshan (darshan-runtime built from source, --darshan), in
alternating runs of one benchmark (issue #30 point 5).

LULESH is built from source in a temporary directory (mpicxx, -O3, MPI on, OpenMP off):
from --lulesh (a LULESH 2.0 source tree or git URL; default
https://github.com/LLNL/LULESH). LULESH needs a cube number of ranks; --ranks takes a list
(default "1,8"): on this 2-core node 1 rank is one rank per core (the other core keeps the
collector and the system) and 8 ranks are 4 per core, oversubscribed as a busy node is.

With --split, two more configurations tell where stacklens' cost goes: "stacklens, no
monitoring" (`stacklens run` with STACKLENS_MONITOR_TRAFFIC=off: Open MPI's monitoring
component left off) and "hooks only" (the library preloaded with the same collector and
settings, no `stacklens run` around the job).

Each round runs every tool once, in an order that rotates from round to round, with the
same problem (-s SIZE -i ITERATIONS). Printed per rank count and tool: the median figure of
merit, and the median, lowest and highest per-round change against the run without a tool
of the same round. Not a timed test: run it by hand and copy the figures into
bench/RESULTS.md.

    .venv/bin/python -m bench.miniapp [--lulesh SRC] [--ranks 1,8] [--size 20]
        [--iterations 200] [--rounds 5] [--mpip MPIP_SRC] [--darshan DARSHAN_SRC] [--split]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import psycopg

from bench.overhead import LIB, build_mpip
from collector.service import BackgroundCollector
from stacklens.db import migrate, start_embedded
from stacklens_cli.attach import OPENMPI_ROOT_ENV

#: Where LULESH 2.0 is taken from when --lulesh is not given.
LULESH_GIT = "https://github.com/LLNL/LULESH"
#: LULESH 2.0's sources (its Makefile's list, without the visualisation's optional SILO).
LULESH_SOURCES = ("lulesh.cc", "lulesh-comm.cc", "lulesh-viz.cc", "lulesh-util.cc",
                  "lulesh-init.cc")  # fmt: skip
#: The line LULESH ends with: "FOM                  =     1234.5 (z/s)".
FOM_LINE = re.compile(r"^FOM\s*=\s*([0-9.]+)\s*\(z/s\)", re.MULTILINE)
#: The ingest token of the benchmark's private collector.
TOKEN = "bench-miniapp"


def lulesh_source(given: str, scratch: Path) -> Path:
    """A LULESH 2.0 source tree: `given` if it is one, else a clone of `given` (a URL or a
    git repository's path)."""
    if (Path(given) / LULESH_SOURCES[0]).is_file():
        return Path(given)
    tree = scratch / "lulesh-src"
    shallow = ["--depth", "1"] if "://" in given else []
    subprocess.run(["git", "clone", "-q", *shallow, given, str(tree)], check=True)
    return tree


def build_lulesh(src: Path, out: Path) -> Path:
    """Compiles LULESH 2.0 from `src` into out/lulesh2.0 (MPI on, OpenMP off, -O3)."""
    missing = [name for name in LULESH_SOURCES if not (src / name).is_file()]
    if missing:
        sys.exit(f"{src} is not a LULESH 2.0 tree: {', '.join(missing)} missing")
    exe = out / "lulesh2.0"
    cmd = ["mpicxx", "-O3", "-DUSE_MPI=1", f"-I{src}", "-o", str(exe),
           *(str(src / name) for name in LULESH_SOURCES)]  # fmt: skip
    subprocess.run(cmd, check=True)
    return exe


def build_darshan(given: str, scratch: Path) -> str:
    """Builds darshan-runtime from `given` (a Darshan source tree, git URL or repository)
    into scratch (MPI-IO module on, log path from DARSHAN_LOGPATH); returns libdarshan.so."""
    tree = given if (Path(given) / "prepare.sh").is_file() else str(scratch / "darshan-src")
    if tree != given:
        shallow = ["--depth", "1"] if "://" in given else []
        subprocess.run(["git", "clone", "-q", *shallow, given, tree], check=True)
    build, prefix = scratch / "darshan-build", scratch / "darshan"
    build.mkdir()
    for cmd, where in (
        (["./prepare.sh"], tree),
        ([f"{tree}/configure", f"--prefix={prefix}", "--with-jobid-env=NONE",
          "--with-log-path-by-env=DARSHAN_LOGPATH", "--enable-mpiio-mod",
          "--disable-darshan-util", "CC=mpicc"], str(build)),
        (["make", f"-j{os.cpu_count()}", "install"], str(build)),
    ):  # fmt: skip
        subprocess.run(cmd, cwd=where, capture_output=True, check=True)
    return str(prefix / "lib" / "libdarshan.so")


def figure_of_merit(cmd: list[str], env: dict[str, str]) -> float:
    """Runs cmd and returns the figure of merit LULESH printed (zones per second)."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    match = FOM_LINE.search(done.stdout)
    if done.returncode != 0 or match is None:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return float(match.group(1))


def base_env() -> dict[str, str]:
    """This environment without any tool's settings, Open MPI allowed to run as root."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STACKLENS_", "MPIP", "DARSHAN_"))}  # fmt: skip
    env.pop("LD_PRELOAD", None)
    return {**env, **OPENMPI_ROOT_ENV, "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def tools(a: argparse.Namespace, collector: str, scratch: Path) -> dict[str, Callable]:
    """Per tool name: a function of the mpirun command giving (command, environment)."""
    env = base_env()

    def bare(cmd: list[str]) -> tuple[list[str], dict[str, str]]:
        return cmd, env

    # (the collector socket off: not a `stacklens up` running here, which the hooks try first)
    settings = {"STACKLENS_COLLECTOR": collector, "STACKLENS_COLLECTOR_SOCKET": "off",
                "STACKLENS_INGEST_TOKEN": TOKEN,
                "STACKLENS_INGEST_AUTH": "trusted", "STACKLENS_STATE_DIR": str(scratch / "state"),
                "STACKLENS_SPOOL_DIR": str(scratch / "spool")}  # fmt: skip

    def run_by_stacklens(**more: str) -> Callable:
        def run(cmd: list[str]) -> tuple[list[str], dict[str, str]]:
            return ([sys.executable, "-m", "stacklens_cli", "run", "--", *cmd],
                    {**env, **settings, **more})  # fmt: skip

        return run

    def preloaded(lib: str, **settings: str) -> Callable:
        def run(cmd: list[str]) -> tuple[list[str], dict[str, str]]:
            return [cmd[0], "-x", "LD_PRELOAD", *(f for k in settings for f in ("-x", k)),
                    *cmd[1:]], {**env, "LD_PRELOAD": lib, **settings}  # fmt: skip

        return run

    chosen: dict[str, Callable] = {"none": bare, "stacklens": run_by_stacklens()}
    if a.split:
        chosen["stacklens, no monitoring"] = run_by_stacklens(STACKLENS_MONITOR_TRAFFIC="off")
        chosen["hooks only"] = preloaded(str(LIB), **settings)
    if a.mpip:
        (scratch / "mpip-reports").mkdir()
        mpip = str(build_mpip(Path(a.mpip), scratch))
        chosen["mpiP -k 0"] = preloaded(mpip, MPIP=f"-k 0 -f {scratch / 'mpip-reports'}")
    if a.darshan:
        logs = scratch / "darshan-logs"
        logs.mkdir()
        chosen["Darshan"] = preloaded(build_darshan(a.darshan, scratch),
                                      DARSHAN_LOGPATH=str(logs))  # fmt: skip
    return chosen


def measure(exe: Path, ranks: int, a: argparse.Namespace, chosen: dict[str, Callable]) -> None:
    """Alternating rounds at `ranks` ranks; prints the medians and per-round changes."""
    cmd = ["mpirun", "-np", str(ranks), "--bind-to", "none", str(exe),
           "-s", str(a.size), "-i", str(a.iterations)]  # fmt: skip
    names = list(chosen)
    fom: dict[str, list[float]] = {name: [] for name in names}
    for r in range(a.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fom[name].append(figure_of_merit(*chosen[name](cmd)))
    base = fom["none"]
    print(
        f"LULESH -s {a.size} -i {a.iterations}, {ranks} rank(s) on {os.cpu_count()} cores, "
        f"{a.rounds} rounds; load before: {os.getloadavg()[0]:.1f}"
    )
    print(f"  none: figure of merit {statistics.median(base):.1f} z/s (median)")
    for name in names[1:]:
        change = [100 * (t - b) / b for t, b in zip(fom[name], base, strict=True)]
        print(f"  {name}: {statistics.median(fom[name]):.1f} z/s; per-round change "
              f"{statistics.median(change):+.2f} % (lowest {min(change):+.2f} %, highest "
              f"{max(change):+.2f} %)")  # fmt: skip


def main() -> None:
    """Builds LULESH, starts a private collector and measures every rank count."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lulesh", default=LULESH_GIT,
                   help="LULESH 2.0 source tree, git URL or repository")  # fmt: skip
    p.add_argument("--ranks", default="1,8", help="cube numbers of ranks, comma-separated")
    p.add_argument("--size", type=int, default=20, help="LULESH -s (mesh side per rank)")
    p.add_argument("--iterations", type=int, default=200, help="LULESH -i (cycles)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per rank count")
    p.add_argument("--mpip", help="mpiP source tree or git repository to build libmpiP.so "
                   "from and compare with, run with MPIP='-k 0'")  # fmt: skip
    p.add_argument("--darshan", help="Darshan source tree, git URL or repository to build "
                   "darshan-runtime from and compare with")  # fmt: skip
    p.add_argument("--split", action="store_true", help="also stacklens without monitoring "
                   "and the hooks without `stacklens run` (where the cost goes)")  # fmt: skip
    a = p.parse_args()
    if not LIB.is_file():
        sys.exit(f"{LIB} is missing: run `make hooks` first")
    with tempfile.TemporaryDirectory(prefix="stacklens-miniapp-") as d:
        scratch = Path(d)
        exe = build_lulesh(lulesh_source(a.lulesh, scratch), scratch)
        database = start_embedded(scratch / "pg")
        try:
            migrate(database.url)
            with BackgroundCollector(database.url, token=TOKEN) as collector:
                chosen = tools(a, collector.endpoint, scratch)
                for ranks in (int(x) for x in a.ranks.split(",")):
                    measure(exe, ranks, a, chosen)
            with psycopg.connect(database.url) as conn:
                ((runs, ranks_seen),) = conn.execute(
                    "SELECT count(DISTINCT run_id), count(*) FROM ranks"
                ).fetchall()
            print(
                f"stored by the collector: {runs} runs, {ranks_seen} ranks (expected "
                f"{a.rounds} runs per rank count and stacklens configuration)"
            )
        finally:
            database.stop()


if __name__ == "__main__":
    main()
