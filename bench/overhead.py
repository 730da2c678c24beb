"""Overhead of libstacklens, measured against the same programs without it.

Prints, each a median of --repeat runs (without and with the library interleaved):
  * ns added per MPI call, one rank, 0-byte messages to itself (Isend + Recv + Wait): the
    wrapper cost without a partner rank competing for a core; in wall-clock time and in
    the thread's CPU time (which leaves out the time the rank waited for a core);
  * ns added per MPI call, 0-byte ping-pong between 2 ranks (shared memory);
  * percent slowdown of a 4 KiB write() loop (bench/overhead_io.c) to a file the library
    tracks on a private **tmpfs** (mounted on a temporary directory for the run and
    unmounted after; /dev/shm is tmpfs too, but the library does not count /dev as
    file-system I/O), in a process of one thread and in one that already has a second
    thread, as an MPI rank has; the same to a file in the current directory's file system,
    and to /dev/shm (not tracked). Each from the mean ns per write of a run and from the
    10th percentile of its chunks of 256 writes (the steady cost, less of the time other
    processes took the core), in wall-clock time and in the thread's CPU time; the median
    of the per-round differences too (each round runs the program without and with the
    library back to back);
  * for reference, what an idle second thread alone costs that write loop without the
    library: the kernel then takes a file reference and the file-position lock on every
    write(). The library's sender thread would add this to every single-threaded program
    if it shared the program's descriptor table (it has one of its own, see
    mpi_pmpi_hooks/src/fdtable.h);
  * a check that the library counted the tracked tmpfs writes: one run with a spool
    directory and no collector, the spooled frames decoded, writes and bytes compared;
  * resident memory the library adds to a rank of a 1,024-rank world with every peer
    touched (bench/rss_peers.c: one process that interposes PMPI_Comm_size/Send/Recv,
    because 1,024 real ranks do not fit this machine), and for a 2-rank world.
With --lib given several times, each library is measured in the same rounds (before/after
comparisons, interleaved). --only callsites compares call sites off (STACKLENS_CALLSITE_DEPTH
0), depth 1 and depth 8 of one library, no library, and (with --mpip SRC) mpiP's default
and `-k 0`, mpiP built from its source in the run's temporary directory (autotools, LOGNAME
set; never committed), all in the same rotated interleaved rounds: ns per MPI call (self
messages; the 2-rank ping-pong per shared-memory speed mode, this VM having two), the 4 KiB
write loop on a private tmpfs in a process of one thread and of two, and open() + close()
pairs (bench/overhead_io.c), with the targets of issues #26 point 4 and #30 point 4 and
their verdicts; --only callsite-calls and --only callsite-files run one half of it. Not a
timed test: run it by hand and copy the figures into bench/RESULTS.md.

    .venv/bin/python -m bench.overhead [--trips N] [--writes N] [--repeat R] [--lib SO]...
                                       [--only write|mpi|callsites|callsite-calls|callsite-files]
                                       [--mpip SRC]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pwd
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE.parent / "mpi_pmpi_hooks" / "build" / "libstacklens.so"
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "STACKLENS_COLLECTOR": "127.0.0.1:9",
    # not the node's collector socket, which the hooks try first: a `stacklens up` running
    # here would store every benchmark run as a job
    "STACKLENS_COLLECTOR_SOCKET": "off",
    "STACKLENS_SPOOL_DIR": "off",
    "STACKLENS_FINALIZE_TIMEOUT_MS": "100",
    "STACKLENS_JOB_ID": "bench-overhead",
}


def build(out: Path) -> None:
    """Compiles the benchmark programs into out."""
    for name in ("pingpong", "calls"):
        src = HERE / f"overhead_{name}.c"
        subprocess.run(["mpicc", "-O2", "-o", str(out / name), str(src)], check=True)
    io = ["cc", "-O2", "-pthread", "-o", str(out / "io"), str(HERE / "overhead_io.c")]
    subprocess.run(io, check=True)
    rss = ["mpicc", "-O2", "-rdynamic", "-o", str(out / "rss_peers"), str(HERE / "rss_peers.c"),
           "-ldl"]  # fmt: skip
    subprocess.run(rss, check=True)


@contextlib.contextmanager
def tmpfs() -> Iterator[tuple[Path | None, str]]:
    """A private tmpfs mounted on a new temporary directory, unmounted and removed after.

    Yields (directory, how); directory is None if no tmpfs could be mounted (how says why).
    """
    d = Path(tempfile.mkdtemp(prefix="stacklens-bench-tmpfs-", dir="/tmp"))
    mount = ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "stacklens-bench", str(d)]
    try:
        done = subprocess.run(mount, capture_output=True, text=True)
    except OSError as e:  # no mount(8)
        done = subprocess.CompletedProcess(mount, 1, "", str(e))
    try:
        if done.returncode == 0:
            yield d, f"private tmpfs mounted on {d}"
        else:
            yield None, f"cannot mount a tmpfs ({done.stderr.strip() or done.returncode})"
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", str(d)], check=False)
        shutil.rmtree(d, ignore_errors=True)


def run(cmd: list[str], lib: Path | None, **extra: str) -> list[float]:
    """Runs cmd (with the library lib, or without) and returns the numbers of its last line."""
    env = {**os.environ, **MPI_ENV, **extra}
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
        cmd = [*cmd[:1], "-x", "LD_PRELOAD", *cmd[1:]] if cmd[0] == "mpirun" else cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    for line in reversed(out.splitlines()):  # the program's figures: its last line of numbers
        with contextlib.suppress(ValueError):
            if numbers := [float(x) for x in line.split()]:
                return numbers
    raise ValueError(f"no figures in the output of {cmd}: {out[-500:]!r}")


def compare(
    cmd: list[str], libs: list[Path | None], repeat: int, col: int = 0, **extra: str
) -> tuple[list[float], list[float]]:
    """Number col of what cmd prints under each of libs (None: without the library), run in
    interleaved rounds: the medians per lib, and per lib the median over the rounds of its
    difference to libs[0] (0 for libs[0] itself)."""
    return stats(rounds(cmd, libs, repeat, **extra), col)


def rounds(cmd: list[str], libs: list[Path | None], repeat: int, **extra: str) -> list:
    """runs[lib][round] = the numbers cmd printed, the libs interleaved in each round."""
    runs: list[list[list[float]]] = [[] for _ in libs]
    for _ in range(repeat):
        for i, lib in enumerate(libs):
            runs[i].append(run(cmd, lib, **extra))
    return runs


def stats(runs: list, col: int) -> tuple[list[float], list[float]]:
    """Medians of number col per lib, and the median per-round difference to runs[0]."""
    x = [[r[col] for r in lib] for lib in runs]
    medians = [statistics.median(v) for v in x]
    diffs = [statistics.median(a - b for a, b in zip(v, x[0], strict=True)) for v in x]
    return medians, diffs


def label(lib: Path, libs: list[Path]) -> str:
    """How a library is named in the output: 'with' if there is one, else its path."""
    return "with" if len(libs) == 1 else f"with {lib}"


def mpi_calls(out: Path, libs: list[Path], a: argparse.Namespace) -> None:
    """MPI call overhead, one rank and a 2-rank ping-pong; for the one rank also in the
    thread's CPU time (time the rank waited for a core left out: steadier under load)."""
    idle = {"STACKLENS_INTERVAL_MS": "1000"}
    for name, cmd, cols in (
        ("MPI call, 1 rank, self messages", ["mpirun", "-np", "1", str(out / "calls")], (0, 1)),
        ("MPI call, 2-rank ping-pong", ["mpirun", "-np", "2", str(out / "pingpong")], (0,)),
    ):
        runs = rounds([*cmd, str(a.trips)], [None, *libs], a.repeat, **idle)
        for col in cols:
            m, d = stats(runs, col)
            what = f"{name}{', thread CPU time' if col else ''}"
            for lib, h, dh in zip(libs, m[1:], d[1:], strict=True):
                print(f"{what}: {m[0]:.1f} ns without, {h:.1f} ns {label(lib, libs)}: "
                      f"{h - m[0]:+.1f} ns per call (per-round median {dh:+.1f} ns)")  # fmt: skip


