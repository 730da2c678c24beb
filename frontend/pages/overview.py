# frontend/pages/overview.py — the "/" page: the admin's overview (fabric health, running
# jobs and their share of the fabric, open incidents, the sampler's and collector's health).
"""Overview: where an admin starts. Four cards, each line a link into its detail page:

- Fabric health (GET /api/fabric/state, /api/fabric/links by load and by errors): links up
  and down, links with errors, the hottest links (each opens the Fabric page on it).
- Running jobs (GET /api/jobs?status=running, /api/jobs/<job>/links over the window): per
  job its share of the traffic on the fabric links it crosses (its attributed bytes over
  those links' measured bytes), each opening the job's page.
- Open incidents (GET /api/incidents?open=true), each opening its page.
- Health of the fabric sampler (the last sweep's age and interval, stale or not) and of the
  collector (the newest frame stored, the users sending: GET /api/deployment).

The window is the header's (frontend/timerange.py; default: live 5 min). Refreshes every
few seconds; a card whose data could not be read says why in place of its content.
"""

from __future__ import annotations

from typing import Any

import dash
from dash import Input, Output, dcc, html

from frontend import api, components, ids, timerange
from frontend.api import ApiError, IncidentQuery, JobListQuery, WindowQuery

dash.register_page(__name__, path="/", name="Overview", title="Overview — stacklens", order=0)

#: The page's refresh period (ms).
REFRESH_MS = 5000
#: Rows of each list on the page.
ROWS = 5
#: Running jobs whose fabric share is computed (one request each).
JOBS_SHOWN = 8


def layout(**query: str) -> html.Div:
    """The four cards for the URL's time range; `refresh` fills them."""
    window = timerange.window_of(query, default_live=timerange.LIVE_DEFAULT["/"])
    return html.Div(
        className="page overview",
        children=[
            dcc.Store(id=ids.OV_WINDOW, data=window.query()),
            dcc.Interval(id=ids.OV_TICK, interval=REFRESH_MS),
            html.Div(
                className="overview-grid",
                children=[
                    html.Section(id=ids.OV_FABRIC, className="card"),
                    html.Section(id=ids.OV_JOBS, className="card"),
                    html.Section(id=ids.OV_INCIDENTS, className="card"),
                    html.Section(id=ids.OV_HEALTH, className="card"),
                ],
            ),
        ],
    )


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callback to `dash_app`."""
    dash_app.callback(
        Output(ids.OV_FABRIC, "children"),
        Output(ids.OV_JOBS, "children"),
        Output(ids.OV_INCIDENTS, "children"),
        Output(ids.OV_HEALTH, "children"),
        Input(ids.OV_TICK, "n_intervals"),
        Input(ids.OV_WINDOW, "data"),
    )(refresh)


def refresh(_tick: int | None, window: dict[str, str] | None) -> tuple[Any, ...]:
    """Every card from the API over the window; a card whose data failed shows why."""
    client = api.current_client()
    chosen = timerange.window_of(window or {}, default_live="5m")
    query = WindowQuery(None, *chosen.bounds())
    fabric_window = None if chosen.live is not None else query  # live: the newest sweep
    cards = {
        "Fabric health": lambda: _fabric(client, fabric_window, chosen),
        "Running jobs": lambda: _jobs(client, query, chosen),
        "Open incidents": lambda: components.overview_incidents(
            client.incidents(IncidentQuery(open=True, limit=ROWS))),
        "Sampler and collector": lambda: _health(client),
    }  # fmt: skip
    out: list[Any] = []
    for title, fill in cards.items():
        try:
            body = fill()
        except ApiError as exc:
            body = [components.error_state(exc)]
        out.append([html.H2(title), *body])
    return tuple(out)


def _fabric(client: api.StacklensApi, window: WindowQuery | None,
            chosen: timerange.Window) -> list[Any]:  # fmt: skip
    """Links up and down, with errors, the hottest ones (live: the newest sweep)."""
    state = client.fabric_state(window)
    hottest = client.fabric_links("utilisation", ROWS, window)
    erring = client.fabric_links("errors", ROWS, window)
    return components.overview_fabric(state, hottest, erring, chosen.query())


def _jobs(client: api.StacklensApi, window: WindowQuery, chosen: timerange.Window) -> list[Any]:
    """The running jobs (newest first) with their share of the links they cross."""
    listed = client.jobs(JobListQuery(status="running", limit=JOBS_SHOWN))
    shares: list[float | None] = []
    for job in listed.jobs:
        try:
            links = client.job_links(job.job, window, limit=1000, owner=job.user or None)
        except ApiError:
            shares.append(None)
            continue
        shares.append(components.fabric_share(links))
    return components.overview_jobs(listed, shares, chosen.query())


def _health(client: api.StacklensApi) -> list[Any]:
    """The sampler's freshness, the newest frame stored, the users sending."""
    freshness = client.fabric_state(None).freshness
    running = client.jobs(JobListQuery(status="running", limit=JOBS_SHOWN))
    newest = client.jobs(JobListQuery(limit=1))
    seen = [j.last_seen_ns for j in (*running.jobs, *newest.jobs)]
    return components.overview_health(freshness, max(seen) if seen else None,
                                      client.deployment())  # fmt: skip
