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
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from stacklens.paths import LIBRARIES
from stacklens.settings import Settings, config_file_values
from stacklens.settings_table import DECLARED
from stacklens_cli import mpikind

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


#: The options with which each MPI's launcher passes variables of its environment to the ranks.
FORWARDING = {
    mpikind.OPENMPI: lambda names: " ".join(f"-x {n}" for n in names),
    mpikind.MPICH: lambda names: "-genvlist " + ",".join(names),
}


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
    the configuration file)."""
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
        if declared.hooks_read and name not in env and name in given:
            env[name] = given[name]
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
    root), the shell variable `stacklens_forward` holding the launcher options that pass
    every exported hook variable to the ranks, and (as a comment) those options."""
    command = _command(args)
    mpi = choose_mpi(args.mpi, command or ["mpirun"])
    variables = hook_environment(settings, hook_library(settings, mpi))
    for key, value in variables.items():
        print(f"export {key}={shlex.quote(value)}")
    allowances = open_mpi_allowances(command, os.environ) if mpi == mpikind.OPENMPI else {}
    for key, value in allowances.items():
        print(f"export {key}={value}")
    forward = FORWARDING[mpi](list(variables))
    print(f"stacklens_forward={shlex.quote(forward)}")
    if allowances:
        print(f"# stacklens: {_allowance_note(allowances)}")
    print(f"# {mpi}: pass them to the ranks with the launcher options {forward}")
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    """Run a command with the hooks attached; return its exit code."""
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
    allowances = open_mpi_allowances(command, env) if mpi == mpikind.OPENMPI else {}
    if allowances:
        print(f"stacklens run: {_allowance_note(allowances)}", file=sys.stderr, flush=True)
        env.update(allowances)
    code = subprocess.call(command, env=env)
    _deliver_spooled(settings)
    return code


def _deliver_spooled(settings: Settings) -> None:
    """After `stacklens run`'s command: deliver what its processes left in this node's
    spool (frames the collector could not take, the last interval of ranks a launcher
    killed while they flushed). Other nodes' spools need `stacklens replay` there."""
    from stacklens_cli.replay import replay, spooled_frames

    spool = settings.spool_dir
    if str(spool) == "off" or not spool.is_dir() or not spooled_frames(spool):
        return
    result = replay(spool, settings, timeout=10.0)
    print(
        f"stacklens run: delivered {result.delivered} spooled frames to {settings.collector}"
        f"; {len(result.rejected)} rejected, {result.remaining} left in {spool}",
        file=sys.stderr,
    )