def writes(out: Path, libs: list[Path], a: argparse.Namespace) -> None:
    """The 4 KiB write() loop on a private tmpfs, the cwd's file system and /dev/shm."""
    write = [str(out / "io"), "write"]
    with tmpfs() as (fs, how):
        print(f"tmpfs: {how}" + ("" if fs else "; the tmpfs rows are left out"))
        cases = []
        if fs is not None:
            cases += [
                ("tmpfs (tracked), 1-thread process", fs / "bench.dat", "single"),
                ("tmpfs (tracked), process with a second thread", fs / "bench.dat", "thread"),
            ]
        cases += [
            ("cwd file system (tracked), 1-thread process", out / "bench.dat", "single"),
            ("/dev/shm (not tracked), 1-thread process",
             Path(f"/dev/shm/stacklens-bench-{os.getpid()}"), "single"),
        ]  # fmt: skip
        if fs is not None:
            t, dt = idle_thread_cost(write, fs / "bench.dat", a)
            print(f"4 KiB write(), tmpfs, no library, p10 chunk: 1 thread {t[0]:.0f} ns, with "
                  f"an idle second thread {t[1]:.0f} ns: per-round {dt:+.0f} ns, "
                  f"{100 * dt / t[0]:+.1f} % (the kernel's cost of a shared descriptor "
                  "table)")  # fmt: skip
        for name, path, mode in cases:
            runs = rounds([*write, str(path), str(a.writes), mode], [None, *libs], a.repeat)
            path.unlink()
            for col, what in IO_FIGURES:
                m, d = stats(runs, col)
                for lib, h, dh in zip(libs, m[1:], d[1:], strict=True):
                    print(f"4 KiB write(), {name}, {what}: {m[0]:.0f} ns without, {h:.0f} ns "
                          f"{label(lib, libs)}: {100 * (h - m[0]) / m[0]:+.1f} % (per-round "
                          f"difference: {dh:+.0f} ns, {100 * dh / m[0]:+.1f} %)")  # fmt: skip
        if fs is not None:
            for lib in libs:
                check_counted(write, fs / "bench.dat", lib, a.writes)


