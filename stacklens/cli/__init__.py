"""The `stacklens` command: every subcommand lives in a module of this package.

stacklens up                       database + migrations + collector + API + dashboard
stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts
stacklens demo [--for SECONDS]     `up` plus an example MPI workload, repeated
stacklens collector                only the ingest service
stacklens migrate                  apply the database migrations and exit
stacklens replay [SPOOL_DIR|--all-users]  deliver spooled frames to the collector
stacklens fabric-sim --hosts 32    simulated InfiniBand fabric with traffic emulation
stacklens token create|list|revoke API tokens for scripts (stored hashed, expiring)

This package is the top layer: it may import the collector, the server and the emulator;
nothing below it (settings, db, schema, wire) imports a command.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pydantic import ValidationError

from stacklens.cli import fabric_sim, mpikind, token
from stacklens.cli.attach import cmd_env, cmd_run
from stacklens.cli.replay import cmd_replay
from stacklens.cli.services import cmd_collector, cmd_demo, cmd_migrate, cmd_up
from stacklens.settings import ConfigError, get_settings


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the stacklens command."""
    parser = argparse.ArgumentParser(
        prog="stacklens", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up", help="start database, collector, API and dashboard").set_defaults(
        func=cmd_up
    )
    sub.add_parser("collector", help="run only a collector (ingest)").set_defaults(
        func=cmd_collector
    )
    run = sub.add_parser("run", help="run a command with the hook library attached")
    env = sub.add_parser("env", help="print the hook variables as export lines")
    for attach, what in ((run, "the command to run"), (env, "the command to choose for")):
        attach.add_argument(
            "--mpi",
            choices=mpikind.MPIS,
            help="the MPI whose library to attach (default: detected from the command, "
            "else from the mpirun/mpiexec on PATH)",
        )
        attach.add_argument("command", nargs=argparse.REMAINDER, help=what)
    run.set_defaults(func=cmd_run)
    env.set_defaults(func=cmd_env)
    demo = sub.add_parser("demo", help="up + an example MPI workload")
    demo.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS")
    demo.add_argument("--ranks", type=int, default=4)
    demo.add_argument(
        "--no-fabric", dest="fabric", action="store_false", help="no simulated fabric"
    )
    demo.set_defaults(func=cmd_demo)
    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=cmd_migrate)
    replay = sub.add_parser("replay", help="deliver spooled frames to the collector")
    replay.add_argument("spool_dir", nargs="?", type=Path, help="default: STACKLENS_SPOOL_DIR")
    replay.add_argument(
        "--all-users",
        action="store_true",
        help="every user's default spool, ${TMPDIR:-/tmp}/stacklens-spool-<uid> (root, epilog)",
    )
    replay.set_defaults(func=cmd_replay)
    fabric_sim.add_parser(sub)
    token.add_parser(sub)
    return parser


def configuration_errors(exc: ValidationError) -> list[str]:
    """One line per invalid setting, naming its variable; the values are never shown (a
    token, even in part, must not reach a terminal or a log)."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        name = "STACKLENS_" + "_".join(str(part) for part in error["loc"]).upper()
        message = error["msg"].removeprefix("Value error, ")
        lines.append(message if message.startswith(name) else f"{name}: {message}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `stacklens` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("pgserver", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = get_settings()
    except ValidationError as exc:
        for line in configuration_errors(exc):
            print(f"stacklens: bad configuration: {line}", file=sys.stderr)
        return 2
    try:
        return args.func(settings, args)
    except (FileNotFoundError, ConfigError) as exc:
        print(f"stacklens: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
