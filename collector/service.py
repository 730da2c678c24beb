"""The collector as one startable service: frame writer, TCP ingest server, partition
maintenance (partitions created ahead, retention), the watch of the users sending
(trusted ingest with several of them is logged as a warning: stacklens/modes.py), and
optionally the control channel (collector/control.py) through which another process
reads its figures and hands it HTTP ingest batches; and the call-site resolver
(collector/resolver.py), told of the jobs whose call sites each commit stored."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import uvloop

from collector.control import CollectorFigures, CollectorLink, CollectorStatus, ControlServer
from collector.ingest.json_frames import store_batch
from collector.ingest.server import Identity, IngestServer
from collector.resolver import SiteResolver
from collector.store.jobs import mark_lost_jobs
from collector.store.partitions import apply_retention, day_of
from collector.store.rollups import rollup_pass
from collector.store.status import recent_senders
from collector.store.writer import FrameWriter
from stacklens import wire
from stacklens.connguard import ConnectionLimits
from stacklens.constants import DAY_NS
from stacklens.modes import trusted_warning
from stacklens.settings import Settings

log = logging.getLogger(__name__)


class CollectorService:
    """Runs a FrameWriter and an IngestServer on the current event loop."""

    def __init__(
        self,
        database_url: str,
        settings: Settings,
        connection_limits: ConnectionLimits | None = None,
        control_socket: Path | None = None,
    ):
        """`connection_limits`: those of the settings unless given (fitted to the
        process's open-file limit by the command that starts the service);
        `control_socket`: where to serve the control channel (none unless given; its
        directory must be this user's own)."""
        self.writer = FrameWriter(database_url, max_run_names=settings.max_run_files,
                                  max_run_comms=settings.max_run_comms,
                                  max_run_callsites=settings.max_run_callsites)  # fmt: skip
        self.ingest = IngestServer(
            self.writer,
            settings.collector_host,
            settings.collector_port,
            token=settings.ingest_token,
            max_body=settings.max_frame_bytes,
            retention_days=settings.retention_days,
            horizon_days=settings.ingest_horizon_days,
            max_skew_ns=int(settings.max_clock_skew_s * 1e9),
            max_new_days_per_hour=settings.max_new_days_per_hour,
            max_mb_per_hour=settings.max_mb_per_hour,
            max_stored_mb=settings.max_stored_mb,
            limits=connection_limits or settings.connection_limits(),
            buffer_bytes=settings.ingest_buffer_mb << 20,
            identity=Identity(
                settings.ingest_auth,
                None if settings.collector_socket == "off" else settings.collector_socket,
                settings.admins(),
                settings.munge_socket or None,
            ),
        )
        # call sites resolved on a thread as they arrive (collector/resolver.py)
        self.resolver = SiteResolver(database_url)
        self.writer.on_sites = self.resolver.notify
        self.database_url = database_url
        self.retention_days = settings.retention_days
        self.maintenance_interval_s = settings.maintenance_interval_s
        self.rollup_interval_s = settings.rollup_interval_s
        self.job_lost_after_s = settings.job_lost_after_s
        self._maintenance: asyncio.Task | None = None
        self._rollups: asyncio.Task | None = None
        self._job_watch: asyncio.Task | None = None
        self.maintained = asyncio.Event()  # set after each maintenance pass
        self.rollups_quarantined = 0  # runs whose rollups a pass quarantined
        self._senders_warned = 1  # the most users sending a warning has named yet
        self.control = None if control_socket is None else ControlServer(
            control_socket,
            {"status": self._status, "figures": self._figures, "reject": self._reject,
             "ingest": self._ingest},
            max_payload=settings.http_max_body_mb << 20,
        )  # fmt: skip

    @property
    def port(self) -> int:
        """The TCP port frames are received on."""
        return self.ingest.port

    async def start(self) -> None:
        """Start writing, listening and the periodic partition maintenance."""
        await self.writer.start()
        self.resolver.start()
        await self.ingest.start()
        log.info("ingest mode %s (STACKLENS_INGEST_AUTH)", self.ingest.identity.auth)
        await self._check_senders()
        if self.control is not None:
            await self.control.start()
        self._maintenance = asyncio.create_task(self._maintain(), name="stacklens-maintenance")
        self._rollups = asyncio.create_task(self._roll_up(), name="stacklens-rollups")
        self._job_watch = asyncio.create_task(self._watch_jobs(), name="stacklens-job-watch")

    async def stop(self) -> None:
        """Stop listening and maintaining, then stop the writer."""
        if self.control is not None:
            await self.control.stop()
        await self.ingest.stop()
        for task in (self._maintenance, self._rollups, self._job_watch):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self.writer.stop()
        await asyncio.to_thread(self.resolver.stop, 5.0)

    def figures(self) -> CollectorFigures:
        """What the ingest and the writer have done so far (/metrics)."""
        ingest, writer = self.ingest.stats, self.writer.stats
        return CollectorFigures(
            connections=ingest.connections, frames_received=ingest.frames_received,
            rejected=dict(ingest.rejected), frames_committed=writer.frames_committed,
            frames_duplicate=writer.frames_duplicate, batches=writer.batches,
            write_errors=writer.write_errors, store_failed=writer.store_failed,
            rollups_quarantined=self.rollups_quarantined, rows=dict(writer.rows),
            names_folded=dict(writer.names_folded),
            queue_depth=self.writer.backlog, buffered_bytes=self.ingest.buffered,
            open_connections=self.ingest.guard.open,
            dropped_connections=dict(self.ingest.guard.stats.dropped),
        )  # fmt: skip

    async def _status(self, _: dict[str, Any], __: bytes) -> dict[str, Any]:
        status = CollectorStatus(os.getpid(), self.port, self.ingest.identity.auth,
                                 self.ingest.token)  # fmt: skip
        return {"status": dataclasses.asdict(status)}

    async def _figures(self, _: dict[str, Any], __: bytes) -> dict[str, Any]:
        return {"figures": dataclasses.asdict(self.figures())}

    async def _reject(self, request: dict[str, Any], _: bytes) -> dict[str, Any]:
        self.ingest.stats.rejected[str(request.get("label"))] += 1
        return {}

    async def _ingest(self, _: dict[str, Any], body: bytes) -> dict[str, Any]:
        return {"ingest": dataclasses.asdict(await store_batch(self.ingest, body))}

    async def maintain_once(self, now_ns: int | None = None) -> None:
        """Create partitions for today and the next two days; apply the retention window;
        read again what every user has stored (the bound on storage per user)."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        today = day_of(now_ns)
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            await self.writer.partitions.ensure(conn, range(today, today + 3))
            if self.retention_days is not None:
                cutoff = now_ns - self.retention_days * DAY_NS
                await apply_retention(conn, self.writer.partitions, cutoff)
            await self.ingest.quota.refresh(conn)

    async def roll_up_once(self) -> int:
        """One rollup pass over the dirty buckets; returns the rollup rows written (the runs
        whose sums do not fit are quarantined and counted: collector/store/rollups.py)."""
        quarantined: list[int] = []
        try:
            async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
                return await rollup_pass(conn, quarantined)
        finally:
            self.rollups_quarantined += len(quarantined)

    async def mark_lost_once(self, now_ns: int | None = None) -> int:
        """Mark lost the running runs (and their jobs, unless another run is running)
        silent for `job_lost_after_s`; returns how many runs."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        cutoff = now_ns - int(self.job_lost_after_s * 1e9)
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            return await mark_lost_jobs(conn, cutoff)

    async def check_senders_once(self, now_ns: int | None = None) -> int:
        """How many users sent runs lately (collector/store/status.py); in trusted mode,
        more than one is logged as a warning when first seen, and again whenever more
        users than the last warning named are sending."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        senders = await asyncio.to_thread(self._count_senders, now_ns)
        warning = trusted_warning(self.ingest.identity.auth, senders)
        if warning is not None and senders > self._senders_warned:
            self._senders_warned = senders
            log.warning("%s", warning)
        return senders

    def _count_senders(self, now_ns: int) -> int:
        with psycopg.connect(self.database_url) as conn:
            return recent_senders(conn, now_ns)

    async def _check_senders(self) -> None:
        try:
            await self.check_senders_once()
        except (psycopg.Error, OSError) as exc:
            log.warning("counting the users sending failed, retrying later: %s", exc)

    async def _watch_jobs(self) -> None:
        while True:  # a quarter of the silence allowed, at most a minute
            await asyncio.sleep(min(60.0, self.job_lost_after_s / 4))
            try:
                if lost := await self.mark_lost_once():
                    log.info("%d running job(s) sent nothing for %.0f s: marked lost",
                             lost, self.job_lost_after_s)  # fmt: skip
            except (psycopg.Error, OSError) as exc:
                log.warning("lost-job pass failed, retrying later: %s", exc)
            await self._check_senders()

    async def _roll_up(self) -> None:
        while True:
            await asyncio.sleep(self.rollup_interval_s)
            try:
                await self.roll_up_once()
            except (psycopg.Error, OSError) as exc:
                log.warning("rollup pass failed, retrying later: %s", exc)

    async def _maintain(self) -> None:
        while True:
            try:
                await self.maintain_once()
                self.maintained.set()
            except (psycopg.Error, OSError) as exc:
                log.warning("partition maintenance failed, retrying later: %s", exc)
            await asyncio.sleep(self.maintenance_interval_s)


class BackgroundCollector:
    """A CollectorService on its own event-loop thread (tests, benchmarks, embedding)."""

    def __init__(
        self,
        url: str,
        token: str = "",
        max_body: int = wire.BOUNDS["max_body_bytes"],
        listen: str = "127.0.0.1:0",
        control_socket: Path | None = None,
        **settings: Any,
    ):
        """`settings`: further Settings fields (limits, timeouts) for this collector; unless
        given, trusted mode (`ingest_auth`), no Unix socket and a ten-year horizon. With
        `control_socket`, the control channel is served there (`link` talks to it)."""
        settings.setdefault("ingest_auth", "trusted")
        settings.setdefault("collector_socket", "off")
        # The tests' frames are from 2023: the horizon reaches back ten years unless given.
        settings.setdefault("ingest_horizon_days", 3660)
        # Rollups and the lost-job pass run on demand here (roll_up_once, mark_lost_once),
        # not on timers that race with callers (the tests' frames are from 2023).
        self.settings = Settings(
            collector=listen,
            ingest_token=token,
            max_frame_bytes=max_body,
            rollup_interval_s=24 * 3600.0,
            job_lost_after_s=100 * 365 * 86_400.0,
            **settings,
        )
        self.service = CollectorService(url, self.settings, control_socket=control_socket)
        self.link = None if control_socket is None else CollectorLink(control_socket)
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> BackgroundCollector:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.service.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def settle_sites(self, timeout: float = 120.0) -> None:
        """Wait until the call-site resolver has answered every call-site frame committed
        so far (a test reads resolved names after its job; AssertionError on timeout)."""
        assert self.service.resolver.idle(timeout), "the call-site resolver did not finish"

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) to reach the collector from this machine (its loopback address)."""
        return "127.0.0.1", self.service.port

    @property
    def endpoint(self) -> str:
        """host:port, as STACKLENS_COLLECTOR expects it."""
        host, port = self.address
        return f"{host}:{port}"

    def call(self, fn):
        """Run `fn()` on the collector's loop (to read its stats consistently)."""

        async def wrapped():
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(10)