def idle_thread_cost(
    write: list[str], path: Path, a: argparse.Namespace
) -> tuple[list[float], float]:
    """Without the library: medians of the loop's p10 chunk in 1 thread and with an idle
    second thread, and the median per-round difference."""
    single, thread = [], []
    for _ in range(a.repeat):
        single.append(run([*write, str(path), str(a.writes), "single"], None)[1])
        thread.append(run([*write, str(path), str(a.writes), "thread"], None)[1])
    diff = statistics.median(t - s for t, s in zip(thread, single, strict=True))
    return [statistics.median(single), statistics.median(thread)], diff


def check_counted(write: list[str], path: Path, lib: Path, n: int) -> None:
    """One run of the write loop with a spool directory and no collector: the spooled frames
    must count n writes of 4 KiB to path, on tmpfs. Raises SystemExit if not."""
    from stacklens import wire

    with tempfile.TemporaryDirectory(prefix="stacklens-bench-spool-") as spool:
        run([*write, str(path), str(n), "single"], lib, STACKLENS_SPOOL_DIR=spool)
        path.unlink()
        writes = nbytes = 0
        fstypes = set()
        for f in sorted(Path(spool).glob("*.slf")):
            raw = f.read_bytes()
            frame = wire.decode_body(wire.decode_header(raw, len(raw)), raw[wire.HEADER_SIZE :])
            for r in frame.tables.get("io", []):
                if bytes(r["path"]).split(b"\0", 1)[0].decode() == str(path):
                    writes += int(r["writes"])
                    nbytes += int(r["bytes_written"])
                    fstypes.add(bytes(r["fstype"]).split(b"\0", 1)[0].decode())
    ok = writes == n and nbytes == 4096 * n and fstypes == {"tmpfs"}
    verdict = "exact" if ok else f"WRONG, expected {n} writes, {4096 * n} bytes on tmpfs"
    print(f"library {lib}: counted {writes} writes, {nbytes} bytes to {path} "
          f"(file system {', '.join(sorted(fstypes)) or '-'}): {verdict}")  # fmt: skip
    if not ok:
        raise SystemExit(1)


#: The figures bench/overhead_io.c prints, by column: how each is named.
IO_FIGURES = ((0, "mean"), (1, "p10 chunk"), (2, "p10 chunk, thread CPU"),
              (3, "median chunk, thread CPU"))  # fmt: skip
#: The call-site settings compared by --only callsites (STACKLENS_CALLSITE_DEPTH).
SITE_DEPTHS = ("0", "1", "8")
#: Two shared-memory speed modes are told apart when the widest gap between the sorted
#: ping-pong figures of the cheap configurations is wider than this factor.
MODE_GAP = 1.6


