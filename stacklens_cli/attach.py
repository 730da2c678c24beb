"""`stacklens run` and `stacklens env`: attach the hook library to a program or a batch script.

stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts

Both attach the library built for the command's MPI (stacklens_cli.mpikind), unless
`--mpi` or STACKLENS_LIBRARY says which. For Open MPI they also set what its launcher needs
to start as root or with more ranks than cores (`open_mpi_allowances`), and say so: MPICH's
launcher needs neither.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from stacklens import wire
from stacklens.paths import LIBRARIES
from stacklens.settings import Settings, config_file_values
from stacklens.settings_table import DECLARED, given_as
from stacklens_cli import launch, mpikind, node_sites, snapshots

#: Open MPI's launcher refuses to run as root without these two variables.
OPENMPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
#: ... and to start more ranks on a node than it has cores without this one.
OPENMPI_OVERSUBSCRIBE = {"OMPI_MCA_rmaps_base_oversubscribe": "1"}
#: Environment that lets Open MPI run as root and oversubscribe the cores (demo and tests).
OPENMPI_ROOT_ENV = {**OPENMPI_AS_ROOT, **OPENMPI_OVERSUBSCRIBE}
#: Options of Open MPI's launcher that give the same allowances on its command line.
_OPENMPI_ALLOW_OPTIONS = {"--allow-run-as-root": OPENMPI_AS_ROOT,
                          "--oversubscribe": OPENMPI_OVERSUBSCRIBE}  # fmt: skip
#: The line for an MPI launcher that is not there (`stacklens run`, `demo`).
MISSING_MPI = (
    "{launcher} is not installed: install Open MPI or MPICH (`make setup` does; or "
    "apt-get install openmpi-bin mpich), or put their bin directory on PATH"
)
#: Launchers whose absence means MPI is missing (not a typo in the user's program name).
_LAUNCHER_NAMES = ("mpirun", "mpiexec", "orterun", "prterun", "srun")
#: Launcher options that give the number of ranks of an app context.
_RANK_OPTIONS = ("-np", "--np", "-n", "--n", "-c")
#: Launcher options naming other nodes to run on (their cores, not this node's, count).
_HOST_OPTIONS = ("-H", "-host", "--host", "-hostfile", "--hostfile", "-machinefile",
                 "--machinefile", "--default-hostfile")  # fmt: skip


#: The options with which each MPI's launcher sets the preload (its value) in the ranks and
#: passes them the variables of its environment (their names).
FORWARDING = {
    mpikind.OPENMPI: lambda preload, names: " ".join(
        [f"-x LD_PRELOAD={preload}", *(f"-x {n}" for n in names)]),
    mpikind.MPICH: lambda preload, names: f"-genv LD_PRELOAD {preload} -genvlist "
    + ",".join(names),
}  # fmt: skip


def choose_mpi(mpi: str | None, command: Sequence[str], env: Mapping[str, str] = os.environ) -> str:
    """The MPI to attach for: `mpi` if given, else the command's (see mpikind), else Open
    MPI (a program without MPI is profiled by either build)."""
    return mpi or mpikind.command_mpi(command, env) or mpikind.OPENMPI


def hook_library(settings: Settings, mpi: str) -> Path:
    """STACKLENS_LIBRARY if set, else the library built for mpi."""
    return settings.library or LIBRARIES[mpi]


def hook_environment(settings: Settings, library: Path) -> dict[str, str]:
    """The variables that attach the hook library to a program and point it at the
    collector, plus every other declared hook setting that is set (in the environment or
    the configuration file; under an old name of the setting too, which every stacklens
    command says once: stacklens_cli.config.unknown_settings)."""
    if not library.is_file():
        raise FileNotFoundError(
            f"hook library {library} is not built: run `make -C mpi_pmpi_hooks variants`"
        )
    preload = os.environ.get("LD_PRELOAD", "")
    parts = [str(library)] + [p for p in preload.split(":") if p and p != str(library)]
    env = {
        "LD_PRELOAD": ":".join(parts),
        "STACKLENS_COLLECTOR": settings.collector,
        "STACKLENS_INTERVAL_MS": str(settings.interval_ms),
        "STACKLENS_SPOOL_DIR": str(settings.spool_dir),
    }
    if settings.ingest_token:
        env["STACKLENS_INGEST_TOKEN"] = settings.ingest_token
    if settings.job_id:
        env["STACKLENS_JOB_ID"] = settings.job_id
    given = {**config_file_values(), **os.environ}
    for name, declared in DECLARED.items():
        source = given_as(name, given) if declared.hooks_read and name not in env else None
        if source is not None:  # an old name is passed on under the new one
            env[name] = given[source]
    return env


def node_cores() -> int:
    """Cores this process may run on (distinct physical cores, as Open MPI counts its
    slots on a node); the CPU count where the topology cannot be read."""
    cpus = os.sched_getaffinity(0)
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            cores.add((package, (topology / "core_id").read_text().strip()))
        except OSError:
            return len(cpus)
    return len(cores) or len(cpus)


def requested_ranks(command: Sequence[str]) -> int | None:
    """The ranks a launcher command line asks for on this node (`-np N`, summed over the
    `:`-separated app contexts); None when it does not say or names other hosts."""
    if any(arg.split("=")[0] in _HOST_OPTIONS for arg in command):
        return None
    return asked_ranks(command)


def asked_ranks(command: Sequence[str]) -> int | None:
    """The ranks a launcher command line asks for (`-np N`, summed over the `:`-separated
    app contexts), wherever they run; None when it does not say."""
    total = None
    for option, value in zip(command, command[1:], strict=False):
        if option in _RANK_OPTIONS and value.isdigit():
            total = (total or 0) + int(value)
    return total


def open_mpi_allowances(command: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """The Open MPI variables `command` needs on this node and `env` lacks: the run-as-root
    pair as root, oversubscription when it asks for more ranks than this node has cores
    and no scheduler allocated them (SLURM_JOB_ID, PBS_JOBID unset). Options or variables
    the user gave already are left alone."""
    wanted: dict[str, str] = {}
    if os.geteuid() == 0:
        wanted.update(OPENMPI_AS_ROOT)
    ranks = requested_ranks(command)
    scheduled = any(env.get(name) for name in ("SLURM_JOB_ID", "PBS_JOBID"))
    if ranks is not None and ranks > node_cores() and not scheduled:
        wanted.update(OPENMPI_OVERSUBSCRIBE)
    for option, variables in _OPENMPI_ALLOW_OPTIONS.items():
        if option in command:
            wanted = {k: v for k, v in wanted.items() if k not in variables}
    return {k: v for k, v in wanted.items() if k not in env}


def _allowance_note(variables: Mapping[str, str]) -> str:
    """What the Open MPI allowances in `variables` let the launcher do, for one line."""
    what = []
    if set(OPENMPI_AS_ROOT) & set(variables):
        what.append("run as root")
    if set(OPENMPI_OVERSUBSCRIBE) & set(variables):
        what.append(f"start more ranks than the {node_cores()} cores of this node")
    settings = " ".join(f"{k}={v}" for k, v in variables.items())
    return f"lets Open MPI {' and '.join(what)} ({settings}; set them yourself to choose)"


def _command(args: argparse.Namespace) -> list[str]:
    """The command after `--` (argparse keeps the `--`)."""
    return args.command[1:] if args.command[:1] == ["--"] else args.command


def cmd_env(settings: Settings, args: argparse.Namespace) -> int:
    """Print `export` lines for `eval "$(stacklens env)"` (with Open MPI's allowances as
    root), the shell variable `stacklens_forward` holding the launcher options that set
    the preload in the ranks and pass them every exported hook variable, the preload in
    the shell variable `stacklens_preload` (for other launchers), and (as a comment) those
    options. LD_PRELOAD itself is not exported: the shell that evaluates the lines, and
    every command it runs but the launched ranks, stays without the hooks."""
    command = _command(args)
    mpi = choose_mpi(args.mpi, command or ["mpirun"])
    variables = hook_environment(settings, hook_library(settings, mpi))
    preload = variables.pop("LD_PRELOAD")
    for key, value in variables.items():
        print(f"export {key}={shlex.quote(value)}")
    allowances = open_mpi_allowances(command, os.environ) if mpi == mpikind.OPENMPI else {}
    for key, value in allowances.items():
        print(f"export {key}={value}")
    forward = FORWARDING[mpi](preload, list(variables))
    print(f"stacklens_preload={shlex.quote(preload)}")
    print(f"stacklens_forward={shlex.quote(forward)}")
    if allowances:
        print(f"# stacklens: {_allowance_note(allowances)}")
    print(
        f"# {mpi}: the launcher options {forward} preload the hooks in the ranks only (this "
        "shell gets no LD_PRELOAD; another launcher: LD_PRELOAD=$stacklens_preload)"
    )
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    """Run a command with the hooks attached; say its job id and page at the start, forward
    SIGTERM and SIGINT to it, and end with one line on what was recorded; return its exit
    code (128 + the signal's number when a signal ended it)."""
    command = _command(args)
    if not command:
        print(
            "stacklens run: no command given (stacklens run -- mpirun -np 4 ./prog)",
            file=sys.stderr,
        )
        return 2
    if shutil.which(command[0]) is None:
        launcher = Path(command[0]).name.startswith(_LAUNCHER_NAMES)
        missing = MISSING_MPI.format(launcher=command[0]) if launcher else (
            f"command not found: {command[0]}")  # fmt: skip
        print(f"stacklens run: {missing}", file=sys.stderr)
        return 127
    mpi = choose_mpi(args.mpi, command)
    env = {**os.environ, **hook_environment(settings, hook_library(settings, mpi))}
    env[RUN_MPI] = mpi
    job = launch_job_id(env)
    allowances = open_mpi_allowances(command, env) if mpi == mpikind.OPENMPI else {}
    if allowances:
        print(f"stacklens run: {_allowance_note(allowances)}", file=sys.stderr, flush=True)
        env.update(allowances)
    page = job_page(settings, job)
    print(f"stacklens run: job {job}: {page}", file=sys.stderr, flush=True)
    launch_id = launch.new_launch_id()
    env[launch.LAUNCH_ID] = f"{launch_id:016x}"
    snapshot_dir = snapshots.make_dir()
    if snapshot_dir is not None:
        env[SNAPSHOT_DIR] = str(snapshot_dir)
    started_ns = time.time_ns()
    try:
        returncode, signalled, output = _supervise(command, env)
        record = launch.Launch(
            job=job, launch_id=launch_id, command=shlex.join(command),
            ranks_expected=asked_ranks(command), started_ns=started_ns,
            ended_ns=time.time_ns(), exit_code=max(returncode, 0),
            exit_signal=-returncode if returncode < 0 else None, forwarded=signalled,
            output=output,
        )  # fmt: skip
        code = 128 - returncode if returncode < 0 else returncode
        spool, own = _spool_ending(settings, snapshot_dir, record)
        waiting = _deliver_spooled(settings, spool, own)
    finally:
        if snapshot_dir is not None:
            snapshots.remove(snapshot_dir)
    print(f"stacklens run: {run_summary(settings, job, code, signalled, waiting)}",
          file=sys.stderr)  # fmt: skip
    return code


#: Set by `stacklens run` in its command's environment: its directory of the ranks' crash
#: snapshots (stacklens_cli/snapshots.py).
SNAPSHOT_DIR = "STACKLENS_SNAPSHOT_DIR"
#: Set by `stacklens run` in its command's environment: the MPI whose library it attached
#: (the hooks' advice on a mismatch names the other one's `--mpi`).
RUN_MPI = "STACKLENS_RUN_MPI"
#: The variables the hooks take a job id from, in their order (mpi_pmpi_hooks/src/identity.c).
_JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "STACKLENS_JOB_ID")


