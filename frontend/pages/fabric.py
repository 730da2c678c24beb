# frontend/pages/fabric.py — the "/fabric" page: the InfiniBand fabric live or over a past
# window (topology graph coloured by link load and errors, aggregated when large, search,
# filters, playback; a detail panel per link or node; the links grid and the events).
"""Fabric page: what the fabric sampler sees, now or over a window, the whole view in the
URL so that it can be shared and reloaded:

    /fabric?live=5m|1h|24h            a window ending now (default: live=5m)
    /fabric?from=<start>&to=<end>     a past window (RFC 3339 or epoch seconds): the graph
                                      shows the state over the whole window
    (the window is the header's time range, frontend/timerange.py)
            &at=<epoch s>&step=<s>    the playback step shown (colours of that step)
            &job=<job>&focus=<GUID | link-<id>>

Every tick the browser fetches the fabric state the server computed once for the newest
sweep (`assets/fabric.js`, clientside: 304 while unchanged) and paints the graph from it,
or, while the playback slider is on a step, the state over that step (`/api/fabric/state`
with from/to, fetched once per step): the colours follow the slider. The graph's elements
(positions: `cyto_style`) come from the dashboard's server (`GRAPH_PATH`), built once per
topology and expansion for every viewer, revalidated by ETag. The page says how old the
last sweep is; stale data (no sweep for STALE_SWEEPS intervals) is drawn faded and dashed;
a down link has no rate. Above `fold_above` HCAs the graph is aggregated: switches in
tiers, each leaf's HCAs folded into a group with its count and hottest link; a click
expands it. Clicking a link or node opens the detail panel: its counters over the window
(`/api/fabric/series`) with its events marked, its events and the jobs on it
(`/api/fabric/links/{link}/attribution`, `/api/fabric/nodes/{guid}/jobs`). The search box
focuses a host, switch or GUID, or a job's first host; the filters dim all but the hot,
erroring or down links; the job box highlights a job's hosts and links (GET
/api/jobs/<job>/placement: topological candidates) and dims the rest; the colour scale is
log or by quantile. The links grid (a page of `/api/fabric/links`: live windows in the
newest sweep, from the server's per-sweep ranking; a custom window summed over it), the
groups of parallel links and rails with their skew over the window (`/api/fabric/groups`,
highest skew first, sortable) and the events (of the window) refresh on a slower
interval, built at most once per interval for every viewer. On an API failure the page
keeps the last data and shows the error.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Any

import dash
import dash_cytoscape as cyto
import dash_mantine_components as dmc
import flask
from dash import ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, components, cyto_style, ids, timerange
from frontend.api import ApiError, WindowQuery
from presentation import figures
from presentation.components import card, grid, markdown_table

# No `order`: with none given anywhere, Dash puts "/" (Jobs) first and this page after it.
dash.register_page(__name__, path="/fabric", name="Fabric", title="Fabric — stacklens")

#: Flask config key of the size above which the graph is aggregated (HCAs).
FOLD_ABOVE_KEY = "STACKLENS_FABRIC_FOLD_ABOVE"
#: Flask config key of the PortXmitWait rate (ticks/s) from which a link is congested.
CONGESTED_KEY = "STACKLENS_CONGESTED_WAIT_PER_S"
#: The tables refresh every this many ticks of the page.
TABLE_TICKS = 5
#: The live windows: query value -> seconds.
LIVE = timerange.LIVE
#: Windows up to this long replay per sweep (the raw samples); longer ones per minute (the
#: exact minute rollups).
RAW_REPLAY_S = 3600


def view_of(query: dict[str, str]) -> dict[str, Any]:
    """The view a URL's query holds (module doc): the live window (None: custom), the
    custom bounds, the playback step shown (`at`, `step`: epoch seconds), the job and the
    focused element."""

    def number(key: str) -> float | None:
        try:
            value = float(query.get(key, ""))
        except ValueError:
            return None
        return value if value == value and abs(value) < 1e12 else None  # no nan, no inf

    window = timerange.window_of(query, default_live="5m")
    at, step = number("at"), number("step")
    return {
        "live": window.live,
        "from": window.start,
        "to": window.end,
        "at": at if at is not None and step is not None and step > 0 else None,
        "step": step if at is not None and step is not None and step > 0 else None,
        "job": query.get("job", ""),
        "focus": query.get("focus") or None,
    }


def _selected(focus: str | None) -> dict[str, Any] | None:
    """The detail panel's subject of a `focus` (a link's element id or a node's GUID)."""
    if not focus:
        return None
    if focus.startswith("link-") and focus[5:].isdigit():
        return {"kind": "link", "id": int(focus[5:]), "label": f"link {focus[5:]}"}
    return {"kind": "node", "id": focus, "label": focus}