@dataclasses.dataclass(frozen=True)
class Config:
    """One configuration of the side-by-side rounds: a preloaded library (None: none), its
    environment, and whether it adds less per call than the gap between the VM's two
    shared-memory speed modes (then each of its ping-pong runs is placed in a mode)."""

    name: str
    lib: Path | None
    env: dict[str, str]
    cheap: bool = True


def build_mpip(src: Path, out: Path) -> Path:
    """mpiP built from its source in out/mpiP, as its README says (autotools; LOGNAME must be
    set, its configure and make read it), without libunwind and binutils: its default call
    sites then come from glibc's backtrace() on every call. src is a source tree or a git
    repository (its HEAD, bare or not). Returns the path of libmpiP.so."""
    dest = out / "mpiP"
    if (src / "configure").is_file():
        shutil.copytree(src, dest)
    else:
        dest.mkdir()
        tar = subprocess.run(["git", "-C", str(src), "archive", "HEAD"], capture_output=True,
                             check=True).stdout  # fmt: skip
        subprocess.run(["tar", "x", "-C", str(dest)], input=tar, check=True)
    env = {**os.environ, "LOGNAME": os.environ.get("LOGNAME") or pwd.getpwuid(os.getuid())[0]}
    for step in (["./configure", "--disable-libunwind", "--disable-bfd", "CC=mpicc",
                  "F77=mpif77"], ["make", "shared"]):  # fmt: skip
        done = subprocess.run(step, cwd=dest, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"mpiP: {' '.join(step)} failed:\n{done.stdout[-2000:]}"
                             f"{done.stderr[-2000:]}")  # fmt: skip
    return dest / "libmpiP.so"


def side_by_side(cmd: list[str], configs: list[Config], repeat: int) -> list[list[list[float]]]:
    """runs[config][round] = the numbers cmd printed; every round runs each configuration
    once, the order rotated by one each round (no configuration always first)."""
    runs: list[list[list[float]]] = [[] for _ in configs]
    for r in range(repeat):
        for k in range(len(configs)):
            i = (k + r) % len(configs)
            runs[i].append(run(cmd, configs[i].lib, **configs[i].env))
    return runs


def paired(x: list[float], base: list[float]) -> float:
    """The median of the per-round differences x - base."""
    return statistics.median(a - b for a, b in zip(x, base, strict=True))


def paired_ratio(x: list[float], base: list[float]) -> float:
    """The median of the per-round relative differences x / base - 1 (each round's two runs
    back to back: a change of the VM's speed between rounds cancels out)."""
    return statistics.median(a / b - 1 for a, b in zip(x, base, strict=True))


def verdict(ok: bool) -> str:
    """How a target reads."""
    return "holds" if ok else "MISSED"


def print_mpi_targets(what: str, cost: dict[str, float], d1: float, unit: str = "ns") -> None:
    """The two per-call targets: depth 1 over off (d1, from the runs of both) <= 5 ns, and
    stacklens (depth 1, the default; costs over no library) <= 1/3 of mpiP -k 0."""
    print(f"  target {what}: depth 1 over off {d1:+.1f} {unit} (<= 5): {verdict(d1 <= 5)}")
    if "mpiP -k 0" in cost:
        hooks, mpip = cost["depth 1"], cost["mpiP -k 0"]
        ratio = hooks / mpip if mpip > 0 else float("inf")
        print(f"  target {what}: stacklens {hooks:+.1f} {unit} vs mpiP -k 0 {mpip:+.1f} {unit} "
              f"over no library = {ratio:.2f} (<= 0.33): {verdict(ratio <= 1 / 3)}")  # fmt: skip


def mode_split(values: list[float]) -> float | None:
    """The threshold between the two shared-memory speed modes in values (the geometric
    middle of their widest gap when it is wider than MODE_GAP), or None: one mode."""
    v = sorted(x for x in values if x > 0)
    if len(v) < 2:
        return None
    lo, hi = max(zip(v, v[1:], strict=False), key=lambda p: p[1] / p[0])
    return (lo * hi) ** 0.5 if hi / lo > MODE_GAP else None