def launch_job_id(env: dict[str, str]) -> str:
    """The job id the hooks will report for this launch: the first of SLURM_JOB_ID,
    PBS_JOBID, STACKLENS_JOB_ID in `env`; when none is set, one is made as the hooks make
    theirs (`<host>-<pid>-<time>`) and set as STACKLENS_JOB_ID, so the launcher and every
    rank of the command are one job whose id is known before it starts."""
    for name in _JOB_ID_VARIABLES:
        if env.get(name):
            return env[name]
    job = f"{socket.gethostname()}-{os.getpid()}-{int(time.time())}"
    env["STACKLENS_JOB_ID"] = job
    return job


def job_page(settings: Settings, job: str) -> str:
    """The URL of a job's page on the dashboard these settings name."""
    from stacklens_cli.report import api_base_url

    return f"{api_base_url(settings)}/jobs/{quote(job, safe='')}"


def _terminal_sent_it() -> bool:
    """Whether a SIGINT may come from the terminal (Ctrl-C): this process is in the
    foreground process group of its terminal, which the launcher shares, so the terminal
    sent it the launcher too."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def _supervise(command: list[str], env: dict[str, str]) -> tuple[int, int | None, str]:
    """Run the command to its end, forwarding SIGTERM and SIGINT to it (a SIGINT from the
    terminal reached it already) and passing its output on; (its return code, negative:
    the signal that ended it; the first signal forwarded, or None; the last lines it
    printed)."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tail = launch.OutputTail()
    assert proc.stdout is not None and proc.stderr is not None
    tail.pump(proc.stdout, sys.stdout.buffer)
    tail.pump(proc.stderr, sys.stderr.buffer)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if not (signum == signal.SIGINT and _terminal_sent_it()):
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    tail.join()
    return code, (received[0] if received else None), tail.text()