def layout(**query: str) -> html.Div:
    """Static skeleton with the controls set from the URL; the callbacks fill it on load,
    on every tick and on every sweep."""
    refresh_ms = flask.current_app.config.get("STACKLENS_REFRESH_MS", 1000)
    view = view_of(query)
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.FABRIC_VIEW, data=view),
            dcc.Store(id=ids.FABRIC_SELECTED, data=_selected(view["focus"])),
            dcc.Store(id=ids.FABRIC_STATE),
            dcc.Store(id=ids.FABRIC_TOPOLOGY_ETAG),
            dcc.Store(id=ids.FABRIC_EXPANDED, data=[]),
            dcc.Store(id=ids.FABRIC_FOLDED, data=False),
            dcc.Store(id=ids.FABRIC_DRAWN),
            dcc.Store(id=ids.FABRIC_FOCUS, data=view["focus"]),
            dcc.Store(id=ids.FABRIC_FOCUSED),
            dcc.Store(id=ids.FABRIC_PAINT_CONFIG, data=_paint_config()),
            dcc.Store(id=ids.FABRIC_JOB_PLACED),
            dcc.Store(id=ids.FABRIC_PLAYING, data=False),
            dcc.Store(id=ids.FABRIC_LINKS_PAGES, data=[None]),
            dcc.Store(id=ids.FABRIC_LINKS_NEXT),
            dcc.Store(id=ids.FABRIC_PANEL_TICK),
            dcc.Interval(id=ids.FABRIC_TABLE_INTERVAL, interval=TABLE_TICKS * refresh_ms),
            html.Div(id=ids.FABRIC_STATUS, role="status"),
            html.Div(id=ids.FABRIC_DRAW_MESSAGE, role="status", className="notice-line"),
            html.Section(
                className="card",
                children=[
                    components.card_head("InfiniBand fabric", ids.FABRIC_UPDATED),
                    html.P(id=ids.FABRIC_SUMMARY, className="summary"),
                    html.P(id=ids.FABRIC_FRESHNESS, className="freshness"),
                    _window_controls(view),
                    _controls(view["job"]),
                    html.Div(
                        className="fabric-body",
                        children=[
                            cyto.Cytoscape(
                                id=ids.FABRIC_GRAPH,
                                className="fabric-graph",
                                elements=[],
                                layout={"name": "preset", "fit": True, "padding": 24},
                                # the elements come with positions (`draw` adds and fits
                                # them): no layout run again after each addition
                                autoRefreshLayout=False,
                                stylesheet=cyto_style.stylesheet(),
                                style={"width": "100%", "height": "560px"},
                                minZoom=0.02,
                                maxZoom=4,
                                autoungrabify=True,
                            ),
                            _panel(),
                        ],
                    ),
                    html.Div(
                        className="fabric-foot",
                        children=[
                            components.fabric_legend(_congested()),
                            html.Span(id=ids.FABRIC_HOVER, className="mono"),
                        ],
                    ),
                    _report_controls(),
                ],
            ),
            card(
                "Links",
                html.Div(
                    className="controls",
                    children=[
                        dmc.SegmentedControl(
                            id=ids.FABRIC_LINKS_SORT,
                            data=[
                                {"label": "busiest first", "value": "utilisation"},
                                {"label": "most errors first", "value": "errors"},
                            ],
                            value="utilisation",
                            size="xs",
                        ),
                        components.pager_button("← Previous", ids.FABRIC_LINKS_NEWER),
                        html.Span(id=ids.FABRIC_LINKS_CAPTION, className="subtle"),
                        components.pager_button("Next →", ids.FABRIC_LINKS_OLDER),
                    ],
                ),
                grid(ids.FABRIC_LINKS_GRID, components.LINK_COLUMNS),
            ),
            card(
                "Parallel links and rails",
                html.P(id=ids.FABRIC_GROUPS_CAPTION, className="subtle"),
                grid(ids.FABRIC_GROUPS_GRID, components.GROUP_COLUMNS, height_px=320),
            ),
            card("Fabric events", markdown_table(ids.FABRIC_EVENTS_TABLE)),
        ],
    )


