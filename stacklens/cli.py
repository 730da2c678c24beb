"""The `stacklens` command: up, run, env, demo, migrate.

stacklens up                       database + migrations + collector + API + dashboard
stacklens run -- mpirun -np 4 ./a  run a command with the hook library attached
eval "$(stacklens env)"            the same variables for batch scripts
stacklens demo [--for SECONDS]     `up` plus an example MPI workload, repeated
stacklens migrate                  apply the database migrations and exit
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import uvicorn
import uvloop
from pydantic import ValidationError

from stacklens import fabric_sim
from stacklens.paths import EXAMPLES_DIR
from stacklens.settings import ConfigError, Settings, get_settings

log = logging.getLogger("stacklens")

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
    from stacklens.replay import replay, spooled_frames

    spool = settings.spool_dir
    if str(spool) == "off" or not spool.is_dir() or not spooled_frames(spool):
        return
    result = replay(spool, settings.collector_host, settings.collector_port, timeout=10.0)
    print(
        f"stacklens run: delivered {result.delivered} spooled frames to {settings.collector}"
        f"; {len(result.rejected)} rejected, {result.remaining} left in {spool}",
        file=sys.stderr,
    )


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    """Deliver the spooled frames to the collector; non-zero if any are left or rejected."""
    from stacklens.replay import replay

    spool = args.spool_dir or settings.spool_dir
    if not spool.is_dir():
        print(f"stacklens replay: no spool directory {spool}", file=sys.stderr)
        return 2
    result = replay(spool, settings.collector_host, settings.collector_port)
    print(
        f"replayed {result.delivered} frames from {spool} to {settings.collector}; "
        f"{len(result.rejected)} rejected, {result.remaining} left"
    )
    for path, reason in result.rejected:
        print(f"  rejected: {path} ({reason})", file=sys.stderr)
    return 0 if result.remaining == 0 and not result.rejected else 1


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    """Apply the migrations to the configured database."""
    from stacklens.db import migrate, open_database

    database = open_database(settings)
    migrate(database.url)
    print("database is at the newest schema revision")
    return 0


class _QuietSignalsServer(uvicorn.Server):
    """uvicorn without its own signal handling: `_serve` orders the shutdown itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(settings: Settings, workload: list[str] | None, duration: float | None) -> None:
    """Start everything `up` starts; optionally loop a workload and stop after `duration` s."""
    from collector.fabric.service import fabric_services
    from collector.service import CollectorService
    from server.app import create_app
    from stacklens.db import make_engine, migrate, open_database

    database = open_database(settings)
    migrate(database.url)
    engine = make_engine(database.url)
    collector = CollectorService(database.url, settings)
    fabric = fabric_services(database.url, settings)  # [] unless a fabric is reachable
    url = f"http://{settings.http_host}:{settings.http_port}"
    wildcard = settings.http_host in ("0.0.0.0", "::", "")
    own_url = f"http://127.0.0.1:{settings.http_port}" if wildcard else url
    app = create_app(
        engine, api_base_url=own_url, refresh_ms=settings.refresh_ms, collector=collector
    )
    server = _QuietSignalsServer(
        uvicorn.Config(app, host=settings.http_host, port=settings.http_port, log_level="warning")
    )
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    http = asyncio.create_task(server.serve(), name="http")
    others: list[asyncio.Task] = [asyncio.create_task(stop.wait())]
    try:
        for service in fabric:
            await service.start()
        while not server.started and not stop.is_set():
            if http.done():
                await http
                raise ConfigError(f"could not serve on {url}")
            await asyncio.sleep(0.05)
        print(
            f"stacklens is up: dashboard {url}/  API docs {url}/docs  "
            f"collector {settings.collector_host}:{collector.port}",
            flush=True,
        )
        if workload:
            others.append(asyncio.create_task(_loop_workload(settings, workload)))
        if duration is not None:
            others.append(asyncio.create_task(asyncio.sleep(duration)))
        await asyncio.wait([http, *others], return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Also on Ctrl-C / SIGTERM (they set `stop`): first the workload (its ranks flush
        # to the collector while it still runs), then the web server, whose lifespan
        # stops the collector.
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        for service in fabric:
            await service.stop()
        server.should_exit = True
        await asyncio.gather(http, return_exceptions=True)
        engine.dispose()


async def _loop_workload(settings: Settings, workload: list[str]) -> None:
    """Run `workload` under the hooks again and again; kill the running one when cancelled."""
    env = {**os.environ, **hook_environment(settings)}
    if os.geteuid() == 0:
        env.update(OPENMPI_ROOT_ENV)
    while True:
        print(f"demo: running {shlex.join(workload)}", flush=True)
        proc = await asyncio.create_subprocess_exec(
            *workload, env=env, stdout=subprocess.DEVNULL, start_new_session=True
        )
        try:
            code = await proc.wait()
        except asyncio.CancelledError:
            await _stop_process_group(proc)
            raise
        if code != 0:
            print(f"demo: workload exited with {code}", file=sys.stderr, flush=True)
            await asyncio.sleep(1.0)


async def _stop_process_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the group (mpirun forwards it to its ranks), then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), timeout=5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def demo_workload(ranks: int, hosts: list[str] | None = None) -> list[str]:
    """The demo MPI job: ring exchange plus allreduce (examples/ring_allreduce.c).

    With `hosts` (one per rank), rank i runs with STACKLENS_HOST=hosts[i] (an MPMD
    command line: mpirun passes one environment to all ranks of an app context).
    """
    program = EXAMPLES_DIR / "build" / "ring_allreduce"
    if not program.is_file():
        raise FileNotFoundError(f"{program} is not built: run `make -C examples`")
    mpirun = shutil.which("mpirun") or "mpirun"
    job = [str(program), "40", "262144", "100"]
    if hosts is None:
        return [mpirun, "-np", str(ranks), *job]
    contexts = [["-np", "1", "-x", f"STACKLENS_HOST={host}", *job] for host in hosts]
    return [mpirun, *contexts[0], *(a for c in contexts[1:] for a in (":", *c))]


async def _run_collector(settings: Settings) -> None:
    """Run only the collector (ingest + partition maintenance) until SIGINT/SIGTERM."""
    from collector.service import CollectorService
    from stacklens.db import migrate, open_database

    database = open_database(settings)
    migrate(database.url)
    collector = CollectorService(database.url, settings)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    await collector.start()
    try:
        print(f"stacklens collector on {settings.collector_host}:{collector.port}", flush=True)
        await stop.wait()
    finally:
        await collector.stop()


def cmd_collector(settings: Settings, _: argparse.Namespace) -> int:
    """A stateless collector; run several against one database to scale out."""
    uvloop.run(_run_collector(settings))
    return 0


def cmd_up(settings: Settings, _: argparse.Namespace) -> int:
    """Serve until interrupted."""
    uvloop.run(_serve(settings, workload=None, duration=None))
    return 0


#: Hosts of the demo's simulated fabric (`stacklens fabric-sim`).
DEMO_FABRIC_HOSTS = 32


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    """`up` plus the example workload; stop after --for seconds if given.

    Unless --no-fabric, a simulated fabric runs alongside (started first, so `up`'s
    fabric sampler finds it; stopped last), with the ranks placed on its hosts.
    """
    with contextlib.ExitStack() as stack:
        hosts = None
        if args.fabric and stack.enter_context(fabric_sim.background(settings, DEMO_FABRIC_HOSTS)):
            hosts = fabric_sim.placed_hosts(DEMO_FABRIC_HOSTS, args.ranks)
        workload = demo_workload(args.ranks, hosts)
        uvloop.run(_serve(settings, workload=workload, duration=args.duration))
    return 0


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
    run.add_argument("command", nargs=argparse.REMAINDER)
    run.set_defaults(func=cmd_run)
    sub.add_parser("env", help="print the hook variables as export lines").set_defaults(
        func=cmd_env
    )
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
    replay.set_defaults(func=cmd_replay)
    fabric_sim.add_parser(sub)
    return parser


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
        print(f"stacklens: bad configuration:\n{exc}", file=sys.stderr)
        return 2
    try:
        return args.func(settings, args)
    except (FileNotFoundError, ConfigError) as exc:
        print(f"stacklens: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