def _spool_ending(
    settings: Settings, directory: Path | None, record: launch.Launch
) -> tuple[Path | None, Path | None]:
    """After `stacklens run`'s command: the crash snapshots of its ranks that died without
    a final frame (said in one line) and the launch record (with the call sites its ranks
    on this node recorded, resolved here: stacklens_cli/node_sites.py), written to the
    spool (or, with the spool off, to a folder of the snapshot directory: delivered now or
    lost). Returns
    that folder (None: the spool) and the launch record's file (None: not written). The
    replay sends a job's launch record after its ranks' frames (replay.py)."""
    frames = snapshots.leftovers(directory) if directory is not None else []
    off = str(settings.spool_dir) == "off"
    if off and directory is None:
        return None, None  # no spool and no /dev/shm: the ranks' own frames are all there is
    target = directory / "spool" if off and directory is not None else settings.spool_dir
    sites = node_sites.resolve_dir(directory)  # what this node can name (no shared FS)
    try:
        written = snapshots.spool(frames, target)
        (own,) = snapshots.spool([record.frame(settings.ingest_token or "", sites)], target,
                                 "launch", max_body=wire.BOUNDS["max_body_bytes"])  # fmt: skip
    except (OSError, ValueError) as exc:
        print(f"stacklens run: the crash snapshots of {len(frames)} ranks and the launch "
              f"record could not be spooled in {target}: {exc}", file=sys.stderr)  # fmt: skip
        return None, None
    if written:
        print(f"stacklens run: {len(written)} ranks died without a final frame: their crash "
              "snapshots are sent as their last frame (killed)", file=sys.stderr)  # fmt: skip
    return (target if off else None), own


