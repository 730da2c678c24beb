# frontend/pages/jobs.py — the "/jobs" page: the job list (search, filters, pages) and the
# first job's cards (presentation/cards.py).
"""Jobs page: the jobs the server knows, a page at a time, searched (job id, user, command)
and filtered (status, user; start time in the header's time range, frontend/timerange.py)
by the server and sorted and filtered again in the browser's grid; and the first job of
the list: every job card (the card registry, presentation/cards.py, filled by
frontend/cards.py). A click on a job opens its own page, `/jobs/<job>?owner=<user>`
(frontend/pages/job.py).

The page degrades, never blanks: one refresh asks the job list and every card's data in
one request (GET /api/overview); a card whose data could not be read keeps its last view
and shows the error; the refresh tick pauses while a refresh runs (no answer is superseded
by the next tick) and its period backs off with the time a refresh takes and after errors;
the heading says "refreshing… N s behind" (in the browser, every second) when the last
whole refresh is older than that.
"""

from __future__ import annotations

import time
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, cards, components, ids, timerange
from frontend.api import ApiError, JobListQuery, digest
from frontend.refresh import next_period
from presentation.components import grid
from stacklens.api_models import JobList, Overview

dash.register_page(
    __name__, path="/jobs", name="Jobs", title="Jobs — stacklens", order=1
)  # the list where the job pages (/jobs/J) live

#: Jobs per page of the job list.
JOBS_PER_PAGE = 100
#: The statuses a job can have (the status filter's choices).
JOB_STATUSES = ("running", "finished", "failed", "killed", "aborted", "lost")


def layout(**query: str) -> html.Div:
    """Static skeleton for the URL's time range (the jobs started in it); the refresh
    callback fills it on load and on every interval tick."""
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.JOB_WINDOW, data=timerange.window_of(query).query()),
            # The page's own ticks (a shell interval could fire before the page is there):
            # the refresh, whose period the refresh callback sets, and the label's clock.
            dcc.Interval(id=ids.JOB_REFRESH, interval=1000, max_intervals=1),
            dcc.Interval(id=ids.CLOCK, interval=1000),
            dcc.Store(id=ids.RENDERED_DIGEST, data={}),
            dcc.Store(id=ids.LAST_GOOD),
            dcc.Store(id=ids.JOB_PAGES, data=[None]),
            dcc.Store(id=ids.JOB_NEXT_CURSOR),
            html.Div(id=ids.STATUS_MESSAGE, role="status"),
            html.Section(
                className="card",
                children=[
                    components.card_head("Jobs", ids.LAST_UPDATED),
                    _filters(),
                    html.Div(id=ids.JOBS_ERROR, className="card-error", role="alert"),
                    grid(ids.JOBS_GRID, components.JOB_COLUMNS, height_px=360),
                    html.Div(
                        className="pager",
                        children=[
                            components.pager_button("← Newer", ids.JOB_NEWER),
                            html.Span(id=ids.JOB_PAGE_INFO, className="subtle"),
                            components.pager_button("Older →", ids.JOB_OLDER),
                        ],
                    ),
                ],
            ),
            html.Div(
                id=ids.JOB_DETAILS,
                hidden=True,
                children=[html.H2(id=ids.SHOWN_JOB, className="shown-job"), *cards.sections(_PAGE)],
            ),
        ],
    )


def _filters() -> html.Div:
    """Search and filters of the job list (the server applies them to all jobs)."""
    return html.Div(
        className="filters",
        children=[
            dmc.TextInput(id=ids.JOB_SEARCH, placeholder="Search job id, user or command",
                          debounce=400, w=300, size="sm"),
            dmc.Select(id=ids.JOB_STATUS_FILTER, data=list(JOB_STATUSES),
                       placeholder="any status", clearable=True, w=160, size="sm"),
            dmc.TextInput(id=ids.JOB_USER_FILTER, placeholder="any user", debounce=400,
                          w=160, size="sm"),
            dmc.Text("started in the header's time range", size="sm", c="dimmed"),
        ],
    )  # fmt: skip


#: This page's name in the ids of its card stores (frontend/cards.py).
_PAGE = "jobs"

_OUTPUTS = {
    "jobs": Output(ids.JOBS_GRID, "rowData"),
    "page_info": Output(ids.JOB_PAGE_INFO, "children"),
    "newer": Output(ids.JOB_NEWER, "disabled"),
    "older": Output(ids.JOB_OLDER, "disabled"),
    "next_cursor": Output(ids.JOB_NEXT_CURSOR, "data"),
    "jobs_error": Output(ids.JOBS_ERROR, "children"),
    "status": Output(ids.STATUS_MESSAGE, "children"),
    "hidden": Output(ids.JOB_DETAILS, "hidden"),
    "title": Output(ids.SHOWN_JOB, "children"),
    **{f"card_{key}": out for key, out in cards.outputs(_PAGE).items()},
    "rendered": Output(ids.RENDERED_DIGEST, "data"),
    "last_good": Output(ids.LAST_GOOD, "data"),
    "period": Output(ids.JOB_REFRESH, "interval"),
    "rearm": Output(ids.JOB_REFRESH, "max_intervals"),
}


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    dash_app.callback(
        output=_OUTPUTS,
        inputs={
            "tick": Input(ids.JOB_REFRESH, "n_intervals"),
            "search": Input(ids.JOB_SEARCH, "value"),
            "status": Input(ids.JOB_STATUS_FILTER, "value"),
            "user": Input(ids.JOB_USER_FILTER, "value"),
            "window": Input(ids.JOB_WINDOW, "data"),
            "pages": Input(ids.JOB_PAGES, "data"),
        },
        state={
            "rendered": State(ids.RENDERED_DIGEST, "data"),
            "base_ms": State(ids.REFRESH_BASE_MS, "data"),
            "period_ms": State(ids.JOB_REFRESH, "interval"),
        },
    )(refresh)
    dash_app.callback(
        Output(ids.JOB_PAGES, "data"),
        Input(ids.JOB_NEWER, "n_clicks"),
        Input(ids.JOB_OLDER, "n_clicks"),
        Input(ids.JOB_SEARCH, "value"),
        Input(ids.JOB_STATUS_FILTER, "value"),
        Input(ids.JOB_USER_FILTER, "value"),
        State(ids.JOB_NEXT_CURSOR, "data"),
        State(ids.JOB_PAGES, "data"),
        prevent_initial_call=True,
    )(turn_page)
    dash_app.callback(
        Output(ids.URL, "pathname"),
        Input(ids.JOBS_GRID, "cellClicked"),
        prevent_initial_call=True,
    )(open_job)
    dash_app.clientside_callback(
        ClientsideFunction("stacklens", "behind"),
        Output(ids.LAST_UPDATED, "children"),
        Input(ids.CLOCK, "n_intervals"),
        # States, not inputs: an input that a running refresh will set would hold this
        # callback back until the refresh ends, and the label must count while it runs.
        State(ids.LAST_GOOD, "data"),
        State(ids.JOB_REFRESH, "interval"),
    )


