# frontend/app.py — builds the Dash pages app (shell layout, refresh interval, API client wiring).
"""Entry point of the web UI: `create_dash_app(api_base_url)`, and `mount_dashboard`, which
serves it at "/" of an ASGI app beside the API under /api (the command line's
`stacklens_cli.site.create_site` puts the two together; the server does not know the
dashboard):

    mount_dashboard(create_app(engine), "http://127.0.0.1:7450")
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import dash
import dash_mantine_components as dmc
from a2wsgi import WSGIMiddleware
from dash import Input, Output, State, dcc, html
from starlette.applications import Starlette

from frontend import api, cards, components, ids, timerange

_HERE = Path(__file__).resolve().parent


def create_dash_app(
    api_base_url: str,
    refresh_ms: int = 1000,
    fabric_fold_above: int = 256,
    congested_wait_per_s: float = 1_000_000.0,
) -> dash.Dash:
    """A Dash pages app reading `api_base_url`/api, refreshing every `refresh_ms` milliseconds
    (the Jobs page more seldom while its refreshes are slow or fail); the Fabric page
    aggregates fabrics of more than `fabric_fold_above` HCAs and marks a link congested
    from `congested_wait_per_s` PortXmitWait ticks per second."""
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
        STACKLENS_REFRESH_MS=refresh_ms, STACKLENS_FABRIC_FOLD_ABOVE=fabric_fold_above,
        STACKLENS_CONGESTED_WAIT_PER_S=congested_wait_per_s,
    )  # fmt: skip
    pages = list(dash.page_registry.values())
    for page in pages:
        sys.modules[page["module"]].register_callbacks(dash_app)
    cards.register_callbacks(dash_app)  # the job cards of the Jobs page and the job page
    timerange.register_callbacks(dash_app)
    shell = html.Div(
        className="shell",
        children=[
            components.page_header(pages, timerange.control()),
            dcc.Store(id=ids.TR_CONFIG, data=timerange.config()),
            html.Div(id=ids.INCIDENT_BANNER, className="incident-banner-slot"),
            html.Main(dash.page_container, className="content"),
            dcc.Location(id=ids.URL, refresh="callback-nav"),
            dcc.Store(id=ids.REFRESH_BASE_MS, data=refresh_ms),
            dcc.Interval(id=ids.REFRESH_INTERVAL, interval=refresh_ms),
            dcc.Interval(id=ids.INCIDENT_BANNER_TICK, interval=max(refresh_ms, BANNER_MS)),
            dcc.Store(id=ids.INCIDENT_BANNER_SHOWN),
            html.Footer(id=ids.MODE_FOOTER, className="mode-footer"),
            dcc.Interval(id=ids.MODE_TICK, interval=MODE_MS),
        ],
    )
    dash_app.layout = dmc.MantineProvider(shell, theme={"fontFamily": components.FONT})
    _register_banner(dash_app)
    _register_footer(dash_app)
    return dash_app


def mount_dashboard(
    app: Starlette,
    api_base_url: str,
    *,
    refresh_ms: int = 1000,
    fabric_fold_above: int = 256,
    congested_wait_per_s: float = 1_000_000.0,
) -> dash.Dash:
    """Serves the dashboard (`create_dash_app` with these arguments) at "/" of `app`, after
    every route `app` has (mount it last: the API's routes and its /api/ catch-all go
    first); answers the Dash app."""
    dash_app = create_dash_app(
        api_base_url, refresh_ms=refresh_ms, fabric_fold_above=fabric_fold_above,
        congested_wait_per_s=congested_wait_per_s,
    )  # fmt: skip
    # a2wsgi types its ASGI callable more narrowly than Starlette declares a mount
    app.mount("/", WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]
    return dash_app


#: The footer's refresh period (ms): modes change only with a restart, the users sending
#: slowly.
MODE_MS = 60_000


def _register_footer(dash_app: dash.Dash) -> None:
    """The footer of every page: the deployment's modes (GET /api/deployment), filled on
    load and every MODE_MS; an unreachable server leaves it as it was."""

    @dash_app.callback(Output(ids.MODE_FOOTER, "children"), Input(ids.MODE_TICK, "n_intervals"))
    def footer(_tick: int | None) -> Any:
        try:
            return components.mode_footer(api.current_client().deployment())
        except api.ApiError:
            return dash.no_update


#: The incident banner's refresh period at least (ms).
BANNER_MS = 2000


def _register_banner(dash_app: dash.Dash) -> None:
    """The banner of every page: the open incidents (GET /api/incidents?open=true), empty
    when none; an unreachable server leaves it as it was."""

    @dash_app.callback(
        Output(ids.INCIDENT_BANNER, "children"),
        Output(ids.INCIDENT_BANNER_SHOWN, "data"),
        Input(ids.INCIDENT_BANNER_TICK, "n_intervals"),
        State(ids.INCIDENT_BANNER_SHOWN, "data"),
    )
    def banner(_tick: int | None, shown: str | None) -> Any:
        try:
            listed = api.current_client().incidents(api.IncidentQuery(open=True, limit=1))
        except api.ApiError:
            return dash.no_update, dash.no_update
        children = components.incident_banner(listed)
        drawn = api.digest([(i.id, i.severity, i.summary) for i in listed.incidents]
                           + [listed.page.total])  # fmt: skip
        if drawn == shown:  # unchanged: not redrawn (a click on its link would miss)
            return dash.no_update, dash.no_update
        return children, drawn
