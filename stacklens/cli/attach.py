"""`stacklens run` and `stacklens env`: attach the hook library to a program or a batch script.

stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from stacklens.settings import Settings

#: Environment that lets Open MPI run as root and oversubscribe the cores (demo and tests).
OPENMPI_ROOT_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


def hook_environment(settings: Settings) -> dict[str, str]:
    """The variables that attach the hook library to a program and point it at the collector."""
    if not settings.library.is_file():
        raise FileNotFoundError(
            f"hook library {settings.library} is not built: run `make -C mpi_pmpi_hooks`"
        )
    preload = os.environ.get("LD_PRELOAD", "")
    parts = [str(settings.library)] + [
        p for p in preload.split(":") if p and p != str(settings.library)
    ]
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
    return env


def cmd_env(settings: Settings, _: argparse.Namespace) -> int:
    """Print `export` lines for `eval "$(stacklens env)"`."""
    for key, value in hook_environment(settings).items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def cmd_run(settings: Settings, args: argparse.Namespace) -> int:
    """Run a command with the hooks attached; return its exit code."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print(
            "stacklens run: no command given (stacklens run -- mpirun -np 4 ./prog)",
            file=sys.stderr,
        )
        return 2
    env = {**os.environ, **hook_environment(settings)}
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
    result = replay(spool, settings.collector_host, settings.collector_port, timeout=10.0)
    print(
        f"stacklens run: delivered {result.delivered} spooled frames to {settings.collector}"
        f"; {len(result.rejected)} rejected, {result.remaining} left in {spool}",
        file=sys.stderr,
    )
