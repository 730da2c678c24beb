# frontend/pages/fabric.py — the "/fabric" page: the InfiniBand fabric live (topology graph
# coloured by link load and errors, aggregated when large, search and filters; the most
# loaded / erroring links, the newest events).
"""Fabric page: what the fabric sampler sees.

Every tick the browser fetches the fabric state the server computed once for the newest
sweep (`assets/fabric.js`, clientside: 304 while unchanged) and paints the graph from it;
the server redraws the graph (positions: `cyto_style`) only when the topology's ETag
changes (a re-discovery) or a host group is expanded. Above `fold_above` HCAs the graph
is aggregated: switches in tiers, each leaf's HCAs folded into a group with its count and
hottest link; a click expands it. The search box focuses a host, switch or GUID, or a
job's first host in the fabric (its ranks' hosts, from the job API); the filters dim all
but the hot, erroring or down links; the job box (`?job=` in the URL) highlights a job's
hosts and the links they sit on or can cross (GET /api/jobs/<job>/placement: topological
candidates, not per-flow routes) and dims the rest; the colour scale is log (one step per
decade) or by quantile. The tables refresh on a slower interval. On an API failure the
page keeps the last data and shows the error.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import dash
import dash_cytoscape as cyto
import flask
from dash import ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, components, cyto_style, ids
from frontend.api import ApiError

# No `order`: with none given anywhere, Dash puts "/" (Jobs) first and this page after it.
dash.register_page(__name__, path="/fabric", name="Fabric", title="Fabric — stacklens")

#: Flask config key of the size above which the graph is aggregated (HCAs).
FOLD_ABOVE_KEY = "STACKLENS_FABRIC_FOLD_ABOVE"
#: The tables refresh every this many ticks of the page.
TABLE_TICKS = 5


def layout(**query: str) -> html.Div:
    """Static skeleton; the callbacks fill it on load, on every tick and on every sweep."""
    refresh_ms = flask.current_app.config.get("STACKLENS_REFRESH_MS", 1000)
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.FABRIC_STATE),
            dcc.Store(id=ids.FABRIC_TOPOLOGY_ETAG),
            dcc.Store(id=ids.FABRIC_EXPANDED, data=[]),
            dcc.Store(id=ids.FABRIC_FOLDED, data=False),
            dcc.Store(id=ids.FABRIC_FOCUS),
            dcc.Store(id=ids.FABRIC_FOCUSED),
            dcc.Store(id=ids.FABRIC_PAINT_CONFIG, data=_paint_config()),
            dcc.Store(id=ids.FABRIC_JOB_PLACED),
            dcc.Interval(id=ids.FABRIC_TABLE_INTERVAL, interval=TABLE_TICKS * refresh_ms),
            html.Div(id=ids.FABRIC_STATUS, role="status"),
            html.Div(id=ids.FABRIC_DRAW_MESSAGE, role="status", className="notice-line"),
            html.Section(
                className="card",
                children=[
                    components.card_head("InfiniBand fabric", ids.FABRIC_UPDATED),
                    html.P(id=ids.FABRIC_SUMMARY, className="summary"),
                    _controls(query.get("job", "")),
                    cyto.Cytoscape(
                        id=ids.FABRIC_GRAPH,
                        className="fabric-graph",
                        elements=[],
                        layout={"name": "preset", "fit": True, "padding": 24},
                        stylesheet=cyto_style.stylesheet(),
                        style={"width": "100%", "height": "560px"},
                        minZoom=0.02,
                        maxZoom=4,
                        autoungrabify=True,
                    ),
                    html.Div(
                        className="fabric-foot",
                        children=[_legend(), html.Span(id=ids.FABRIC_HOVER, className="mono")],
                    ),
                ],
            ),
            components.card("Links", components.markdown_table(ids.FABRIC_LINKS_TABLE)),
            components.card("Fabric events", components.markdown_table(ids.FABRIC_EVENTS_TABLE)),
        ],
    )


def _paint_config() -> dict[str, Any]:
    return {**cyto_style.paint_config(), "graph": ids.FABRIC_GRAPH, "graph_path": GRAPH_PATH}


def _controls(job: str) -> html.Div:
    """Search box, job highlight (set to `job`), link filter and colour scale."""
    return html.Div(
        className="fabric-controls",
        children=[
            dcc.Input(
                id=ids.FABRIC_SEARCH,
                type="search",
                placeholder="Find a host, switch, GUID or job (Enter)",
                debounce=True,
                className="fabric-search",
            ),
            html.Span(id=ids.FABRIC_SEARCH_MESSAGE, className="subtle"),
            dcc.Input(
                id=ids.FABRIC_JOB,
                type="search",
                value=job,
                placeholder="Highlight a job (Enter)",
                debounce=True,
                className="fabric-search",
            ),
            html.Span(id=ids.FABRIC_JOB_MESSAGE, className="subtle"),
            dcc.RadioItems(
                id=ids.FABRIC_FILTER,
                options=[
                    {"label": "all links", "value": "all"},
                    {"label": f"hot (busiest {cyto_style.HOT_SHARE:.0%})", "value": "hot"},
                    {"label": "with errors", "value": "errors"},
                    {"label": "down", "value": "down"},
                ],
                value="all",
                inline=True,
            ),
            dcc.RadioItems(
                id=ids.FABRIC_SCALE,
                options=[
                    {"label": "log scale", "value": "log"},
                    {"label": "quantiles", "value": "quantile"},
                ],
                value="log",
                inline=True,
            ),
        ],
    )


def _legend() -> html.Div:
    """Key of the link colours: the log scale's decades (cyto_style's scale)."""
    swatch = "legend-swatch"
    scale = cyto_style.UTILISATION_SCALE
    low = f"{cyto_style.LOG_MIN:.2%}".replace("0.01%", "≤0.01 %")
    return html.Div(
        className="legend",
        children=[
            html.Span("Link utilisation (log: one step per decade; quantiles: rank): "),
            html.Span(low, className="subtle"),
            html.Span(
                className=f"{swatch} legend-scale",
                style={"background": f"linear-gradient(90deg, {', '.join(scale)})"},
            ),
            html.Span("100 %", className="subtle"),
            html.Span(className=swatch, style={"background": cyto_style.UNKNOWN_COLOUR}),
            html.Span("unknown"),
            html.Span(className=swatch, style={"background": cyto_style.ERROR_COLOUR}),
            html.Span("errors in the last sweep (or saturated)"),
            html.Span(className=f"{swatch} legend-down"),
            html.Span("down"),
        ],
    )


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    fabric_js = "fabric"
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "tick"),
        Output(ids.FABRIC_STATE, "data"),
        Output(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        Output(ids.FABRIC_UPDATED, "children"),
        Input(ids.REFRESH_INTERVAL, "n_intervals"),
        State(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        State(ids.FABRIC_STATE, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "paint"),
        Output(ids.FABRIC_SUMMARY, "children"),
        Input(ids.FABRIC_STATE, "data"),
        Input(ids.FABRIC_GRAPH, "elements"),
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
        State(ids.FABRIC_GRAPH, "elements"),
        State(ids.FABRIC_EXPANDED, "data"),
        prevent_initial_call=True,
    )
    dash_app.clientside_callback(
        ClientsideFunction(fabric_js, "focus"),
        Output(ids.FABRIC_FOCUSED, "data"),
        Input(ids.FABRIC_FOCUS, "data"),
        Input(ids.FABRIC_GRAPH, "elements"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
        prevent_initial_call=True,
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
        ClientsideFunction(fabric_js, "draw"),
        Output(ids.FABRIC_GRAPH, "elements"),
        Output(ids.FABRIC_FOLDED, "data"),
        Output(ids.FABRIC_DRAW_MESSAGE, "children"),
        Input(ids.FABRIC_TOPOLOGY_ETAG, "data"),
        Input(ids.FABRIC_EXPANDED, "data"),
        State(ids.FABRIC_PAINT_CONFIG, "data"),
    )
    dash_app.server.add_url_rule(GRAPH_PATH, "fabric_graph", graph)
    dash_app.callback(
        Output(ids.FABRIC_LINKS_TABLE, "children"),
        Output(ids.FABRIC_EVENTS_TABLE, "children"),
        Output(ids.FABRIC_STATUS, "children"),
        Input(ids.FABRIC_TABLE_INTERVAL, "n_intervals"),
    )(tables)
    dash_app.callback(
        Output(ids.FABRIC_JOB_PLACED, "data"),
        Output(ids.FABRIC_JOB_MESSAGE, "children"),
        Input(ids.FABRIC_JOB, "value"),
    )(job_placed)
    dash_app.callback(
        Output(ids.FABRIC_HOVER, "children"),
        Input(ids.FABRIC_GRAPH, "mouseoverEdgeData"),
        Input(ids.FABRIC_GRAPH, "mouseoverNodeData"),
        prevent_initial_call=True,
    )(hover_text)


#: Path of the graph's elements on the dashboard's server (`graph`).
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


#: The tables last built, per API client (app): (time.monotonic() when built, outputs).
_TABLES: dict[int, tuple[float, tuple]] = {}


def tables(_tick: int | None) -> tuple:
    """The links table (erroring first, then down, then busiest) and the newest events:
    built at most once per table interval and shared by every viewer of the app."""
    client = api.current_client()
    period_s = TABLE_TICKS * flask.current_app.config.get("STACKLENS_REFRESH_MS", 1000) / 1000
    cached = _TABLES.get(id(client))
    if cached is not None and time.monotonic() - cached[0] < 0.8 * period_s:
        return cached[1]
    try:
        state = client.fabric_state()
        by_errors = client.fabric_links(sort="errors", limit=components.MAX_LINK_ROWS).links
        busiest = client.fabric_links(limit=components.MAX_LINK_ROWS).links
        events = client.fabric_events(components.MAX_EVENT_ROWS).events
    except ApiError as exc:
        return no_update, no_update, components.notice(str(exc), "error")
    loads = list({x.id: x for x in [*by_errors, *busiest]}.values())
    outputs = (
        components.fabric_links_table_markdown(loads, state.summary.links),
        components.fabric_events_markdown(events),
        None if state.summary.nodes else components.no_fabric_notice(),
    )
    _TABLES[id(client)] = (time.monotonic(), outputs)
    return outputs


def job_placed(job: str | None) -> tuple[dict[str, list] | None, str]:
    """The GUIDs of a job's HCAs and the ids of its links (the whole job), for the painter,
    and a line saying what is highlighted (or why nothing is)."""
    job = (job or "").strip()
    if not job:
        return None, ""
    try:
        placement = api.current_client().placement(job, api.Window())
    except ApiError as exc:
        return None, str(exc)
    nodes = sorted({p.guid for h in placement.hosts for p in h.ports})
    links = [lk.id for lk in placement.links]
    lost = [h.host for h in placement.hosts if h.match == "unmatched"]
    line = f"job {job}: {len(placement.hosts) - len(lost)} hosts, {len(links)} links"
    line += f" ({placement.crossed} between switches)"
    line += f"; not on the fabric: {', '.join(lost)}" if lost else ""
    return {"nodes": nodes, "links": links}, line


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
