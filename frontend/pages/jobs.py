# frontend/pages/jobs.py — the "/" page: live jobs table; the selected job's rank x rank matrix,
# MPI operations, collectives, message sizes, one-sided traffic, file-system I/O and ranks.
"""Jobs page: every job the server knows, and for one of them its point-to-point traffic,
its MPI operations (calls, bytes, time per op and per traffic category), its collectives per
communicator, its message-size histogram, its one-sided (RMA) traffic, its file I/O and its
ranks (hosts, status, counts folded or lost).

The shown job is the one the user clicked (kept in a session store across refreshes), or the
newest job while the user has not chosen one or the chosen one is gone.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dash
from dash import ALL, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, components, figures, ids
from frontend.api import ApiError, digest

dash.register_page(__name__, path="/", name="Jobs", title="Jobs — stacklens")

# Outputs of `refresh` left as they are.
_UNCHANGED = dict.fromkeys(
    (
        "jobs",
        "status",
        "updated",
        "hidden",
        "title",
        "heatmap",
        "matrix",
        "ops_summary",
        "ops",
        "io",
        "comms",
        "coll",
        "sizes_graph",
        "sizes",
        "rma",
        "ranks_summary",
        "ranks",
        "rendered",
    ),
    no_update,
)


def layout(**_query: str) -> html.Div:
    """Static skeleton; the refresh callback fills it on load and on every interval tick."""
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.SELECTED_JOB, storage_type="session"),
            dcc.Store(id=ids.RENDERED_DIGEST),
            html.Div(id=ids.STATUS_MESSAGE, role="status"),
            html.Section(
                className="card",
                children=[
                    components.card_head("Jobs", ids.LAST_UPDATED),
                    html.P(
                        "Click a job to show its rank × rank traffic, MPI operations, "
                        "collectives, message sizes, one-sided traffic, file I/O and ranks.",
                        className="hint",
                    ),
                    html.Div(html.Table(id=ids.JOBS_TABLE, className="data"), className="scroll"),
                ],
            ),
            html.Div(
                id=ids.JOB_DETAILS,
                hidden=True,
                children=[
                    html.Section(
                        id=ids.MATRIX_SECTION,
                        className="card",
                        children=[
                            html.H2(id=ids.MATRIX_TITLE),
                            html.Div(
                                className="matrix-grid",
                                children=[
                                    dcc.Graph(
                                        id=ids.MATRIX_HEATMAP,
                                        style={"height": "520px"},
                                        config={"displaylogo": False},
                                    ),
                                    dcc.Markdown(
                                        id=ids.MATRIX_TABLE,
                                        className="scroll matrix-table-wrap md-table",
                                    ),
                                ],
                            ),
                        ],
                    ),
                    components.card(
                        "MPI operations",
                        html.P(id=ids.OPS_SUMMARY, className="summary"),
                        components.markdown_table(ids.OPS_TABLE),
                        section_id=ids.OPS_SECTION,
                    ),
                    components.card(
                        "Collectives",
                        dcc.Markdown(id=ids.COMM_TABLE, className="scroll md-table"),
                        components.markdown_table(ids.COLL_TABLE),
                        section_id=ids.COLL_SECTION,
                    ),
                    components.card(
                        "Message sizes",
                        dcc.Graph(
                            id=ids.SIZES_GRAPH,
                            style={"height": "360px"},
                            config={"displaylogo": False},
                        ),
                        components.markdown_table(ids.SIZES_TABLE),
                        section_id=ids.SIZES_SECTION,
                    ),
                    components.card(
                        "One-sided (RMA)",
                        components.markdown_table(ids.RMA_TABLE),
                        section_id=ids.RMA_SECTION,
                    ),
                    components.card(
                        "File-system I/O",
                        components.markdown_table(ids.IO_TABLE, "files-table"),
                        section_id=ids.IO_SECTION,
                    ),
                    components.card(
                        "Ranks",
                        html.P(id=ids.RANKS_SUMMARY, className="summary"),
                        components.markdown_table(ids.RANKS_TABLE, "ranks-table"),
                        section_id=ids.RANKS_SECTION,
                    ),
                ],
            ),
        ],
    )


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    dash_app.callback(
        output={
            "jobs": Output(ids.JOBS_TABLE, "children"),
            "status": Output(ids.STATUS_MESSAGE, "children"),
            "updated": Output(ids.LAST_UPDATED, "children"),
            "hidden": Output(ids.JOB_DETAILS, "hidden"),
            "title": Output(ids.MATRIX_TITLE, "children"),
            "heatmap": Output(ids.MATRIX_HEATMAP, "figure"),
            "matrix": Output(ids.MATRIX_TABLE, "children"),
            "ops_summary": Output(ids.OPS_SUMMARY, "children"),
            "ops": Output(ids.OPS_TABLE, "children"),
            "io": Output(ids.IO_TABLE, "children"),
            "comms": Output(ids.COMM_TABLE, "children"),
            "coll": Output(ids.COLL_TABLE, "children"),
            "sizes_graph": Output(ids.SIZES_GRAPH, "figure"),
            "sizes": Output(ids.SIZES_TABLE, "children"),
            "rma": Output(ids.RMA_TABLE, "children"),
            "ranks_summary": Output(ids.RANKS_SUMMARY, "children"),
            "ranks": Output(ids.RANKS_TABLE, "children"),
            "rendered": Output(ids.RENDERED_DIGEST, "data"),
        },
        inputs={
            "_tick": Input(ids.REFRESH_INTERVAL, "n_intervals"),
            "selected": Input(ids.SELECTED_JOB, "data"),
        },
        state={"rendered": State(ids.RENDERED_DIGEST, "data")},
    )(refresh)
    dash_app.callback(
        Output(ids.SELECTED_JOB, "data"),
        Input({"type": ids.JOB_ROW, "job": ALL}, "n_clicks"),
        prevent_initial_call=True,
    )(select_job)


def refresh(_tick: int | None, selected: str | None, rendered: str | None) -> dict:
    """Fetch, in one request, the newest jobs and the shown job's matrix, MPI operations,
    collectives, message sizes, RMA traffic, file I/O and ranks, and render them, unless they
    are what the page already shows (`rendered` digest); on API failure keep the last data
    and say why."""
    try:
        query = api.JobListQuery(limit=components.MAX_JOB_ROWS)
        page = api.current_client().overview(selected, query)
    except ApiError as exc:
        return {**_UNCHANGED, "status": components.notice(str(exc), "error")}
    shown = page.shown
    job = next((j for j in page.jobs.jobs if shown is not None and j.job == shown.job), None)
    always = {
        "status": None if page.jobs.jobs else components.no_jobs_notice(),
        "updated": f"updated {datetime.now(UTC):%H:%M:%S} UTC",
    }
    drawn = digest(page)
    if drawn == rendered:
        return {**_UNCHANGED, **always}
    if job is None or shown is None:
        return {
            **_UNCHANGED,
            **always,
            "jobs": components.jobs_table(page.jobs, None),
            "hidden": True,
            "rendered": drawn,
        }
    return {
        **always,
        "jobs": components.jobs_table(page.jobs, job.job),
        "hidden": False,
        "title": components.matrix_title(job, shown.matrix),
        "heatmap": figures.matrix_heatmap(shown.matrix),
        "matrix": components.matrix_table_markdown(shown.matrix),
        "ops_summary": components.ops_summary(shown.ops),
        "ops": components.ops_table_markdown(shown.ops),
        "io": components.io_table_markdown(shown.io),
        "comms": components.communicators_table_markdown(shown.collectives),
        "coll": components.collectives_table_markdown(shown.collectives),
        "sizes_graph": figures.size_histogram(shown.sizes),
        "sizes": components.sizes_table_markdown(shown.sizes),
        "rma": components.rma_table_markdown(shown.rma),
        "ranks_summary": components.ranks_summary(shown.ranks),
        "ranks": components.ranks_table_markdown(shown.ranks),
        "rendered": drawn,
    }


def select_job(_clicks: list[int | None]) -> str:
    """Remember the job whose row was clicked."""
    if not isinstance(ctx.triggered_id, dict) or not ctx.triggered[0]["value"]:
        raise PreventUpdate  # rows were re-rendered, not clicked
    return ctx.triggered_id["job"]
