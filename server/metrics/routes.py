"""GET /metrics: Prometheus exposition of this server's figures (connections, answer
durations, fabric sampler, incident detector), the collector's (read over its control
channel), the deployment's modes and the users sending; GET /api/deployment: the same
modes for the dashboard's footer."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from collector.control import CollectorFigures, CollectorUnavailable
from server.access.viewer import Access
from server.metrics.deployment import deployment, ingest_mode, senders
from server.metrics.requests import RequestTimings
from stacklens.api_models import Deployment
from stacklens.connguard import ConnectionGuard
from stacklens.timings import Timings

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from collector.fabric.service import FabricSampler
    from server.incidents.service import IncidentService

router = APIRouter(tags=["meta"])


class CollectorMetrics:
    """A prometheus_client collector of the collector's figures (read over its control
    channel at scrape time: collector/control.py); `figures` None: it did not answer."""

    def __init__(self, figures: CollectorFigures | None, restarts: int) -> None:
        self.figures, self.restarts = figures, restarts

    def collect(self) -> Iterator[Metric]:
        """Yield the values read."""
        yield GaugeMetricFamily(
            "stacklens_collector_up",
            "Whether the collector answered this scrape (0: not answering, restarting)",
            value=int(self.figures is not None),
        )
        yield CounterMetricFamily(
            "stacklens_collector_restarts",
            "Collector processes started again after one ended (`stacklens up`)",
            value=self.restarts,
        )
        f = self.figures
        if f is None:
            return
        yield CounterMetricFamily(
            "stacklens_ingest_connections", "Hook connections accepted", value=f.connections
        )
        yield CounterMetricFamily(
            "stacklens_ingest_frames_received",
            "Frames that passed validation (TCP and HTTP)",
            value=f.frames_received,
        )
        rejected = CounterMetricFamily(
            "stacklens_ingest_frames_rejected", "Frames rejected, by reason", labels=["reason"]
        )
        for reason, count in sorted(f.rejected.items()):
            rejected.add_metric([reason], count)
        yield rejected
        yield CounterMetricFamily(
            "stacklens_store_frames_committed", "Frames committed", value=f.frames_committed
        )
        yield CounterMetricFamily(
            "stacklens_store_frames_duplicate",
            "Resent frames recognised as already stored",
            value=f.frames_duplicate,
        )
        folded = CounterMetricFamily(
            "stacklens_store_names_folded",
            "Records whose new name beyond a run's bound was stored as the overflow record, "
            "by reason (run_files: STACKLENS_MAX_RUN_FILES; run_comms, run_comm_descriptions: "
            "STACKLENS_MAX_RUN_COMMS; run_callsites, run_callsite_frames: "
            "STACKLENS_MAX_RUN_CALLSITES)",
            labels=["reason"],
        )
        for reason, count in sorted(f.names_folded.items()):
            folded.add_metric([reason], count)
        yield folded
        yield CounterMetricFamily("stacklens_store_batches", "Transactions committed",
                                  value=f.batches)  # fmt: skip
        yield CounterMetricFamily(
            "stacklens_store_write_errors", "Failed transactions", value=f.write_errors
        )
        yield CounterMetricFamily(
            "stacklens_store_frames_failed",
            "Frames refused because storing them failed on their own (not for a value the "
            "database refuses, nor an outage): logged with their key",
            value=f.store_failed,
        )
        yield CounterMetricFamily(
            "stacklens_rollups_quarantined",
            "Runs whose rollups were quarantined (sums out of range): read raw, logged",
            value=f.rollups_quarantined,
        )
        rows = CounterMetricFamily(
            "stacklens_store_rows", "Delta rows written, by table", labels=["table"]
        )
        for table, count in sorted(f.rows.items()):
            rows.add_metric([table], count)
        yield rows
        yield GaugeMetricFamily(
            "stacklens_store_queue_depth",
            "Frames waiting for the writer (reading pauses at its bound)",
            value=f.queue_depth,
        )
        yield GaugeMetricFamily(
            "stacklens_ingest_buffered_bytes",
            "Bytes of incomplete frames held (STACKLENS_INGEST_BUFFER_MB bounds them)",
            value=f.buffered_bytes,
        )
        yield from connection_metrics("ingest", f.open_connections, f.dropped_connections)


def connection_metrics(server: str, open_now: int, dropped: Mapping[str, int]) -> Iterator[Metric]:
    """The connection gauge and drop counters of one server (its guard's figures)."""
    name = f"stacklens_{server}_connections"
    yield GaugeMetricFamily(f"{name}_open", "Connections open now", value=open_now)
    family = CounterMetricFamily(
        f"{name}_dropped",
        "Connections closed or refused by the limits and timeouts, by reason",
        labels=["reason"],
    )
    for reason, count in sorted(dropped.items()):
        family.add_metric([reason], count)
    yield family


class ModeMetrics:
    """A prometheus_client collector of the deployment's modes and the users sending
    (stacklens/modes.py)."""

    def __init__(self, engine: Engine, ingest: str, access: Access):
        self.engine, self.ingest, self.access = engine, ingest, access

    def collect(self) -> Iterator[Metric]:
        """Yield the modes (an info gauge of value 1) and the users sending, unless the
        database does not answer."""
        modes = GaugeMetricFamily(
            "stacklens_mode_info",
            "How senders are proven (ingest: proven, trusted; off: no collector in this "
            "server) and readers (auth: none, proxy, oidc)",
            labels=["ingest", "auth"],
        )
        modes.add_metric([self.ingest, self.access.mode], 1)
        yield modes
        count = senders(self.engine)
        if count is not None:
            yield GaugeMetricFamily(
                "stacklens_ingest_senders",
                "Distinct users the runs seen in the last 24 h name (in trusted mode claimed, "
                "not proven)",
                value=count,
            )


class GuardMetrics:
    """A prometheus_client collector of one server's connection guard."""

    def __init__(self, server: str, guard: ConnectionGuard) -> None:
        self.server, self.guard = server, guard

    def collect(self) -> Iterator[Metric]:
        """Yield the current values."""
        yield from connection_metrics(self.server, self.guard.open, self.guard.stats.dropped)


class IncidentMetrics:
    """A prometheus_client collector of the incident detector service and its webhook."""

    def __init__(self, service: IncidentService) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        """Yield the current values."""
        stats = self.service.stats
        yield CounterMetricFamily("stacklens_incident_ticks", "Detector passes", value=stats.ticks)
        yield CounterMetricFamily(
            "stacklens_incident_errors", "Detector passes that failed", value=stats.errors
        )
        yield CounterMetricFamily(
            "stacklens_incidents_opened", "Incidents opened", value=stats.opened
        )
        yield CounterMetricFamily(
            "stacklens_incidents_closed", "Incidents closed", value=stats.closed
        )
        yield CounterMetricFamily(
            "stacklens_incidents_silenced",
            "Incidents that ended smaller than STACKLENS_INCIDENT_MIN_S (never reported)",
            value=stats.silenced,
        )
        yield GaugeMetricFamily(
            "stacklens_incident_tick_seconds", "Duration of the last detector pass",
            value=stats.last_tick_s,
        )  # fmt: skip
        yield histogram(
            "stacklens_incident_pass_seconds", "Durations of the detector passes",
            stats.pass_timings,
        )  # fmt: skip
        hook = self.service.webhook
        if hook is None:
            return
        yield CounterMetricFamily(
            "stacklens_webhook_delivered", "Incident messages the webhook accepted",
            value=hook.stats.delivered,
        )  # fmt: skip
        yield CounterMetricFamily(
            "stacklens_webhook_failed_attempts", "Webhook POSTs that failed (each retry)",
            value=hook.stats.failed_attempts,
        )  # fmt: skip
        dropped = CounterMetricFamily(
            "stacklens_webhook_dropped", "Incident messages never delivered, by reason",
            labels=["reason"],
        )  # fmt: skip
        for reason, count in sorted(hook.stats.dropped.items()):
            dropped.add_metric([reason], count)
        yield dropped


def histogram(name: str, documentation: str, timings: Timings) -> HistogramMetricFamily:
    """A Prometheus histogram of `timings` (seconds)."""
    return HistogramMetricFamily(
        name, documentation, buckets=timings.cumulative(), sum_value=timings.total_s
    )


class FabricMetrics:
    """A prometheus_client collector of the fabric sampler (`stacklens up`'s discovery and
    counter sweeps): does it keep up, do the ports answer."""

    def __init__(self, sampler: FabricSampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[Metric]:
        """Yield the current values."""
        s = self.sampler
        yield histogram("stacklens_fabric_sweep_seconds",
                        "Durations of the counter sweeps (read, deltas; stored apart)",
                        s.sweep_timings)  # fmt: skip
        yield GaugeMetricFamily("stacklens_fabric_sweep_interval_seconds",
                                "The sweep period asked for (STACKLENS_FABRIC_INTERVAL_MS)",
                                value=s.interval_s)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_sweeps", "Counter sweeps done",
                                  value=s.sweeps)  # fmt: skip
        w = s.writer
        yield CounterMetricFamily("stacklens_fabric_sweeps_stored", "Sweeps' samples stored",
                                  value=w.stored)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_sweeps_merged",
                                  "Sweeps merged into the next waiting because more than "
                                  "STACKLENS_FABRIC_STORE_QUEUE waited (the store behind; "
                                  "the totals kept)",
                                  value=w.merged)  # fmt: skip
        yield GaugeMetricFamily("stacklens_fabric_store_queue",
                                "Sweeps waiting to be stored now", value=w.pending)  # fmt: skip
        yield GaugeMetricFamily("stacklens_fabric_store_queue_limit",
                                "Sweeps that may wait (STACKLENS_FABRIC_STORE_QUEUE)",
                                value=w.max_pending)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_store_errors",
                                  "Store operations (samples, topology) that failed",
                                  value=w.failed)  # fmt: skip
        yield histogram("stacklens_fabric_store_seconds",
                        "Durations of the sweeps' stores (in the writer's thread)",
                        w.store_timings)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_sweep_errors", "Sweeps that failed",
                                  value=s.errors)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_sweeps_behind",
                                  "Sampling steps (discovery, sweep, store) that took longer "
                                  "than the sweep period, so the next began late",
                                  value=s.behind)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_ports_answered",
                                  "Port counter reads answered, over all sweeps",
                                  value=s.ports_answered)  # fmt: skip
        yield CounterMetricFamily("stacklens_fabric_ports_failed",
                                  "Ports of the topology that did not answer a sweep, over "
                                  "all sweeps", value=s.ports_failed)  # fmt: skip
        yield GaugeMetricFamily("stacklens_fabric_stale_ports",
                                "Ports silent for STACKLENS_FABRIC_MISSED_SWEEPS sweeps or more "
                                "(their load reads unknown)", value=s.stale_ports)  # fmt: skip
        yield histogram(
            "stacklens_fabric_discovery_seconds",
            "Durations of the topology discoveries",
            s.discovery_timings,
        )
        yield CounterMetricFamily("stacklens_fabric_discoveries", "Topology discoveries",
                                  value=s.discoveries)  # fmt: skip