def _window_controls(view: dict[str, Any]) -> html.Div:
    """The playback controls over the window (the header's time range)."""
    return html.Div(
        className="fabric-window",
        children=[
            html.Div(
                className="controls",
                children=[
                    dmc.Button("▶ play", id=ids.FABRIC_PLAY, size="xs", variant="light"),
                    dmc.Button("● newest", id=ids.FABRIC_LIVE, size="xs", variant="light"),
                    html.Span(id=ids.FABRIC_PLAYBACK_SHOWN, className="subtle"),
                ],
            ),
            components.playback_slider(ids.FABRIC_SLIDER, view["at"]),
        ],
    )  # fmt: skip


def _panel() -> html.Aside:
    """The detail panel beside the graph (hidden until a link or node is clicked)."""
    return html.Aside(
        id=ids.FABRIC_PANEL,
        className="fabric-panel closed",
        children=[
            html.Div(
                className="panel-head",
                children=[
                    html.H3(id=ids.FABRIC_PANEL_TITLE),
                    dmc.ActionIcon("×", id=ids.FABRIC_PANEL_CLOSE, variant="subtle",
                                   color="gray", size="sm", **{"aria-label": "close"}),
                ],
            ),
            html.Div(id=ids.FABRIC_PANEL_STATUS, role="status"),
            # The series' graph is made when the panel opens: the page loads Plotly then.
            html.Div(id=ids.FABRIC_PANEL_SERIES),
            html.H4("Events"),
            markdown_table(ids.FABRIC_PANEL_EVENTS),
            html.H4("Jobs"),
            markdown_table(ids.FABRIC_PANEL_JOBS),
        ],
    )  # fmt: skip


def _congested() -> float:
    """PortXmitWait ticks per second from which a link is drawn congested (the app's)."""
    return float(flask.current_app.config.get(CONGESTED_KEY, 1_000_000.0))


def _paint_config() -> dict[str, Any]:
    return {**cyto_style.paint_config(), "graph": ids.FABRIC_GRAPH, "graph_path": GRAPH_PATH,
            "live": LIVE, "raw_replay_s": RAW_REPLAY_S, "congested": _congested()}  # fmt: skip


def _controls(job: str) -> html.Div:
    """Search box, job highlight (set to `job`), link filter and colour scale, on two lines."""
    return html.Div(
        className="fabric-controls",
        children=[
            html.Div(className="controls", children=[
                dmc.TextInput(id=ids.FABRIC_SEARCH, debounce=True, w=300, size="xs",
                              placeholder="Find a host, switch, GUID or job (Enter)"),
                html.Span(id=ids.FABRIC_SEARCH_MESSAGE, className="subtle"),
                dmc.TextInput(id=ids.FABRIC_JOB, value=job, debounce=True, w=300, size="xs",
                              placeholder="Highlight a job (Enter)"),
                html.Span(id=ids.FABRIC_JOB_MESSAGE, className="subtle"),
            ]),
            html.Div(className="controls", children=[
                dmc.SegmentedControl(id=ids.FABRIC_FILTER, value="all", size="xs", data=[
                    {"label": "all links", "value": "all"},
                    {"label": f"hot (busiest {cyto_style.HOT_SHARE:.0%})", "value": "hot"},
                    {"label": "congested", "value": "congested"},
                    {"label": "with errors", "value": "errors"},
                    {"label": "down", "value": "down"},
                ]),
                dmc.SegmentedControl(id=ids.FABRIC_SCALE, value="log", size="xs", data=[
                    {"label": "log scale", "value": "log"},
                    {"label": "quantiles", "value": "quantile"},
                ]),
            ]),
        ],
    )  # fmt: skip


