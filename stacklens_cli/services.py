"""The long-running commands: `up`, `demo`, `collector` and `migrate`.

stacklens up                       database + migrations + collector (a child process) +
                                   API + dashboard
stacklens demo [--for SECONDS]     `up` plus an example MPI workload, repeated
stacklens collector                only the ingest service (several may share a database)
stacklens migrate                  apply the database migrations and exit
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import uvicorn
import uvloop

from stacklens.connguard import ConnectionLimits, raise_open_file_limit
from stacklens.modes import modes_text
from stacklens.paths import EXAMPLES_DIR
from stacklens.settings import ConfigError, Settings, parse_storage_servers
from stacklens_cli import fabric_sim, mpikind
from stacklens_cli.attach import (
    MISSING_MPI,
    choose_mpi,
    hook_environment,
    hook_library,
    open_mpi_allowances,
)


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


async def _serve(
    settings: Settings, workload: list[str] | None, duration: float | None, incident: bool = False
) -> None:
    """Start everything `up` starts; optionally loop a workload or stage the demo's incident
    (stacklens_cli/demo_incident.py), and stop after `duration` s. The collector runs in a
    process of its own (stacklens_cli/collector_process.py); CollectorFailed if it cannot
    get ready."""
    from collector.fabric.service import fabric_services
    from server.access.viewer import Access
    from server.http_guard import uvicorn_config
    from server.incidents.service import incident_service
    from server.traffic.repository import TrafficConfig
    from stacklens.db import make_engine
    from stacklens_cli.collector_process import CollectorProcess
    from stacklens_cli.site import create_site

    check_ports_free(settings, http=True)
    access = Access.from_settings(settings)
    limits = _connection_limits(settings, servers=1)  # one server in each process
    database = _start_database(settings)
    engine = make_engine(database.url)
    collector = CollectorProcess(settings, database.url, limits)
    fabric = fabric_services(database.url, settings)  # [] unless a fabric is reachable
    url = f"http://{settings.http_host}:{settings.http_port}"
    wildcard = settings.http_host in ("0.0.0.0", "::", "")
    own_url = f"http://127.0.0.1:{settings.http_port}" if wildcard else url
    traffic = TrafficConfig(settings.fabric_paths, parse_storage_servers(settings.storage_servers),
                            settings.storage_placement)  # fmt: skip
    app = create_site(
        engine, api_base_url=own_url, refresh_ms=settings.refresh_ms,
        fabric_fold_above=settings.fabric_fold_above, collector=collector.link,
        connection_limits=limits, max_body_bytes=settings.http_max_body_mb << 20, access=access,
        traffic=traffic, incidents=incident_service(engine, settings, traffic),
        congested_wait_per_s=settings.incident_xmit_wait_per_s,
    )  # fmt: skip
    app.state.fabric_samplers = fabric  # for /metrics
    server = _QuietSignalsServer(
        uvicorn_config(app, settings.http_host, settings.http_port, log_level="warning")
    )
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    others: list[asyncio.Task] = [asyncio.create_task(stop.wait())]
    reports: list[asyncio.Task] = []  # what fabric discovery found, said when it has
    http: asyncio.Task | None = None
    try:
        ready = await collector.start()
        supervisor = asyncio.create_task(collector.supervise(), name="collector")
        others.append(supervisor)
        http = asyncio.create_task(server.serve(), name="http")
        for service in fabric:
            await service.start()
            progress("fabric discovery: started (it samples a `stacklens fabric-sim` or local "
                     "HCA it finds, now or later)")  # fmt: skip
            reports.append(asyncio.create_task(_report_fabric(service)))
        if not fabric:
            progress("fabric discovery: off (STACKLENS_FABRIC_SOURCE=none)")
        while not server.started and not stop.is_set():
            if http.done():
                await http
                raise ConfigError(f"could not serve on {url}")
            await asyncio.sleep(0.05)
        progress(f"collector: listening on {settings.collector_host}:{ready.port}")
        progress(f"modes: {modes_text(settings.ingest_auth, access.mode)} (stacklens status, "
                 "the dashboard's footer and /metrics say them too)")  # fmt: skip
        if settings.incidents == "on":
            hook = " (alerts to STACKLENS_ALERT_WEBHOOK)" if settings.alert_webhook else ""
            progress(f"incidents: detecting on every sweep{hook}")
        progress(f"API and dashboard: serving on {url}")
        # the PDF reports' browser (server/reports/painter.py), started now in the
        # background rather than at the first PDF asked for (seconds on a busy node)
        from server.reports import render

        render.prepare("pdf")
        print(
            f"stacklens is up: dashboard {url}/  API docs {url}/docs  "
            f"collector {settings.collector_host}:{ready.port}",
            flush=True,
        )
        if workload:
            others.append(asyncio.create_task(_loop_workload(settings, workload)))
        if incident:
            from stacklens_cli.demo_incident import StagedIncident

            others.append(asyncio.create_task(StagedIncident(settings, engine).run()))
        if duration is not None:
            others.append(asyncio.create_task(asyncio.sleep(duration)))
        await asyncio.wait([http, *others], return_when=asyncio.FIRST_COMPLETED)
        if supervisor.done():
            supervisor.result()  # a restarted collector that could not get ready
    finally:
        # Also on Ctrl-C / SIGTERM (they set `stop`): first the workload (its ranks flush
        # to the collector while it still runs), then the web server, then the collector
        # (before the database, which stops when this process ends).
        for task in [*others, *reports]:
            task.cancel()
        await asyncio.gather(*others, *reports, return_exceptions=True)
        for service in fabric:
            await service.stop()
        if http is not None:
            server.should_exit = True
            await asyncio.gather(http, return_exceptions=True)
        await collector.stop()
        engine.dispose()
        progress("stopped")


def _run_serve(settings: Settings, workload: list[str] | None, duration: float | None,
               incident: bool = False) -> int:  # fmt: skip
    """Run `_serve`; its exit status: 0, or 1 (said on standard error) when the collector
    process could not get ready."""
    from stacklens_cli.collector_process import CollectorFailed

    try:
        uvloop.run(_serve(settings, workload, duration, incident))
    except CollectorFailed as exc:
        print(f"stacklens: collector: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


def progress(step: str, command: str = "up") -> None:
    """One line of what `stacklens COMMAND` (up, demo: `up`; collector) is doing as it
    starts."""
    print(f"stacklens {command}: {step}", flush=True)


def check_ports_free(settings: Settings, http: bool) -> None:
    """ConfigError (one line: which port, which setting to change) if the collector's port,
    or with `http` the API's, is taken; checked before anything starts."""
    ports = [(settings.collector_host, settings.collector_port, "STACKLENS_COLLECTOR")]
    if http:
        ports.append((settings.http_host, settings.http_port, "STACKLENS_HTTP_PORT"))
    for host, port, setting in ports:
        if port == 0:
            continue  # a free port is chosen
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise ConfigError(f"cannot listen on {host}:{port} ({setting}): "
                                      f"{exc.strerror}") from exc  # fmt: skip
                raise ConfigError(
                    f"port {port} on {host} ({setting}) is already in use (another "
                    f"`stacklens up`?): stop what uses it, or set {setting} to a free port"
                ) from exc


