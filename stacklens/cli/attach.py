"""`stacklens run` and `stacklens env`: attach the hook library to a program or a batch script.

stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts

Both attach the library built for the command's MPI (stacklens.cli.mpikind), unless
`--mpi` or STACKLENS_LIBRARY says which.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from stacklens.cli import mpikind
from stacklens.paths import LIBRARIES
from stacklens.settings import Settings

#: Environment that lets Open MPI run as root and oversubscribe the cores (demo and tests).
OPENMPI_ROOT_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


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
    """The variables that attach the hook library to a program and point it at the collector."""
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
    defaults = Settings.model_fields
    for name in ("ingest_auth", "collector_socket", "collector_user", "munge_socket"):
        if getattr(settings, name) != defaults[name].default:  # how the hooks prove things
            env[f"STACKLENS_{name.upper()}"] = getattr(settings, name)
    if settings.job_id:
        env["STACKLENS_JOB_ID"] = settings.job_id
    return env


def _command(args: argparse.Namespace) -> list[str]:
    """The command after `--` (argparse keeps the `--`)."""
    return args.command[1:] if args.command[:1] == ["--"] else args.command


def cmd_env(settings: Settings, args: argparse.Namespace) -> int:
    """Print `export` lines for `eval "$(stacklens env)"`, then (as a comment) how to pass
    them to the ranks with the launcher of the chosen MPI."""
    mpi = choose_mpi(args.mpi, _command(args) or ["mpirun"])
    variables = hook_environment(settings, hook_library(settings, mpi))
    for key, value in variables.items():
        print(f"export {key}={shlex.quote(value)}")
    print(
        f"# {mpi}: pass them to the ranks with the launcher options "
        f"{FORWARDING[mpi](list(variables))}"
    )
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
    library = hook_library(settings, choose_mpi(args.mpi, command))
    env = {**os.environ, **hook_environment(settings, library)}
    try:
        code = subprocess.call(command, env=env)
    except FileNotFoundError:
        print(f"stacklens run: command not found: {command[0]}", file=sys.stderr)
        return 127
    _deliver_spooled(settings)
    return code


def _deliver_spooled(settings: Settings) -> None:
    """After `stacklens run`'s command: deliver what its processes left in this node's
    spool (frames the collector could not take, the last interval of ranks a launcher
    killed while they flushed). Other nodes' spools need `stacklens replay` there."""
    from stacklens.cli.replay import replay, spooled_frames

    spool = settings.spool_dir
    if str(spool) == "off" or not spool.is_dir() or not spooled_frames(spool):
        return
    result = replay(spool, settings, timeout=10.0)
    print(
        f"stacklens run: delivered {result.delivered} spooled frames to {settings.collector}"
        f"; {len(result.rejected)} rejected, {result.remaining} left in {spool}",
        file=sys.stderr,
    )
