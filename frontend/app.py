# frontend/app.py — builds the Dash pages app (shell layout, refresh interval, API client wiring).
"""Entry point of the web UI: `create_dash_app(api_base_url)`.

The returned app's Flask server (`dash_app.server`) is a WSGI app meant to be mounted at "/"
of the stacklens FastAPI server, next to the API under /api:

    app.mount("/", WSGIMiddleware(create_dash_app("http://127.0.0.1:7450").server))
"""

from __future__ import annotations

import sys
from pathlib import Path

import dash
from dash import dcc, html

from frontend import api, components, ids

_HERE = Path(__file__).resolve().parent


def create_dash_app(
    api_base_url: str, refresh_ms: int = 1000, fabric_fold_above: int = 256
) -> dash.Dash:
    """A Dash pages app reading `api_base_url`/api, refreshing every `refresh_ms` milliseconds;
    the Fabric page aggregates fabrics of more than `fabric_fold_above` HCAs."""
    dash_app = dash.Dash(
        __name__,
        use_pages=True,
        pages_folder=str(_HERE / "pages"),
        assets_folder=str(_HERE / "assets"),
        requests_pathname_prefix="/",
        routes_pathname_prefix="/",
        title="stacklens",
        update_title=None,  # type: ignore[arg-type]  # no "Updating..." tab title flicker on every refresh tick
    )
    api.attach_client(dash_app.server, api.StacklensApi(api_base_url))
    dash_app.server.config.update(
        STACKLENS_REFRESH_MS=refresh_ms, STACKLENS_FABRIC_FOLD_ABOVE=fabric_fold_above
    )
    pages = list(dash.page_registry.values())
    for page in pages:
        sys.modules[page["module"]].register_callbacks(dash_app)
    dash_app.layout = html.Div(
        className="shell",
        children=[
            components.page_header(pages),
            html.Main(dash.page_container, className="content"),
            dcc.Interval(id=ids.REFRESH_INTERVAL, interval=refresh_ms),
        ],
    )
    return dash_app
