"""Builds the stacklens web API: /api, /metrics, OpenAPI at /docs (Swagger UI served from
the installed swagger-ui-bundle package: it works offline), every request through the
access gate (server/access/: Host check, viewer, owner filter). The dashboard is not the
server's: the command line mounts it at / beside the API (stacklens_cli/site.py). Serve
it with server.http_guard.uvicorn_config (connection limits and timeouts)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import swagger_ui_bundle  # type: ignore[import-untyped]
from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.middleware.sessions import SessionMiddleware

import stacklens
from server.access.gate import AccessGate
from server.access.oidc import oidc_router
from server.access.viewer import Access
from server.callsites.routes import router as callsites_router
from server.compare.routes import router as compare_router
from server.compression import Compression
from server.errors import install_error_handlers
from server.fabric.routes import router as fabric_router
from server.fabric.snapshot import FabricSnapshots
from server.families.routes import router as families_router
from server.incidents.detect import Thresholds
from server.incidents.routes import router as incidents_router
from server.ingest.gate import IngestGate
from server.ingest.routes import document_batch
from server.ingest.routes import router as ingest_router
from server.jobs.routes import overview_router
from server.jobs.routes import router as jobs_router
from server.metrics.requests import RequestTimings, TimedRequests
from server.metrics.routes import router as metrics_router
from server.query_params import refuse_unknown_parameters
from server.reports.routes import router as reports_router
from server.shared import SharedAnswers
from server.traffic.repository import TrafficConfig
from server.traffic.routes import router as traffic_router
from server.traffic.service import AttributionCache
from stacklens.connguard import ConnectionGuard, ConnectionLimits

#: Answers about jobs kept for every viewer (server/jobs/routes.py: pages of the job
#: list's rows, a job's ranks, pairs, files).
JOB_ANSWERS = 128
#: Where the Swagger UI files of the installed package are served.
DOCS_ASSETS = "/docs-assets"

if TYPE_CHECKING:
    from collector.control import CollectorLink
    from server.incidents.service import IncidentService


def create_app(
    engine: Engine,
    *,
    fabric_recheck_s: float = 0.25,
    collector: CollectorLink | None = None,
    connection_limits: ConnectionLimits | None = None,
    max_body_bytes: int = 32 << 20,
    access: Access | None = None,
    traffic: TrafficConfig | None = None,
    incidents: IncidentService | None = None,
    congested_wait_per_s: float = Thresholds.xmit_wait_per_s,
) -> FastAPI:
    """The FastAPI app over `engine`.

    `collector`, when given, is the control channel of a collector that runs apart (its
    own process under `stacklens up`: stacklens_cli/collector_process.py): the HTTP
    ingest hands it its batches and /metrics shows its figures. `connection_limits` bound
    the connections of the server that serves the app (`app.state.http_guard`, used by
    http_guard); request bodies are capped at `max_body_bytes`. The fabric view's shared
    answers look for a new sweep every `fabric_recheck_s` (computed then, while viewers
    are about). `access` says who may read what (default: auth_mode=none, answering to
    loopback names only). `traffic`: how the fabric forwards and where the storage servers
    are, for link attribution (default: fixed paths, no storage servers). `incidents`,
    when given, detects for the app's lifetime. The reports' topology marks a link
    congested from `congested_wait_per_s` PortXmitWait ticks per second (the incident
    detector's threshold, STACKLENS_INCIDENT_XMIT_WAIT_PER_S).
    """
    access = access or Access()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if incidents is not None:
            await incidents.start()
        # the fabric view's answers computed as sweeps land, not on a viewer's request
        watcher = asyncio.create_task(app.state.fabric_snapshots.watch(engine))
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if incidents is not None:
                await incidents.stop()

    app = FastAPI(
        title="stacklens",
        version=stacklens.__version__,
        description="Cross-stack HPC communication profiler: query and ingest API.",
        lifespan=lifespan,
        dependencies=[Depends(refuse_unknown_parameters)],  # on every route
        docs_url=None,  # served below from the installed package, not from a CDN
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.collector = collector
    app.state.incidents = incidents
    # the fabric view, shared by every viewer
    app.state.fabric_snapshots = FabricSnapshots(recheck_s=fabric_recheck_s)
    app.state.http_guard = ConnectionGuard("http", connection_limits or ConnectionLimits())
    app.state.access = access
    app.state.traffic = traffic or TrafficConfig()
    app.state.congested_wait_per_s = congested_wait_per_s
    app.state.attributions = AttributionCache()
    # the job list's rows (by page) and a job's sections, shared by every viewer while
    # their jobs are unchanged
    app.state.job_answers = SharedAnswers(size=JOB_ANSWERS)
    app.add_middleware(IngestGate, max_body_bytes=max_body_bytes)
    app.add_middleware(AccessGate, access=access, engine=engine)
    if access.mode == "oidc":  # outside the gate: it reads the session the login keeps
        app.add_middleware(SessionMiddleware, secret_key=access.secret,
                           session_cookie="stacklens_session", max_age=access.session_s,
                           same_site="lax")  # fmt: skip
        app.include_router(oidc_router(access))
    # outside the gates: every answer of 1 KiB or more (JSON, CSV, the dashboard's assets)
    # goes out br- or gzip-compressed, as the client's Accept-Encoding asks; the report
    # progress stream is left as lines so the browser sees each step when it happens
    app.add_middleware(Compression)
    # around all of it: how long each answer takes, by kind (/metrics)
    app.state.request_timings = RequestTimings()
    app.add_middleware(TimedRequests, timings=app.state.request_timings)
    app.include_router(families_router)  # before the jobs' /{job:path}/... routes
    app.include_router(callsites_router)  # so is this one
    app.include_router(jobs_router)
    app.include_router(overview_router)
    app.include_router(fabric_router)
    app.include_router(traffic_router)
    app.include_router(incidents_router)
    app.include_router(compare_router)
    app.include_router(ingest_router)
    app.include_router(metrics_router)
    app.include_router(reports_router)
    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), "docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        """Swagger UI over /openapi.json, every file from this server."""
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )

    @app.get("/api/health", tags=["meta"])
    def health() -> dict[str, Any]:
        """Liveness probe."""
        return {"status": "ok", "version": stacklens.__version__}

    document_batch(app)
    install_error_handlers(app)  # its /api/ catch-all after every API route
    return app
