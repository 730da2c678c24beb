"""Builds the stacklens web application: the API under /api, OpenAPI at /docs, Dash at /."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from sqlalchemy import Engine

import stacklens
from server.jobs.routes import router as jobs_router


class Service(Protocol):
    """Something started and stopped with the web app (e.g. an in-process collector)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def create_app(
    engine: Engine,
    *,
    api_base_url: str,
    refresh_ms: int = 1000,
    services: list[Service] | None = None,
    with_frontend: bool = True,
) -> FastAPI:
    """The FastAPI app over `engine`; `services` run for the app's lifetime."""
    services = services or []

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for service in services:
            await service.start()
        try:
            yield
        finally:
            for service in reversed(services):
                await service.stop()

    app = FastAPI(
        title="stacklens",
        version=stacklens.__version__,
        description="Cross-stack HPC communication profiler: query API.",
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.include_router(jobs_router)

    @app.get("/api/health", tags=["meta"])
    def health() -> dict:
        """Liveness probe."""
        return {"status": "ok", "version": stacklens.__version__}

    if with_frontend:
        from frontend.app import create_dash_app  # Dash is heavy; import only when served

        dash_app = create_dash_app(api_base_url, refresh_ms=refresh_ms)
        app.mount("/", WSGIMiddleware(dash_app.server))
    return app
