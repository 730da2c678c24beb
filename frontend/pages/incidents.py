# frontend/pages/incidents.py — the "/incidents" page: incidents found by the detectors,
# filtered; a click opens one's own page (pages/incident.py).
"""Incidents page: the incidents the server's detectors found (GET /api/incidents), newest
first, filtered on the server by state (open / ended), severity, kind, one of your jobs
(with its owner: the owner box lists the users whose jobs have that id, and an id of
several owners' jobs asks you to choose one there), a fabric link and the header's time
range (frontend/timerange.py), then sorted and filtered
again in the grid; a click on a row opens that incident's own page (`/incidents/<id>`,
pages/incident.py). An incident's id is its reference, not a count (the grid's "Id"; the
caption counts). Refreshes every few seconds."""

from __future__ import annotations

import time
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from frontend import api, components, ids, timerange
from frontend.api import ApiError, IncidentQuery, JobListQuery
from presentation.components import grid
from presentation.formatting import format_utc_ns

dash.register_page(__name__, path="/incidents", name="Incidents", title="Incidents — stacklens")

#: Incidents per page of the list.
INCIDENTS_PER_PAGE = 200
SEVERITIES = ("critical", "major", "minor")
KINDS = (
    "congestion",
    "link_errors",
    "link_flap",
    "imbalance",
    "mpi_slowdown",
    "io_stall",
    "regression",
)
#: The page's refresh period (ms).
REFRESH_MS = 3000
#: Jobs matching the typed id read to fill the owner box.
OWNERS_LISTED = 100


def several_owners(job: str) -> str:
    """What the list says when the typed id names jobs of several owners."""
    return f"Job {job} is the id of jobs of several owners: choose one in the owner box."


def layout(**query: str) -> html.Div:
    """Static skeleton for the URL's time range; the callbacks fill it."""
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.INC_WINDOW, data=timerange.window_of(query).query()),
            dcc.Interval(id=ids.INC_TICK, interval=REFRESH_MS),
            html.Section(className="card", children=[
                components.card_head("Incidents", ids.INC_UPDATED),
                html.Div(className="filters", children=[
                    dmc.SegmentedControl(id=ids.INC_STATE, value="all", size="sm",
                                         data=[{"label": "open and ended", "value": "all"},
                                               {"label": "open", "value": "open"},
                                               {"label": "ended", "value": "ended"}]),
                    dmc.Select(id=ids.INC_SEVERITY, placeholder="any severity",
                               data=list(SEVERITIES), clearable=True, w=150, size="sm"),
                    dmc.Select(id=ids.INC_KIND, placeholder="any kind", data=list(KINDS),
                               clearable=True, w=170, size="sm"),
                    dmc.TextInput(id=ids.INC_JOB, placeholder="job id", debounce=400, w=160,
                                  size="sm"),
                    dmc.Select(id=ids.INC_OWNER, placeholder="owner", data=[], clearable=True,
                               searchable=True, w=170, size="sm"),
                    dmc.NumberInput(id=ids.INC_LINK, placeholder="link id", min=1,
                                    debounce=400, w=120, size="sm"),
                    dmc.Text("in the header's time range", size="sm", c="dimmed"),
                ]),
                html.Div(id=ids.INC_ERROR, className="card-error", role="alert"),
                html.Div(id=ids.INC_CAPTION, className="subtle"),
                grid(ids.INC_GRID, components.INCIDENT_COLUMNS, height_px=320),
            ]),
        ],
    )  # fmt: skip


def query_of(state: str, severity: str | None, kind: str | None, job: str | None,
             link: float | str | None, window: dict[str, str] | None,
             owner: str | None = None) -> IncidentQuery:  # fmt: skip
    """The list's query from the filters and the time range (the API reads its bounds and
    says which one it cannot; the owner only with a job)."""
    start, end = timerange.window_of(window or {}).bounds()
    job = (job or "").strip() or None
    return IncidentQuery(
        start=start,
        end=end,
        severity=severity or None, kind=kind or None, job=job,
        owner=(owner or None) if job else None, link=int(link) if link else None,
        open={"open": True, "ended": False}.get(state), limit=INCIDENTS_PER_PAGE,
    )  # fmt: skip


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app`."""

    @dash_app.callback(
        Output(ids.INC_GRID, "rowData"),
        Output(ids.INC_CAPTION, "children"),
        Output(ids.INC_ERROR, "children"),
        Output(ids.INC_UPDATED, "children"),
        Input(ids.INC_TICK, "n_intervals"),
        Input(ids.INC_STATE, "value"),
        Input(ids.INC_SEVERITY, "value"),
        Input(ids.INC_KIND, "value"),
        Input(ids.INC_JOB, "value"),
        Input(ids.INC_LINK, "value"),
        Input(ids.INC_WINDOW, "data"),
        Input(ids.INC_OWNER, "value"),
    )
    def refresh(_tick: int | None, state: str, severity: str | None, kind: str | None,
                job: str | None, link: float | str | None, window: dict[str, str] | None,
                owner: str | None) -> tuple[Any, ...]:  # fmt: skip
        query = query_of(state, severity, kind, job, link, window, owner)
        try:
            listed = api.current_client().incidents(query)
        except ApiError as exc:
            if exc.status == 409 and query.owner is None:  # an id of several owners' jobs
                return [], "", several_owners(query.job or ""), dash.no_update
            return [], "", components.error_state(exc), dash.no_update
        shown, total = len(listed.incidents), listed.page.total
        caption = (f"{total} incident{'s' if total != 1 else ''}" if shown == total
                   else f"the newest {shown} of {total} incidents")  # fmt: skip
        updated = "updated " + format_utc_ns(time.time_ns())
        return components.incident_rows(listed), caption, "", updated

    @dash_app.callback(
        Output(ids.INC_OWNER, "data"),
        Output(ids.INC_OWNER, "value"),
        Input(ids.INC_JOB, "value"),
        State(ids.INC_OWNER, "value"),
    )
    def owners(job: str | None, chosen: str | None) -> tuple[list[str], str | None]:
        """The owner box's choices: the users whose jobs you may read have the typed id
        (the job list's search, exact ids only); the choice kept if it is one of them."""
        job = (job or "").strip()
        if not job:
            return [], None
        try:
            found = api.current_client().jobs(JobListQuery(q=job, limit=OWNERS_LISTED))
        except ApiError:
            return [], chosen
        users = sorted({j.user for j in found.jobs if j.job == job})
        return users, chosen if chosen in users else None

    @dash_app.callback(
        Output(ids.URL, "pathname", allow_duplicate=True),
        Input(ids.INC_GRID, "cellClicked"),
        prevent_initial_call=True,
    )
    def open_incident(clicked: dict[str, Any] | None) -> str:
        """The page of the incident whose row was clicked (row id = incident id)."""
        if not clicked or clicked.get("rowId") is None:
            raise PreventUpdate
        return components.incident_path(int(clicked["rowId"]))
