"""The `stacklens` command: every subcommand lives in a module of this package.

stacklens up                       database + migrations + collector + API + dashboard
stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts
stacklens demo [--for SECONDS]     `up` plus an example MPI workload, repeated
stacklens collector                only the ingest service
stacklens migrate                  apply the database migrations and exit
stacklens replay [SPOOL_DIR|--all-users]  deliver spooled frames to the collector
stacklens fabric-sim --hosts 32    simulated InfiniBand fabric with traffic emulation
stacklens config                   every setting: effective value and source
stacklens status                   what runs where, the newest data, this node's spool
stacklens token create|list|revoke API tokens for scripts (stored hashed, expiring)
stacklens report --job J -o F.pdf  a job's, incident's or window's report (HTML or PDF)

This package is the top layer: it may import the collector, the server and the emulator;
nothing below it (settings, db, schema, wire) imports a command.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

from pydantic import ValidationError

from stacklens import __version__
from stacklens.settings import ConfigError, config_file_values, get_settings
from stacklens_cli import fabric_sim, mpikind, report, status, token
from stacklens_cli.attach import cmd_env, cmd_run
from stacklens_cli.config import cmd_config, unknown_settings
from stacklens_cli.helptext import subcommand
from stacklens_cli.replay import cmd_replay
from stacklens_cli.services import cmd_collector, cmd_demo, cmd_migrate, cmd_up


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the stacklens command."""
    parser = argparse.ArgumentParser(
        prog="stacklens",
        description="stacklens: MPI, file-system I/O and the InfiniBand fabric of HPC jobs, "
        "live.\n`stacklens COMMAND --help` says what a command does, with examples.",
        epilog="examples:\n  stacklens up\n  stacklens run -- mpirun -np 4 ./my_app\n"
        "  stacklens status",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stacklens {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    subcommand(
        sub,
        "up",
        "Start the database, migrations, collector, fabric discovery, API and dashboard, "
        "and serve until Ctrl-C.",
        ["stacklens up", "STACKLENS_HTTP_PORT=8080 stacklens up  # the dashboard on port 8080"],
        "It prints each step as it goes and the dashboard's URL once it serves; a port in "
        "use ends it with one line saying which setting to change.",
    ).set_defaults(func=cmd_up)
    subcommand(
        sub,
        "collector",
        "Run only a collector (the ingest service), against the configured database.",
        [
            "stacklens collector",
            "STACKLENS_DATABASE_URL=postgresql://u:pw@db/stacklens stacklens collector",
        ],
        "Collectors are stateless: several may share one database.",
    ).set_defaults(func=cmd_collector)
    run = subcommand(
        sub,
        "run",
        "Run a command with the hook library attached and keep its exit code.",
        [
            "stacklens run -- mpirun -np 4 ./my_app",
            "stacklens run --mpi mpich -- srun -n 64 ./my_app",
        ],
        "The library built for the command's MPI is chosen (--mpi to choose); Open MPI gets "
        "what it needs to start as root or with more ranks than cores, said in one line. "
        "Afterwards the frames its processes spooled on this node are delivered.",
    )
    env = subcommand(
        sub,
        "env",
        "Print the hook variables as export lines for a batch script, with the launcher "
        "options that pass them all to the ranks.",
        [
            'eval "$(stacklens env)"; mpirun $stacklens_forward ./my_app',
            'eval "$(stacklens env --mpi mpich)"; mpiexec.hydra $stacklens_forward ./my_app',
        ],
        "$stacklens_forward holds the options: -x NAME ... (Open MPI), -genvlist NAME,... (MPICH).",
    )
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
    demo = subcommand(
        sub,
        "demo",
        "Run `up` plus example MPI jobs on a simulated InfiniBand fabric: two jobs sharing a "
        "spine link, and an incident staged on it every few minutes (congestion, a job "
        "slowed, another checkpointing) for the detectors to find.",
        ["stacklens demo", "stacklens demo --for 60 --no-fabric  # 60 s, then stop everything",
         "stacklens demo --workload ring  # the ring example job again and again instead"],
    )  # fmt: skip
    demo.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS",
                      help="stop after this long (default: at Ctrl-C)")  # fmt: skip
    demo.add_argument("--ranks", type=int, default=4, help="ranks of the ring example job")
    demo.add_argument("--workload", choices=("incident", "ring"), default="incident",
                      help="incident: the staged incident's two jobs (needs the fabric); "
                      "ring: the ring example job")  # fmt: skip
    demo.add_argument(
        "--no-fabric", dest="fabric", action="store_false", help="no simulated fabric"
    )
    demo.set_defaults(func=cmd_demo)
    subcommand(
        sub, "migrate", "Apply the database migrations and exit.", ["stacklens migrate"]
    ).set_defaults(func=cmd_migrate)
    replay = subcommand(
        sub,
        "replay",
        "Deliver the frames the hooks spooled on this node to the collector.",
        [
            "stacklens replay  # this user's spool, STACKLENS_SPOOL_DIR",
            "stacklens replay --all-users  # every user's default spool (root, node epilog)",
        ],
        "Frames the collector rejected stay in the spool's rejected/ folder.",
    )
    replay.add_argument("spool_dir", nargs="?", type=Path, help="default: STACKLENS_SPOOL_DIR")
    replay.add_argument(
        "--all-users",
        action="store_true",
        help="every user's default spool, ${TMPDIR:-/tmp}/stacklens-spool-<uid> (root, epilog)",
    )
    replay.set_defaults(func=cmd_replay)
    fabric_sim.add_parser(sub)
    config = subcommand(
        sub,
        "config",
        "Print every STACKLENS_* setting with its effective value and where it came from "
        "(env, file or default).",
        ["stacklens config", "stacklens config --markdown  # the README's settings table"],
    )
    config.add_argument("--markdown", action="store_true", help="the README's settings table")
    config.set_defaults(func=cmd_config)
    status.add_parser(sub)
    token.add_parser(sub)
    report.add_parser(sub)
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


def configure_logging() -> None:
    """Log lines of every stacklens process (a command, `up`'s collector process): time,
    level, logger; the chattiest libraries only from warnings (or errors) up."""
    # platformdirs (under pgserver) warns on every start where XDG_RUNTIME_DIR is unset
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("pgserver", "alembic", "httpx", "kaleido", "choreographer", "logistro"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # WeasyPrint warns of every CSS property it ignores, fontTools of every font it subsets
    for noisy in ("weasyprint", "fontTools"):
        logging.getLogger(noisy).setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `stacklens` console script."""
    args = build_parser().parse_args(argv)
    configure_logging()
    try:
        settings = get_settings()
    except ValidationError as exc:
        for line in configuration_errors(exc):
            print(f"stacklens: bad configuration: {line}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"stacklens: {exc}", file=sys.stderr)
        return 2
    if args.cmd != "config":  # `config` lists them among the settings
        for line in unknown_settings(config_file_values()):
            print(f"stacklens: {line}", file=sys.stderr)
    try:
        return args.func(settings, args)
    except (FileNotFoundError, ConfigError) as exc:
        print(f"stacklens: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
