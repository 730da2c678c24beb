# frontend/pages/job.py — the "/jobs/<job>" page: one job over a chosen window, with its
# timeline, the rank x time heat map and the slow ranks named, playback, and every card.
"""Job page: one job (`/jobs/<job>`, the key URL-quoted) over a window, the whole view in the
URL so that it can be shared and reloaded:

    /jobs/<job>?owner=<user>&run=<ordinal>&from=<start>&to=<end>&at=<step start>
    /jobs/<job>?owner=<user>&live=5m|1h|24h

The window is the header's time range (frontend/timerange.py), shared by every page.
`owner` (the job list's `user`; the list's links always carry it) says whose job of that
id is meant; without it the id must name one job the viewer may read (else the page says
which owners to choose from: the API's 409).

`from`/`to` are as the API reads them (RFC 3339 or epoch seconds), `live` a window ending
now that moves with every refresh, neither: the whole job. The page shows the timeline of
time and bytes per MPI traffic category and file-system layer, the rank x time heat map of
the share of time inside MPI with the outliers named, every job card (as on the Jobs
page: presentation/cards.py, frontend/cards.py), and the
"Hosts and links" card (where the job sits on the fabric: GET /api/jobs/<job>/placement;
for a job on multi-rail hosts, each rail's ranks and bytes: GET /api/jobs/<job>/links)
for the window, or, while the playback slider is on a step (`at`), for that step alone.
Under the title, a link to the Compare page setting the run against the previous run of the
same program (GET /api/compare/history); below, the card "Earlier runs of this program":
the elapsed time of the run and the runs before it (a line per build of the executable)
and those runs in a table (elapsed, shares of MPI and file I/O, build), each linked to the
Compare page setting the run against it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode

import dash
import dash_mantine_components as dmc
import flask
import plotly.graph_objects as go
from dash import Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, cards, components, ids, timerange
from frontend.api import ApiError, RunRef, WindowQuery, digest
from presentation import figures
from presentation.components import card, chart, markdown_table
from presentation.formatting import format_utc_ns, program_name

dash.register_page(__name__, path_template="/jobs/<job>", name="Job", title="Job — stacklens")


def _state(search: str | None) -> dict[str, str]:
    """The view's state from a query string (first value of each key)."""
    return {k: v[0] for k, v in parse_qs((search or "").lstrip("?")).items() if v}


#: This page's name in the ids of its card stores (frontend/cards.py).
_PAGE = "job"


def layout(job: str = "", **query: str) -> html.Div:
    """The page's skeleton with its controls set from the URL; `render` fills it."""
    return html.Div(
        className="page",
        children=[
            dcc.Location(id=ids.JV_LOCATION, refresh=False),
            dcc.Store(id=ids.JV_JOB, data=unquote(job)),
            dcc.Store(id=ids.JV_PLAYING, data=False),
            dcc.Store(id=ids.JV_RENDERED),
            # the page's refresh tick, armed again by each answer (`render`)
            dcc.Interval(id=ids.JV_TICK, interval=_refresh_ms(), max_intervals=1),
            html.Div(id=ids.JV_STATUS, role="status"),
            html.Section(
                className="card",
                children=[
                    html.H2(id=ids.JV_TITLE),
                    html.Div(
                        className="controls",
                        children=[
                            dmc.TextInput(
                                id=ids.JV_RUN,
                                value=query.get("run", ""),
                                placeholder="all runs",
                                label="Run",
                                w=110,
                                size="xs",
                            ),
                            dmc.Button("Show run", id=ids.JV_APPLY, size="xs", variant="light"),
                            components.report_buttons(ids.JV_REPORT_PDF, ids.JV_REPORT_HTML),
                        ],
                    ),
                    html.Div(
                        className="controls",
                        children=[
                            dmc.Button("▶ play", id=ids.JV_PLAY, size="xs", variant="light"),
                            html.Span(id=ids.JV_STEP_SHOWN, className="subtle"),
                        ],
                    ),
                    components.playback_slider(ids.JV_SLIDER, _number(query.get("at"))),
                    html.P(id=ids.JV_COMPARE, className="hint"),
                ],
            ),
            card(
                "Earlier runs of this program",
                html.P(
                    "The runs of the same program (executable, arguments, world size) before "
                    "the run "
                    "shown, newest first, that you may read; each opens the comparison with "
                    "this run.",
                    className="hint",
                ),
                chart(ids.JV_HISTORY_TREND, 280),
                html.Div(id=ids.JV_HISTORY),
            ),
            html.Div(id=ids.JV_BODY, children=_body()),
        ],
    )