def _report_controls() -> html.Div:
    """The report of the page's window: its hosts (all when empty) and the two buttons."""
    return html.Div(
        className="controls fabric-report",
        children=[
            html.Span("Report of this window on", className="subtle"),
            dmc.TextInput(id=ids.FABRIC_REPORT_HOSTS, placeholder="hosts (default: all)",
                          debounce=True, w=220, size="xs"),
            components.report_buttons(ids.FABRIC_REPORT_PDF, ids.FABRIC_REPORT_HTML),
        ],
    )  # fmt: skip


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    fabric_js = "fabric"
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "navigate"),
        Output(ids.FABRIC_VIEW, "data"),
        Input(ids.FABRIC_SLIDER, "value"),
        Input(ids.FABRIC_JOB, "value"),
        Input(ids.FABRIC_SELECTED, "data"),
        Input(ids.FABRIC_LIVE, "n_clicks"),
        State(ids.FABRIC_SLIDER, "step"),
        State(ids.FABRIC_VIEW, "data"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "slider"),
        Output(ids.FABRIC_SLIDER, "min"),
        Output(ids.FABRIC_SLIDER, "max"),
        Output(ids.FABRIC_SLIDER, "step"),
        Output(ids.FABRIC_PLAYBACK_SHOWN, "children"),
        Input(ids.FABRIC_VIEW, "data"),
        Input(ids.FABRIC_STATE, "data"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "playback"),
        Output(ids.FABRIC_SLIDER, "value"),
        Output(ids.FABRIC_PLAYING, "data"),
        Output(ids.FABRIC_PLAY, "children"),
        Input(ids.REFRESH_INTERVAL, "n_intervals"),
        Input(ids.FABRIC_PLAY, "n_clicks"),
        Input(ids.FABRIC_LIVE, "n_clicks"),
        State(ids.FABRIC_PLAYING, "data"),
        State(ids.FABRIC_SLIDER, "value"),
        State(ids.FABRIC_SLIDER, "min"),
        State(ids.FABRIC_SLIDER, "max"),
        State(ids.FABRIC_SLIDER, "step"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "tick"),
        Output(ids.FABRIC_STATE, "data"),
        Output(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        Output(ids.FABRIC_UPDATED, "children"),
        Output(ids.FABRIC_FRESHNESS, "children"),
        Input(ids.REFRESH_INTERVAL, "n_intervals"),
        Input(ids.FABRIC_VIEW, "data"),
        State(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        State(ids.FABRIC_STATE, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "paint"),
        Output(ids.FABRIC_SUMMARY, "children"),
        Input(ids.FABRIC_STATE, "data"),
        Input(ids.FABRIC_DRAWN, "data"),
        Input(ids.FABRIC_FILTER, "value"),
        Input(ids.FABRIC_SCALE, "value"),
        Input(ids.FABRIC_JOB_PLACED, "data"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "search"),
        Output(ids.FABRIC_EXPANDED, "data", allow_duplicate=True),
        Output(ids.FABRIC_FOCUS, "data"),
        Output(ids.FABRIC_SEARCH_MESSAGE, "children"),
        Input(ids.FABRIC_SEARCH, "value"),
        State(ids.FABRIC_DRAWN, "data"),
        State(ids.FABRIC_EXPANDED, "data"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "focus"),
        Output(ids.FABRIC_FOCUSED, "data"),
        Input(ids.FABRIC_FOCUS, "data"),
        Input(ids.FABRIC_DRAWN, "data"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "toggle"),
        Output(ids.FABRIC_EXPANDED, "data"),
        Input(ids.FABRIC_GRAPH, "tapNodeData"),
        State(ids.FABRIC_EXPANDED, "data"),
        State(ids.FABRIC_FOLDED, "data"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "select"),
        Output(ids.FABRIC_SELECTED, "data"),
        Input(ids.FABRIC_GRAPH, "tapNodeData"),
        Input(ids.FABRIC_GRAPH, "tapEdgeData"),
        Input(ids.FABRIC_PANEL_CLOSE, "n_clicks"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "draw"),
        Output(ids.FABRIC_DRAWN, "data"),
        Output(ids.FABRIC_FOLDED, "data"),
        Output(ids.FABRIC_DRAW_MESSAGE, "children"),
        Input(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        Input(ids.FABRIC_EXPANDED, "data"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
        # what the painter paints with: the draw paints the new elements before adding them
        State(ids.FABRIC_FILTER, "value"),
        State(ids.FABRIC_SCALE, "value"),
        State(ids.FABRIC_JOB_PLACED, "data"),
    )
    dash_app.server.add_url_rule(GRAPH_PATH, "fabric_graph", graph)
    dash_app.callback(
        Output(ids.FABRIC_LINKS_GRID, "rowData"),
        Output(ids.FABRIC_LINKS_CAPTION, "children"),
        Output(ids.FABRIC_LINKS_NEWER, "disabled"),
        Output(ids.FABRIC_LINKS_OLDER, "disabled"),
        Output(ids.FABRIC_LINKS_NEXT, "data"),
        Output(ids.FABRIC_EVENTS_TABLE, "children"),
        Output(ids.FABRIC_STATUS, "children"),
        Input(ids.FABRIC_TABLE_INTERVAL, "n_intervals"),
        Input(ids.FABRIC_VIEW, "data"),
        Input(ids.FABRIC_LINKS_SORT, "value"),
        Input(ids.FABRIC_LINKS_PAGES, "data"),
    )(tables)
    dash_app.callback(
        Output(ids.FABRIC_GROUPS_GRID, "rowData"),
        Output(ids.FABRIC_GROUPS_CAPTION, "children"),
        Input(ids.FABRIC_TABLE_INTERVAL, "n_intervals"),
        Input(ids.FABRIC_VIEW, "data"),
    )(link_groups)
    dash_app.callback(
        Output(ids.FABRIC_LINKS_PAGES, "data"),
        Input(ids.FABRIC_LINKS_NEWER, "n_clicks"),
        Input(ids.FABRIC_LINKS_OLDER, "n_clicks"),
        Input(ids.FABRIC_LINKS_SORT, "value"),
        Input(ids.FABRIC_VIEW, "data"),
        State(ids.FABRIC_LINKS_NEXT, "data"),
        State(ids.FABRIC_LINKS_PAGES, "data"),
        prevent_initial_call=True,
    )(turn_page)
    dash_app.callback(
        Output(ids.FABRIC_PANEL, "className"),
        Output(ids.FABRIC_PANEL_TITLE, "children"),
        Output(ids.FABRIC_PANEL_SERIES, "children"),
        Output(ids.FABRIC_PANEL_EVENTS, "children"),
        Output(ids.FABRIC_PANEL_JOBS, "children"),
        Output(ids.FABRIC_PANEL_STATUS, "children"),
        Input(ids.FABRIC_SELECTED, "data"),
        Input(ids.FABRIC_VIEW, "data"),
        Input(ids.FABRIC_PANEL_TICK, "data"),
    )(panel)
    # The panel refreshes with the tables, only while it is open (no request otherwise).
    dash_app.clientside_callback(
        "function (n, selected) { return selected ? n : window.dash_clientside.no_update; }",
        Output(ids.FABRIC_PANEL_TICK, "data"),
        Input(ids.FABRIC_TABLE_INTERVAL, "n_intervals"),
        State(ids.FABRIC_SELECTED, "data"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "placed"),
        Output(ids.FABRIC_JOB_PLACED, "data"),
        Output(ids.FABRIC_JOB_MESSAGE, "children"),
        Input(ids.FABRIC_JOB, "value"),
    )
    dash_app.callback(
        Output(ids.FABRIC_REPORT_PDF, "href"),
        Output(ids.FABRIC_REPORT_HTML, "href"),
        Input(ids.FABRIC_VIEW, "data"),
        Input(ids.FABRIC_REPORT_HOSTS, "value"),
    )(report_links)
    dash_app.callback(
        Output(ids.FABRIC_HOVER, "children"),
        Input(ids.FABRIC_GRAPH, "mouseoverEdgeData"),
        Input(ids.FABRIC_GRAPH, "mouseoverNodeData"),
        prevent_initial_call=True,
    )(hover_text)


#: Path of the graph's elements on the dashboard's server (`graph`); assets/fabric.js asks
#: it by this path, unexpanded, before the page's callbacks run.
GRAPH_PATH = "/_fabric/graph"
#: Graphs drawn, per API client (app): {expanded leaves: (the topology's ETag, the encoded
#: answer and its ETag)}; a viewer opening the page gets the graph the previous one got.
_DRAWN: dict[int, dict[tuple[str, ...], tuple[str, tuple[bytes, str]]]] = {}
DRAWN_KEPT = 8


def _encoded(value: Any) -> tuple[bytes, str]:
    """`value` (JSON-able) encoded compactly, and a strong ETag of the bytes."""
    body = json.dumps(value, separators=(",", ":")).encode()
    return body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def graph() -> flask.Response:
    """GET GRAPH_PATH?expanded=<leaf GUID>,...: the graph's elements with positions for the
    current topology (aggregated above the configured size, with the `expanded` leaves'
    hosts shown) as {"etag": the topology's ETag, "folded", "nodes", "elements"}. Built
    once per topology and expansion for every viewer (the API is asked only whether the
    topology changed: 304 while not); ETag, so a browser that has it gets a 304."""
    args = flask.request.args
    if set(args) - {"expanded"}:
        unknown = ", ".join(sorted(set(args) - {"expanded"}))
        return flask.Response(json.dumps({"detail": f"unknown query parameter(s): {unknown}"}),
                              422, mimetype="application/json")  # fmt: skip
    expanded = tuple(sorted({x for x in args.get("expanded", "").split(",") if x}))
    client = api.current_client()
    drawn = _DRAWN.setdefault(id(client), {})
    cached = drawn.get(expanded)
    try:
        fresh = client.fabric_topology_since(cached[0] if cached else None)
    except ApiError as exc:
        return flask.Response(json.dumps({"detail": str(exc)}), 502, mimetype="application/json")
    if fresh is not None:
        topology, etag = fresh
        fold = cyto_style.folds(topology, flask.current_app.config.get(FOLD_ABOVE_KEY, 256))
        elements = cyto_style.elements(topology, set(expanded), fold)
        answer = {"etag": etag, "folded": fold, "nodes": len(topology.nodes),
                  "elements": elements}  # fmt: skip
        if len(drawn) >= DRAWN_KEPT and expanded not in drawn:
            drawn.pop(next(iter(drawn)))
        cached = drawn[expanded] = (etag, _encoded(answer))
    assert cached is not None
    body, tag = cached[1]
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if flask.request.headers.get("If-None-Match") == tag:
        return flask.Response(status=304, headers=headers)
    return flask.Response(body, mimetype="application/json", headers=headers)


def window_of(view: dict[str, Any], now_s: float | None = None) -> WindowQuery:
    """The API window of a view: a live one ends now (`now_s`, default the clock)."""
    if view.get("live") in LIVE:
        now = round(time.time() if now_s is None else now_s)
        return WindowQuery(None, str(now - LIVE[view["live"]]), None)
    return WindowQuery(None, view.get("from") or None, view.get("to") or None)


def scope_of(view: dict[str, Any]) -> str:
    """The window of a view in words."""
    if view.get("live") in LIVE:
        return "over " + timerange.Window(live=view["live"]).words().removesuffix(" (live)")
    start = timerange.bound_words(view.get("from"), "15 min before the end")
    return f"from {start} to {timerange.bound_words(view.get('to'), 'now')}"


#: What the slower refreshes last built, per API client (app): {key: (time.monotonic()
#: when built, outputs)}, the newest KEPT; built at most once per table interval for every
#: viewer of the same view (one build at a time: the others wait for its outputs).
_BUILT: dict[int, dict[tuple, tuple[float, Any]]] = {}
_BUILDING = threading.Lock()
KEPT = 32


def _shared(key: tuple, build: Any) -> Any:
    """`build()`'s outputs, or those built for `key` less than 0.8 table intervals ago."""
    built = _BUILT.setdefault(id(api.current_client()), {})
    period_s = TABLE_TICKS * flask.current_app.config.get("STACKLENS_REFRESH_MS", 1000) / 1000

    def recent() -> Any:
        cached = built.get(key)
        if cached is not None and time.monotonic() - cached[0] < 0.8 * period_s:
            return cached
        return None

    cached = recent()
    if cached is not None:
        return cached[1]
    with _BUILDING:
        cached = recent()
        if cached is not None:
            return cached[1]
        outputs = build()
        if len(built) >= KEPT and key not in built:
            built.pop(next(iter(built)))
        built[key] = (time.monotonic(), outputs)
        return outputs


def tables(_tick: int | None, view: dict[str, Any] | None, sort: str | None,
           pages: list[str | None] | None) -> tuple:  # fmt: skip
    """The links grid (a page of the links in the chosen order: live, in the newest sweep,
    from the server's per-sweep ranking; over a custom window, summed over it) and the
    window's events; built at most once per table interval for every viewer."""
    view = view or view_of({})
    sort = sort or "utilisation"
    pages = pages or [None]
    window = window_of(view)

    def build() -> tuple:
        client = api.current_client()
        try:
            live = view.get("live") in LIVE
            page = client.fabric_links(sort, components.LINK_PAGE_ROWS,
                                       None if live else window, pages[-1])  # fmt: skip
            events = client.fabric_events(components.MAX_EVENT_ROWS, window)
        except ApiError as exc:
            return (no_update,) * 6 + (components.notice(str(exc), "error"),)
        first = (len(pages) - 1) * components.LINK_PAGE_ROWS + 1
        scope = scope_of(view)
        return (
            components.fabric_link_rows(page),
            components.fabric_links_caption(page, first, "in the newest sweep" if live else scope),
            len(pages) <= 1,
            page.page.next_cursor is None,
            page.page.next_cursor,
            components.fabric_events_markdown(events.events, events.page.total, scope),
            None if page.page.total else components.no_fabric_notice(),
        )

    key = ("tables", view.get("live"), view.get("from"), view.get("to"), sort, pages[-1])
    return _shared(key, build)  # type: ignore[no-any-return]


#: Groups of parallel links the page lists (highest skew first).
GROUPS_LISTED = 500


def link_groups(_tick: int | None, view: dict[str, Any] | None) -> tuple:
    """The groups of parallel links over the view's window, highest skew first, and the
    caption with the legend; built at most once per table interval for every viewer."""
    view = view or view_of({})
    window = window_of(view)

    def build() -> tuple:
        try:
            page = api.current_client().fabric_groups(window, limit=GROUPS_LISTED)
        except ApiError as exc:
            return no_update, str(exc)
        return components.fabric_group_rows(page), components.fabric_groups_caption(
            page, scope_of(view)
        )

    key = ("groups", view.get("live"), view.get("from"), view.get("to"))
    return _shared(key, build)  # type: ignore[no-any-return]


def turn_page(_newer: int | None, _older: int | None, _sort: str | None,
              _view: dict[str, Any] | None, next_cursor: str | None,
              pages: list[str | None] | None) -> list[str | None]:  # fmt: skip
    """The cursors of the links pages up to the one shown: one more (next), one fewer
    (previous), or back to the first when the order or the window changes."""
    pages = pages or [None]
    if ctx.triggered_id == ids.FABRIC_LINKS_OLDER:
        if next_cursor is None:
            raise PreventUpdate
        return [*pages, next_cursor]
    if ctx.triggered_id == ids.FABRIC_LINKS_NEWER:
        return pages[:-1] or [None]
    if ctx.triggered_id == ids.FABRIC_VIEW and pages == [None]:
        raise PreventUpdate  # a playback step or a selection: the window is the same
    return [None]


def panel(selected: dict[str, Any] | None, view: dict[str, Any] | None,
          _tick: int | None) -> tuple:  # fmt: skip
    """The detail panel of the clicked link or node over the view's window: its counters
    per step with its events marked, its events, and the jobs on it (whose traffic is
    routed over the link or the node's links; on an HCA, also those with ranks there)."""
    if not selected:
        return "fabric-panel closed", "", None, "", "", None
    view = view or view_of({})
    window = window_of(view)
    subject = (selected["kind"], selected["id"])

    def build() -> tuple:
        client = api.current_client()
        try:
            if subject[0] == "link":
                series = client.fabric_series(window, link=int(subject[1]))
                events = client.fabric_events(50, window, link=int(subject[1])).events
                jobs = components.link_jobs_markdown(
                    client.link_attribution(int(subject[1]), window)
                )
            else:
                series = client.fabric_series(window, guid=str(subject[1]))
                name = series.name
                events = [e for e in client.fabric_events(200, window).events
                          if e.subject == name or e.subject.startswith(f"{name}[")
                          or f" {name}[" in e.subject]  # fmt: skip
                jobs = components.node_jobs_markdown(client.node_jobs(str(subject[1]), window))
        except ApiError as exc:
            return "fabric-panel open", selected.get("label", ""), no_update, no_update, \
                no_update, components.notice(str(exc), "error")  # fmt: skip
        scope = scope_of(view)
        kind = {"link": "link", "port": "port", "node": "node"}[series.subject]
        title = f"{kind} {series.name}"
        return (
            "fabric-panel open",
            title,
            dcc.Graph(
                figure=figures.fabric_series(series, events),
                style={"height": "340px"},
                config={"displaylogo": False},
            ),  # fmt: skip
            components.fabric_events_markdown(events, len(events), scope),
            jobs,
            None,
        )

    key = ("panel", subject, view.get("live"), view.get("from"), view.get("to"))
    return _shared(key, build)  # type: ignore[no-any-return]


def report_links(view: dict[str, Any] | None, hosts: str | None) -> tuple[str, str]:
    """The hrefs of the fabric window's report buttons (PDF, HTML): the page's window
    (the header's time range) on the typed hosts (every link when empty)."""
    window = window_of(view or {"live": "5m"})
    params: dict[str, object] = {
        "from": window.start or "",
        "to": window.end or "",
        "hosts": (hosts or "").strip(),
    }
    return (components.report_href("window", params, "pdf"),
            components.report_href("window", params, "html"))  # fmt: skip


def hover_text(edge: dict | None, node: dict | None) -> str:
    """What the mouse last pointed at: a link's (or bundle's) ends, utilisation, busier
    direction's rate and errors (`title` of its data), a group's hottest link, or a node's
    name and kind."""
    if ctx.triggered_id is None:
        raise PreventUpdate
    pointed = ctx.triggered[0]["prop_id"].endswith("mouseoverEdgeData")
    if pointed and edge:
        return str(edge.get("title", ""))
    if not pointed and node:
        if node.get("kind") == "group":
            return str(node.get("title", node.get("label", "")))
        return f"{node.get('label', '')} ({node.get('kind', '')}, GUID {node.get('id', '')})"
    return ""