def print_per_call(name: str, runs: list, configs: list[Config], col: int, modes: bool) -> None:
    """One MPI benchmark's figures: each configuration's median ns per call and its cost over
    no library and over call sites off; with modes, per shared-memory speed mode (a run's
    mode from its own figure; cheap configurations only, the others over all runs)."""
    x = [[r[col] for r in per] for per in runs]
    names = [c.name for c in configs]
    split = mode_split([v for c, xs in zip(configs, x, strict=True) if c.cheap for v in xs])
    if not modes or split is None:
        med = [statistics.median(v) for v in x]
        cost = {n: paired(v, x[0]) for n, v in zip(names, x, strict=True)}
        print(f"{name}: " + "; ".join(f"{n} {m:.1f} ns ({cost[n]:+.1f})" for n, m in
              zip(names, med, strict=True)) + " (medians; in brackets the median per-round "
              f"difference to no library; {len(x[0])} rounds" +
              (", one speed mode" if modes else "") + ")")  # fmt: skip
        # depth 1 against depth 0 round by round, not the difference of their medians
        # over no library (which carries the no-library runs' spread twice)
        over_off = paired(x[names.index("depth 1")], x[names.index("depth 0")])
        print_mpi_targets(name, cost, over_off)
        return
    for mode, keep in (("fast mode", lambda v: v < split), ("slow mode", lambda v: v >= split)):
        parts, cost = [], {}
        base = [v for v in x[0] if keep(v)]
        for c, xs in zip(configs, x, strict=True):
            mine = [v for v in xs if keep(v)] if c.cheap else xs
            if not mine or not base:
                parts.append(f"{c.name} - (no run)")
                continue
            m = statistics.median(mine)
            cost[c.name] = m - statistics.median(base if c.cheap else x[0])
            parts.append(f"{c.name} {m:.1f} ns ({cost[c.name]:+.1f}, {len(mine)} runs"
                         f"{'' if c.cheap else ', either mode'})")  # fmt: skip
        print(f"{name}, {mode} (runs below/above {split:.0f} ns): " + "; ".join(parts) +
              " (medians; in brackets the difference of medians to no library)")  # fmt: skip
        if {"depth 0", "depth 1"} <= cost.keys():
            print_mpi_targets(f"{name}, {mode}", cost, cost["depth 1"] - cost["depth 0"])


def depth_configs(lib: Path) -> list[Config]:
    """No library, then call sites off (depth 0), depth 1 and depth 8 of lib."""
    configs = [Config("no library", None, {})]
    return configs + [Config(f"depth {d}", lib, {"STACKLENS_CALLSITE_DEPTH": d}, d != "8")
                      for d in SITE_DEPTHS]  # fmt: skip


def callsite_calls(out: Path, lib: Path, a: argparse.Namespace) -> None:
    """Call sites off (depth 0) vs depth 1 vs depth 8 of one library, no library, and mpiP
    (default and -k 0) when its source is given, side by side in rotated interleaved rounds:
    ns per MPI call (1 rank, self messages; 2-rank ping-pong, per shared-memory speed mode),
    with the per-call targets of issues #26 point 4 and #30 point 4 and their verdicts."""
    mpi_configs = depth_configs(lib)
    if a.mpip is not None:
        mpip = build_mpip(a.mpip.resolve(), out)
        reports = out / "mpiP-reports"
        reports.mkdir()
        print(f"mpiP built from {a.mpip}: {mpip}")
        mpi_configs += [Config("mpiP default", mpip, {"MPIP": f"-f {reports}"}, False),
                        Config("mpiP -k 0", mpip, {"MPIP": f"-k 0 -f {reports}"})]  # fmt: skip
    else:
        print("mpiP: no --mpip source given; its rows are left out")
    idle = {"STACKLENS_INTERVAL_MS": "1000"}
    mpi_configs = [Config(c.name, c.lib, {**idle, **c.env}, c.cheap) for c in mpi_configs]
    runs = side_by_side(["mpirun", "-np", "1", str(out / "calls"), str(a.trips)], mpi_configs,
                        a.repeat)  # fmt: skip
    print_per_call("MPI call, 1 rank, self messages, wall", runs, mpi_configs, 0, False)
    print_per_call("MPI call, 1 rank, self messages, thread CPU", runs, mpi_configs, 1, False)
    runs = side_by_side(["mpirun", "-np", "2", str(out / "pingpong"), str(a.trips)], mpi_configs,
                        a.repeat)  # fmt: skip
    print_per_call("MPI call, 2-rank ping-pong", runs, mpi_configs, 0, True)