def _body() -> list:
    """The page's charts and cards (hidden while the view cannot be shown)."""
    return [
            card(
                "Timeline",
                chart(ids.JV_TIMELINE, 420),
            ),
            card(
                "Ranks over time: share of time inside MPI",
                chart(ids.JV_HEATMAP, 420),
                html.Ul(id=ids.JV_OUTLIERS, className="outliers"),
            ),
            *cards.sections(_PAGE),
            card(
                "Hosts and links",
                markdown_table(ids.JV_PLACEMENT_HOSTS),
                markdown_table(ids.JV_PLACEMENT_LINKS),
                markdown_table(ids.JV_PLACEMENT_RAILS),
                section_id=ids.JV_PLACEMENT,
            ),
    ]  # fmt: skip


def _refresh_ms() -> int:
    """The app's refresh period (ms)."""
    return int(flask.current_app.config.get("STACKLENS_REFRESH_MS", 1000))


def _number(text: str | None) -> float | None:
    """A slider position (epoch seconds) from the URL, None if absent or unreadable."""
    try:
        return float(Decimal(text)) if text else None
    except ArithmeticError:
        return None


#: The outputs of `render`, by name.
_OUTPUTS = {
    "status": (ids.JV_STATUS, "children"),
    "hidden": (ids.JV_BODY, "hidden"),
    "title": (ids.JV_TITLE, "children"),
    "shown": (ids.JV_STEP_SHOWN, "children"),
    "slider_min": (ids.JV_SLIDER, "min"),
    "slider_max": (ids.JV_SLIDER, "max"),
    "slider_step": (ids.JV_SLIDER, "step"),
    "timeline": (ids.JV_TIMELINE, "figure"),
    "heatmap": (ids.JV_HEATMAP, "figure"),
    "outliers": (ids.JV_OUTLIERS, "children"),
    "placement_hosts": (ids.JV_PLACEMENT_HOSTS, "children"),
    "placement_links": (ids.JV_PLACEMENT_LINKS, "children"),
    "placement_rails": (ids.JV_PLACEMENT_RAILS, "children"),
    "rendered": (ids.JV_RENDERED, "data"),
    "rearm": (ids.JV_TICK, "max_intervals"),
    "report_pdf": (ids.JV_REPORT_PDF, "href"),
    "report_html": (ids.JV_REPORT_HTML, "href"),
}


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    dash_app.callback(
        output={
            **{name: Output(*target) for name, target in _OUTPUTS.items()},
            **{f"card_{key}": out for key, out in cards.outputs(_PAGE).items()},
        },
        inputs={
            "search": Input(ids.JV_LOCATION, "search"),
            "tick": Input(ids.JV_TICK, "n_intervals"),
        },
        state={
            "job": State(ids.JV_JOB, "data"),
            "rendered": State(ids.JV_RENDERED, "data"),
        },  # fmt: skip
    )(render)
    dash_app.callback(
        Output(ids.JV_LOCATION, "search"),
        inputs={
            "_apply": Input(ids.JV_APPLY, "n_clicks"),
            "at": Input(ids.JV_SLIDER, "value"),
        },
        state={
            "run": State(ids.JV_RUN, "value"),
            "search": State(ids.JV_LOCATION, "search"),
        },
        prevent_initial_call=True,
    )(navigate)
    dash_app.callback(
        Output(ids.JV_PLAYING, "data"),
        Output(ids.JV_PLAY, "children"),
        Input(ids.JV_PLAY, "n_clicks"),
        State(ids.JV_PLAYING, "data"),
        prevent_initial_call=True,
    )(toggle_play)
    dash_app.callback(
        Output(ids.JV_SLIDER, "value"),
        Input(ids.REFRESH_INTERVAL, "n_intervals"),
        State(ids.JV_PLAYING, "data"),
        State(ids.JV_SLIDER, "value"),
        State(ids.JV_SLIDER, "min"),
        State(ids.JV_SLIDER, "max"),
        State(ids.JV_SLIDER, "step"),
        prevent_initial_call=True,
    )(advance)
    dash_app.callback(
        Output(ids.JV_COMPARE, "children"),
        Output(ids.JV_HISTORY_TREND, "figure"),
        Output(ids.JV_HISTORY, "children"),
        Input(ids.JV_LOCATION, "search"),
        State(ids.JV_JOB, "data"),
    )(previous_runs)