class RequestMetrics:
    """A prometheus_client collector of the web server's answer durations."""

    def __init__(self, timings: RequestTimings) -> None:
        self.timings = timings

    def collect(self) -> Iterator[Metric]:
        """Yield the answer durations by kind of request."""
        family = HistogramMetricFamily(
            "stacklens_http_request_seconds",
            "Durations of the web server's answers (API, dashboard callbacks, pages, assets)",
            labels=["kind"],
        )
        for kind, t in sorted(self.timings.items()):
            family.add_metric([kind], t.cumulative(), t.total_s)
        yield family


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text exposition (the collector's figures when this server has one)."""
    state = request.app.state
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ModeMetrics(state.engine, await ingest_mode(state.collector), state.access))
    registry.register(GuardMetrics("http", request.app.state.http_guard))
    registry.register(RequestMetrics(request.app.state.request_timings))
    for sampler in getattr(request.app.state, "fabric_samplers", ()):
        registry.register(FabricMetrics(sampler))
    if (link := request.app.state.collector) is not None:
        try:
            figures: CollectorFigures | None = await link.figures()
        except CollectorUnavailable:
            figures = None
        registry.register(CollectorMetrics(figures, link.restarts))
    if getattr(request.app.state, "incidents", None) is not None:
        registry.register(IncidentMetrics(request.app.state.incidents))
    # collected off the event loop: the users sending are a database query
    exposition = await run_in_threadpool(generate_latest, registry)
    return Response(exposition, media_type=CONTENT_TYPE_LATEST)


@router.get("/api/deployment", response_model=Deployment)
async def deployment_modes(request: Request) -> Deployment:
    """How this deployment proves who sends (ingest mode) and who reads (auth mode), how
    many users sent runs in the last 24 h, and a warning when trusted ingest has more than
    one (any of them can then write into another's job and claim any user)."""
    state = request.app.state
    ingest = await ingest_mode(state.collector)
    return await run_in_threadpool(deployment, state.engine, ingest, state.access)