def callsite_files(out: Path, lib: Path, a: argparse.Namespace) -> None:
    """The same configurations without mpiP (it wraps no POSIX call) on the 4 KiB write()
    loop on a private tmpfs in a process of one thread and of two, and on open() + close()
    pairs: each figure of bench/overhead_io.c, with the write targets of issues #26 point 4
    (depth 1 over off <= 1 %) and #30 point 4 (over no library <= 2 %) and their verdicts,
    from the medians of the per-round ratios."""
    configs = depth_configs(lib)
    with tmpfs() as (fs, how):
        if fs is None:
            print(f"tmpfs: {how}; the write and open rows are left out")
            return
        path = fs / "bench.dat"
        cases = [("4 KiB write(), tmpfs (tracked), 1 thread", "write", "single", 1.0),
                 ("4 KiB write(), tmpfs (tracked), 2 threads", "write", "thread", 1.0),
                 ("open() + close(), tmpfs (tracked)", "open", "single", None)]  # fmt: skip
        for name, call, mode, target in cases:
            n = a.writes if call == "write" else max(a.writes // 4, 256)
            runs = side_by_side([str(out / "io"), call, str(path), str(n), mode], configs,
                                a.repeat)  # fmt: skip
            path.unlink()
            for col, what in IO_FIGURES:
                x = [[r[col] for r in per] for per in runs]
                med = [statistics.median(v) for v in x]
                parts = [f"no library {med[0]:.0f} ns"]
                for c, v, m in zip(configs[1:], x[1:], med[1:], strict=True):
                    parts.append(f"{c.name} {m:.0f} ns ({100 * paired_ratio(v, x[0]):+.2f} % "
                                 f"over no library, {paired(v, x[1]):+.0f} ns = "
                                 f"{100 * paired_ratio(v, x[1]):+.2f} % over off)")  # fmt: skip
                print(f"{name}, {what}: " + "; ".join(parts) + f" (medians; in brackets the "
                      f"medians of the per-round differences; {a.repeat} rounds)")  # fmt: skip
                if target is not None:
                    off = 100 * paired_ratio(x[2], x[1])
                    total = 100 * paired_ratio(x[2], x[0])
                    print(f"  target {name}, {what}: depth 1 over off {off:+.2f} % (<= 1 %): "
                          f"{verdict(off <= target)}; stacklens over no library {total:+.2f} % "
                          f"(<= 2 %): {verdict(total <= 2)}")  # fmt: skip


def rss(out: Path, libs: list[Path]) -> None:
    """Resident memory added, worlds of 2 and 1,024 ranks."""
    fast = {"STACKLENS_INTERVAL_MS": "10"}
    for n in (2, 1024):
        cmd = ["mpirun", "-np", "1", str(out / "rss_peers"), str(n)]
        base = run(cmd, None, **fast)[0]
        for lib in libs:
            hooked = run(cmd, lib, **fast)[0]
            print(f"RSS, world of {n} ranks, every peer touched: {base:.0f} KiB without, "
                  f"{hooked:.0f} KiB {label(lib, libs)}: "
                  f"+{(hooked - base) / 1024:.2f} MiB")  # fmt: skip


def main() -> None:
    """Measures and prints the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trips", type=int, default=200000)
    p.add_argument("--writes", type=int, default=200000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--lib", type=Path, action="append", help=f"library (default {LIB})")
    p.add_argument(
        "--mpip",
        type=Path,
        help="mpiP's source (a tree or a git repository): "
        "--only callsites builds it and runs it side by side (default and -k 0)",
    )
    p.add_argument(
        "--only",
        choices=["write", "mpi", "callsites", "callsite-calls", "callsite-files"],
        help="only the write() or the MPI call figures, or call sites off / depth 1 / depth 8 "
        "(on MPI calls and file calls, or only on one of them)",
    )
    a = p.parse_args()
    libs = [lib.resolve() for lib in a.lib] if a.lib else [LIB]
    with tempfile.TemporaryDirectory(dir=".") as d:
        out = Path(d).resolve()
        build(out)
        if a.only in ("callsites", "callsite-calls"):
            callsite_calls(out, libs[0], a)
        if a.only in ("callsites", "callsite-files"):
            callsite_files(out, libs[0], a)
        if a.only is not None and a.only.startswith("callsite"):
            return
        if a.only in (None, "mpi"):
            mpi_calls(out, libs, a)
        if a.only in (None, "write"):
            writes(out, libs, a)
        if a.only is None:
            rss(out, libs)


if __name__ == "__main__":
    main()
