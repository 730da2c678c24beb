# stacklens_cli/site.py — the web site `stacklens up` serves: the API with the dashboard at /.
"""Puts the two web layers together, the one place that knows both: the server's API
(`server.app.create_app`) and the dashboard (`frontend.app.mount_dashboard`), which reads
that API over HTTP. The server never imports the frontend (tests/test_layers.py)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine

from frontend.app import mount_dashboard
from server.app import create_app
from server.incidents.detect import Thresholds


def create_site(
    engine: Engine,
    *,
    api_base_url: str,
    refresh_ms: int = 1000,
    fabric_fold_above: int = 256,
    congested_wait_per_s: float = Thresholds.xmit_wait_per_s,
    **api_options: Any,
) -> FastAPI:
    """The API over `engine` (`create_app` with `api_options`) and the dashboard at /,
    reading the API at `api_base_url` and refreshing every `refresh_ms` ms; its Fabric page
    folds fabrics of more than `fabric_fold_above` HCAs. The Fabric page and the reports
    mark a link congested from the same `congested_wait_per_s` PortXmitWait ticks per
    second."""
    app = create_app(engine, congested_wait_per_s=congested_wait_per_s, **api_options)
    mount_dashboard(
        app, api_base_url, refresh_ms=refresh_ms, fabric_fold_above=fabric_fold_above,
        congested_wait_per_s=congested_wait_per_s,
    )  # fmt: skip
    return app