def refresh(
    tick: int | None,
    search: str | None,
    status: str | None,
    user: str | None,
    window: dict[str, str] | None,
    pages: list[str | None],
    rendered: dict[str, str] | None,
    base_ms: int,
    period_ms: int,
) -> dict[str, Any]:
    """Fetch the page of the job list and the shown job's cards, concurrently, and render
    what changed (per card digests in `rendered`); a failed request leaves its card's last
    view and shows why in the card. Sets the next refresh period (`refresh.next_period`:
    longer while refreshes are slow or fail) and arms the next tick."""
    began = time.monotonic()
    client = api.current_client()
    out: dict[str, Any] = dict.fromkeys(_OUTPUTS, no_update)
    try:
        started_from, started_to = timerange.window_of(window or {}).ns_bounds()
    except ValueError as exc:
        return {**out, "jobs_error": f"The time range is not readable: {exc}", "jobs": [],
                "hidden": True, "rearm": (tick or 0) + 1}  # fmt: skip
    query = JobListQuery(
        q=search or None,
        status=status or None,
        user=user or None,
        started_from=started_from,
        started_to=started_to,
        limit=JOBS_PER_PAGE,
        cursor=pages[-1] if pages else None,
    )
    drawn = dict(rendered or {})
    try:
        overview = client.overview(None, listing=query)
    except ApiError as exc:
        out["jobs_error"] = str(exc)
        out.update({f"card_{key}": data for key, data in cards.fail(str(exc)).items()})
        errors = 1
    else:
        errors = _fill_jobs(out, drawn, overview.jobs, len(pages))
        errors += _fill_cards(out, drawn, overview)
    out["rendered"] = drawn
    took_ms = (time.monotonic() - began) * 1000
    out["period"] = next_period(base_ms, period_ms, took_ms, bool(errors))
    # The next tick is armed only now, one period after this refresh ended: a slow answer
    # is shown, never superseded (and nothing is left to undo if the page is left meanwhile).
    out["rearm"] = (tick or 0) + 1
    if not errors:
        out["last_good"] = {"at": time.time() * 1000}
    return out


def _fill_jobs(out: dict[str, Any], drawn: dict[str, str], jobs: JobList, page: int) -> int:
    """The jobs card's outputs from the page of the list (`page`: its number, 1 = newest);
    returns the number of failures (none: the list came)."""
    out["jobs_error"] = None
    out["status"] = None if jobs.page.total else components.no_jobs_notice()
    out["newer"] = page <= 1
    out["older"] = jobs.page.next_cursor is None
    out["next_cursor"] = jobs.page.next_cursor
    out["page_info"] = components.job_page_info(jobs, (page - 1) * JOBS_PER_PAGE + 1)
    if drawn.get("jobs") != (d := digest(jobs)):
        drawn["jobs"] = d
        out["jobs"] = components.job_rows(jobs)
    return 0


def _fill_cards(out: dict[str, Any], drawn: dict[str, str], overview: Overview) -> int:
    """The shown job's heading and its cards' data (the first job of the list; the cards
    hidden while there is none); returns the number of sections that could not be read."""
    first = overview.jobs.jobs[:1]
    shown = overview.shown
    if not first or shown is None:
        out["hidden"] = True
        return 0
    owner = first[0].user or None
    view = {"job": shown.job, "owner": owner}
    out["title"] = components.shown_title(shown, owner)
    out.update({f"card_{k}": v for k, v in cards.publish(shown, view, drawn).items()})
    out["hidden"] = False
    return len(shown.errors)


def turn_page(
    _newer: int | None,
    _older: int | None,
    *_filters_and_older: Any,
) -> list[str | None]:
    """The job list's page cursors: one more (the next, older page), one less (back to the
    newer page), or the first page again when the search or a filter changed."""
    *_filters, next_cursor, pages = _filters_and_older
    if ctx.triggered_id == ids.JOB_OLDER:
        if next_cursor is None:
            raise PreventUpdate
        return [*pages, next_cursor]
    if ctx.triggered_id == ids.JOB_NEWER:
        return pages[:-1] or [None]
    return [None]


def open_job(clicked: dict[str, Any] | None) -> str:
    """The URL of the job whose row was clicked (the row's id: components.job_rows)."""
    if not clicked or clicked.get("rowId") is None:
        raise PreventUpdate
    return str(clicked["rowId"])
