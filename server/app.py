"""Builds the stacklens web application: the API under /api, /metrics, OpenAPI at /docs,
and the Dash dashboard at /."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from sqlalchemy import Engine

import stacklens
from server.fabric.routes import router as fabric_router
from server.ingest.routes import router as ingest_router
from server.jobs.routes import overview_router
from server.jobs.routes import router as jobs_router
from server.metrics.routes import router as metrics_router

if TYPE_CHECKING:
    from collector.service import CollectorService


def create_app(
    engine: Engine,
    *,
    api_base_url: str,
    refresh_ms: int = 1000,
    collector: CollectorService | None = None,
    with_frontend: bool = True,
) -> FastAPI:
    """The FastAPI app over `engine`.

    `collector`, when given, runs for the app's lifetime in the same event loop; the HTTP
    ingest endpoint and /metrics then use it.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if collector is not None:
            await collector.start()
        try:
            yield
        finally:
            if collector is not None:
                await collector.stop()

    app = FastAPI(
        title="stacklens",
        version=stacklens.__version__,
        description="Cross-stack HPC communication profiler: query and ingest API.",
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.collector = collector
    app.include_router(jobs_router)
    app.include_router(overview_router)
    app.include_router(fabric_router)
    app.include_router(ingest_router)
    app.include_router(metrics_router)

    @app.get("/api/health", tags=["meta"])
    def health() -> dict[str, Any]:
        """Liveness probe."""
        return {"status": "ok", "version": stacklens.__version__}

    if with_frontend:
        from frontend.app import create_dash_app  # Dash is heavy; import only when served

        dash_app = create_dash_app(api_base_url, refresh_ms=refresh_ms)
        # a2wsgi types its ASGI callable more narrowly than Starlette declares a mount
        app.mount("/", WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]
    return app