#: Earlier runs of the program the job page lists and draws.
HISTORY_RUNS = 10


def previous_runs(search: str | None, job: str) -> tuple[Any, go.Figure, Any]:
    """The shown run's program history (GET /api/compare/history; the shown run is the
    job's newest MPI run when the view is the whole job), read when the view changes, not
    at every refresh: the link to the comparison with the previous run (or why there is
    none), the trend of the run and the HISTORY_RUNS runs before it, and those runs in a
    table, each linked to its comparison with the shown run."""
    state = _state(search)
    run = _window(state).run
    try:
        history = api.current_client().run_history(
            RunRef(job, run, state.get("owner")), HISTORY_RUNS
        )
    except ApiError as exc:
        return (f"No comparison with an earlier run: {exc}",
                figures.history_trend(None), "")  # fmt: skip
    table: Any = (components.history_table(history, earlier_only=True)
                  if len(history.runs) > 1 else "No earlier run of this program.")  # fmt: skip
    program = html.P(f"Program: {program_name(history.command, history.exe_path)} "
                     f"({history.world_size} ranks)", className="mono")  # fmt: skip
    return components.compare_link(history), figures.history_trend(history), [program, table]


def navigate(_apply: int | None, at: float | None, run: str | None,
             search: str | None) -> str:  # fmt: skip
    """The query string of the view the controls choose: a moved slider keeps the window
    and sets the step shown; a new run shows the whole window of it (the window itself is
    the header's: frontend/timerange.py)."""
    state = _state(search)
    if ctx.triggered_id == ids.JV_SLIDER:
        if at is None:
            raise PreventUpdate
        state["at"] = _seconds(at)
        return "?" + urlencode(state)
    state.pop("at", None)
    state.pop("run", None)
    if (run or "").strip():
        state["run"] = (run or "").strip()
    return "?" + urlencode(state) if state else ""


def toggle_play(_clicks: int | None, playing: bool) -> tuple[bool, str]:
    """Start or stop the playback."""
    return (not playing, "❚❚ pause" if not playing else "▶ play")


def advance(_tick: int | None, playing: bool, at: float | None, lo: float, hi: float,
            step: float) -> float:  # fmt: skip
    """While playing, move the slider one step per refresh (back to the start at the end)."""
    if not playing:
        raise PreventUpdate
    return lo if at is None or at + step > hi else at + step


def _seconds(value: float) -> str:
    """Epoch seconds as the URL keeps them (no exponent, no trailing zeros)."""
    text = f"{Decimal(repr(value)):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _exact(t_ns: int) -> str:
    """ns since the epoch as exact epoch seconds for the API."""
    return f"{t_ns // 10**9}.{t_ns % 10**9:09d}"