def _start_database(settings: Settings, command: str = "up"):
    """Open the database and migrate it, saying what it does."""
    from stacklens.db import fit_lock_table, head_revision, migrate, open_database

    started = time.monotonic()
    if settings.database_url:
        progress("database: external PostgreSQL", command)
    else:
        progress(f"database: starting embedded PostgreSQL in {settings.state_dir / 'pg'}", command)
    database = open_database(settings)
    progress(f"database: ready ({time.monotonic() - started:.1f} s)", command)
    started = time.monotonic()
    migrate(database.url)
    progress(f"migrations: schema at {head_revision()} ({time.monotonic() - started:.1f} s)",
             command)  # fmt: skip
    return fit_lock_table(database, settings)


async def _report_fabric(sampler) -> None:
    """Say what the fabric sampler found, once its first sweep of a fabric is stored."""
    while sampler.sweeps == 0:
        await asyncio.sleep(0.2)
    topology, source = sampler.topology, getattr(sampler.source, "name", "fabric")
    found = f"{len(topology.nodes)} nodes" if topology is not None else "this node's ports"
    progress(f"fabric discovery: {source}: {found} found, swept every {sampler.interval_s:g} s")


def _connection_limits(settings: Settings, servers: int) -> ConnectionLimits:
    """The settings' connection limits, after raising the open-file soft limit to the hard
    limit (every connection is a descriptor); lowered, with a warning, where `servers`
    servers at their limit would not fit in it."""
    fd_limit = raise_open_file_limit()
    wanted = settings.connection_limits()
    limits = wanted.fitting(fd_limit, servers)
    if limits != wanted:
        print(f"stacklens: the open-file limit is {fd_limit}: at most {limits.max_total} "
              "connections per server (STACKLENS_MAX_CONNECTIONS)", file=sys.stderr)  # fmt: skip
    return limits