def _deliver_spooled(
    settings: Settings, spool: Path | None = None, own: Path | None = None
) -> str | None:
    """After `stacklens run`'s command: deliver what its processes left in this node's
    spool (frames the collector could not take, the last interval of ranks a launcher
    killed while they flushed, the crash snapshots of ranks that died) and its own launch
    record (its file: `own`), or what is in `spool`. Other nodes' spools need `stacklens
    replay` there. Where frames still wait afterwards, said for the summary (None: nothing
    waits); the launch record delivered is not announced."""
    from stacklens_cli.replay import Refused, Spool, replay

    spool = spool or settings.spool_dir
    if str(spool) == "off":
        return None
    try:  # the processes' own spool: only files of this user are sent (for this user)
        with Spool.open(spool, owner=os.geteuid()) as opened:
            result = replay(opened, settings, timeout=10.0)
    except (FileNotFoundError, Refused):
        return None  # no spool, or one the hooks refuse too (not this user's: they warned)
    except OSError as exc:
        return f"the spool {spool} could not be read ({exc}): `stacklens replay` delivers it"
    set_aside = {path.name for path, _ in result.rejected}
    delivered_own = own is not None and not own.exists() and own.name not in set_aside
    theirs = result.delivered - delivered_own
    if not (theirs or result.rejected or result.remaining):
        return None
    print(
        f"stacklens run: delivered {theirs} spooled frames to {settings.collector}"
        f"; {len(result.rejected)} rejected, {result.remaining} left in {spool}",
        file=sys.stderr,
    )
    if not result.remaining:
        return None
    return (
        f"{result.remaining} frames wait in {spool} (the collector at {settings.collector} "
        "did not take them; `stacklens replay` delivers them)"
    )