def _window(state: dict[str, str]) -> WindowQuery:
    """The window of a view's state (a live one ends now)."""
    run = int(state["run"]) if state.get("run", "").isdigit() else None
    return WindowQuery(run, *timerange.window_of(state).bounds())


def render(search: str | None, tick: int | None, job: str,
           rendered: dict[str, str] | None) -> dict:  # fmt: skip
    """Fetch the profile, the timeline and the cards of the view in the URL and draw them,
    unless they are what the page already shows; on failure say why in place of the page.
    The next tick is armed only when this one is answered: a slow answer is shown, never
    superseded by the next tick."""
    unchanged: dict[str, Any] = dict.fromkeys(
        [*_OUTPUTS, *(f"card_{key}" for key in cards.outputs(_PAGE))], no_update
    )
    unchanged["rearm"] = (tick or 0) + 1
    state = _state(search)
    window = _window(state)
    owner = state.get("owner")
    client = api.current_client()
    try:
        profile = client.profile(job, window, owner=owner)
        series = client.series(job, "category", window, profile.step_ns / 1e9, owner)
        at = _number(state.get("at"))
        cards_window, at_ns = window, None
        if at is not None:  # the step of the profile's grid the slider is on
            k = max(0, round((at * 10**9 - profile.from_ns) / profile.step_ns))
            at_ns = profile.from_ns + k * profile.step_ns
            cards_window = WindowQuery(window.run, _exact(at_ns), _exact(at_ns + profile.step_ns))
        overview = client.overview(job, cards_window, owner)
        placement = client.placement(job, cards_window, owner)
        rails = (client.job_links(job, cards_window, limit=1, owner=owner)
                 if components.multi_rail(placement) else None)  # fmt: skip
    except ApiError as exc:
        return {**unchanged, "status": components.error_state(exc), "hidden": True,
                "title": f"Job {job}", "rendered": {}}  # fmt: skip
    drawn = dict(rendered or {})
    page = digest((profile, series, overview, placement, rails, search))
    if drawn.get("page") == page:
        return unchanged
    drawn["page"] = page
    shown = overview.shown
    if shown is None or shown.job != job:
        unknown = components.error_state(f"No job {job!r} is known.", "Not found")
        return {**unchanged, "status": unknown, "hidden": True, "title": f"Job {job}"}
    view = {"job": job, "owner": owner, **cards_window.query()}
    published = cards.publish(shown, view, drawn)
    scope = f"run {window.run}" if window.run is not None else "all runs"
    span = f"{format_utc_ns(profile.from_ns)} – {format_utc_ns(profile.to_ns)}"
    return {
        "rearm": unchanged["rearm"],
        "status": None,
        "hidden": False,
        "title": f"Job {job}{f' of {owner}' if owner else ''} — {scope}, {span}",
        "shown": (
            f"cards: the step from {format_utc_ns(at_ns)}"
            if at_ns is not None
            else "cards: the whole window"
        ),  # fmt: skip
        "slider_min": profile.from_ns / 1e9,
        "slider_max": max(profile.from_ns, profile.to_ns - profile.step_ns) / 1e9,
        "slider_step": profile.step_ns / 1e9,
        "timeline": figures.timeline(series),
        "heatmap": figures.rank_heatmap(profile),
        "outliers": components.outlier_items(profile),
        "placement_hosts": components.placement_hosts_markdown(placement),
        "placement_links": components.placement_links_markdown(placement),
        "placement_rails": components.placement_rails_markdown(rails),
        "rendered": drawn,
        **{f"card_{key}": data for key, data in published.items()},
        **report_links(job, window, owner),
    }


def report_links(job: str, window: WindowQuery, owner: str | None) -> dict[str, str]:
    """The hrefs of the page's report buttons: the report of the shown job (of `owner`),
    run and window."""
    path = f"jobs/{quote(job, safe='')}"
    params = {**window.query(), "owner": owner}
    return {f"report_{fmt}": components.report_href(path, params, fmt) for fmt in ("pdf", "html")}