async def _loop_workload(settings: Settings, workload: list[str]) -> None:
    """Run `workload` under the hooks again and again; kill the running one when cancelled."""
    mpi = choose_mpi(None, workload)
    env = {**os.environ, **hook_environment(settings, hook_library(settings, mpi))}
    if mpi == mpikind.OPENMPI:
        env.update(open_mpi_allowances(workload, env))
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
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise ConfigError(MISSING_MPI.format(launcher="mpirun"))
    job = [str(program), "40", "262144", "100"]
    if hosts is None:
        return [mpirun, "-np", str(ranks), *job]
    contexts = [["-np", "1", "-x", f"STACKLENS_HOST={host}", *job] for host in hosts]
    return [mpirun, *contexts[0], *(a for c in contexts[1:] for a in (":", *c))]


async def _run_collector(settings: Settings) -> None:
    """Run only the collector (ingest + partition maintenance) until SIGINT/SIGTERM."""
    from collector.service import CollectorService

    check_ports_free(settings, http=False)
    limits = _connection_limits(settings, servers=1)
    database = _start_database(settings, "collector")
    collector = CollectorService(database.url, settings, limits)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    await collector.start()
    try:
        print(f"stacklens collector on {settings.collector_host}:{collector.port}", flush=True)
        await stop.wait()
    finally:
        await collector.stop()
        progress("stopped", "collector")


def cmd_collector(settings: Settings, _: argparse.Namespace) -> int:
    """A stateless collector; run several against one database to scale out."""
    uvloop.run(_run_collector(settings))
    return 0


def _check_exposure(settings: Settings) -> None:
    """Refuse (ConfigError, before anything starts) to serve without a login on an address
    other than loopback; with STACKLENS_ALLOW_OPEN_BIND, warn instead."""
    warning = settings.check_exposure()
    if warning is not None:
        print(f"stacklens: {warning}", file=sys.stderr, flush=True)


def cmd_up(settings: Settings, _: argparse.Namespace) -> int:
    """Serve until interrupted."""
    _check_exposure(settings)
    return _run_serve(settings, workload=None, duration=None)


#: Hosts of the demo's simulated fabric (`stacklens fabric-sim`).
DEMO_FABRIC_HOSTS = 32


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    """`up` plus a workload; stop after --for seconds if given.

    Unless --no-fabric, a simulated fabric runs alongside (started first, so `up`'s
    fabric sampler finds it; stopped last), and the workload is the staged incident
    (stacklens_cli/demo_incident.py); with `--workload ring` (or without a fabric) the
    example ring job, its ranks placed on the fabric's hosts.
    """
    _check_exposure(settings)
    with contextlib.ExitStack() as stack:
        hosts = None
        fabric = args.fabric and stack.enter_context(
            fabric_sim.background(settings, DEMO_FABRIC_HOSTS)
        )
        if fabric and args.workload == "incident":
            return _run_serve(settings, workload=None, duration=args.duration, incident=True)
        if fabric:
            hosts = fabric_sim.placed_hosts(DEMO_FABRIC_HOSTS, args.ranks)
        workload = demo_workload(args.ranks, hosts)
        return _run_serve(settings, workload=workload, duration=args.duration)