#: How long the summary waits for the collector to store the ranks' final frames (s).
SUMMARY_WAIT_S = 5.0


def run_summary(
    settings: Settings, job: str, code: int, signalled: int | None, waiting: str | None
) -> str:
    """The line `stacklens run` ends with: how the command ended, and what the server
    recorded of the job (its MPI ranks and other processes, bytes sent, status), waiting up
    to SUMMARY_WAIT_S for it to stop saying `running`; where frames wait if the collector
    did not take them."""
    ended = f"exit {code}"
    if signalled is not None:
        ended += f" after {signal.Signals(signalled).name} (forwarded to the command)"
    recorded = _recorded(settings, job)
    parts = [f"job {job} ended ({ended})", recorded]
    if waiting:
        parts.append(waiting)
    return "; ".join(parts)


def _recorded(settings: Settings, job: str) -> str:
    """What the server says of the job, in words, or why it says nothing."""
    import httpx

    from presentation.formatting import ranks_and_processes
    from stacklens.api_models import JobSummary
    from stacklens_cli.report import api_base_url

    base = api_base_url(settings)
    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    url = f"{base}/api/jobs/{quote(job, safe='')}"
    deadline = time.monotonic() + SUMMARY_WAIT_S
    while True:
        try:
            answer = httpx.get(url, headers=headers, timeout=3)
        except httpx.HTTPError:
            return f"the server at {base} does not answer: nothing to say of what it recorded"
        if answer.status_code == 404:
            if time.monotonic() > deadline:
                return "the server recorded nothing of it"
        elif answer.status_code != 200:
            return f"the server answered {answer.status_code} for {url}"
        else:
            summary = JobSummary.model_validate(answer.json())
            if summary.status != "running" or time.monotonic() > deadline:
                counted = ranks_and_processes(summary.runs)
                return ", ".join([*counted, f"{human_bytes(summary.bytes_sent)} sent",
                                  f"status {summary.status}"])  # fmt: skip
        time.sleep(0.2)


def human_bytes(count: int) -> str:
    """A byte count for a person: `512 B`, `21.5 KiB`, `3.0 GiB`."""
    if count < 1024:
        return f"{count} B"
    size = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
