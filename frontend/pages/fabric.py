# frontend/pages/fabric.py — the "/fabric" page: the InfiniBand fabric live (topology graph
# coloured by link load and errors, the most loaded / erroring links, the newest events).
"""Fabric page: what the fabric sampler sees, refreshed on the app's interval.

The graph's node positions are computed once per topology (`cyto_style.positions`, preset
layout); while the topology (its nodes and links, not their state) stays the same, a refresh
patches only each element's `data` and `classes`. On an API failure the page keeps the last
data and shows the error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import dash
import dash_cytoscape as cyto
from dash import Input, Output, Patch, State, ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from frontend import api, components, cyto_style, ids
from frontend.api import ApiError, digest
from stacklens.api_models import Topology

# No `order`: with none given anywhere, Dash puts "/" (Jobs) first and this page after it.
dash.register_page(__name__, path="/fabric", name="Fabric", title="Fabric — stacklens")

# Outputs of `refresh` left as they are.
_UNCHANGED = dict.fromkeys(
    ("status", "updated", "summary", "elements", "links", "events", "topology", "rendered"),
    no_update,
)


def layout(**_query: str) -> html.Div:
    """Static skeleton; the refresh callback fills it on load and on every interval tick."""
    return html.Div(
        className="page",
        children=[
            dcc.Store(id=ids.FABRIC_TOPOLOGY_DIGEST),
            dcc.Store(id=ids.FABRIC_RENDERED_DIGEST),
            html.Div(id=ids.FABRIC_STATUS, role="status"),
            html.Section(
                className="card",
                children=[
                    components.card_head("InfiniBand fabric", ids.FABRIC_UPDATED),
                    html.P(id=ids.FABRIC_SUMMARY, className="summary"),
                    cyto.Cytoscape(
                        id=ids.FABRIC_GRAPH,
                        className="fabric-graph",
                        elements=[],
                        layout={"name": "preset", "fit": True, "padding": 24},
                        stylesheet=cyto_style.stylesheet(),
                        style={"width": "100%", "height": "560px"},
                        minZoom=0.1,
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


def _legend() -> html.Div:
    """Key of the link colours (cyto_style's scale)."""
    swatch = "legend-swatch"
    scale = cyto_style.UTILISATION_SCALE
    return html.Div(
        className="legend",
        children=[
            html.Span("Link utilisation: "),
            html.Span("0 %", className="subtle"),
            html.Span(
                className=f"{swatch} legend-scale",
                style={"background": f"linear-gradient(90deg, {', '.join(scale)})"},
            ),
            html.Span("100 %", className="subtle"),
            html.Span(className=swatch, style={"background": cyto_style.UNKNOWN_COLOUR}),
            html.Span("unknown"),
            html.Span(className=swatch, style={"background": cyto_style.ERROR_COLOUR}),
            html.Span("errors in the last sweep"),
            html.Span(className=f"{swatch} legend-down"),
            html.Span("down"),
        ],
    )


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app` (per app, so several apps can coexist)."""
    dash_app.callback(
        output={
            "status": Output(ids.FABRIC_STATUS, "children"),
            "updated": Output(ids.FABRIC_UPDATED, "children"),
            "summary": Output(ids.FABRIC_SUMMARY, "children"),
            "elements": Output(ids.FABRIC_GRAPH, "elements"),
            "links": Output(ids.FABRIC_LINKS_TABLE, "children"),
            "events": Output(ids.FABRIC_EVENTS_TABLE, "children"),
            "topology": Output(ids.FABRIC_TOPOLOGY_DIGEST, "data"),
            "rendered": Output(ids.FABRIC_RENDERED_DIGEST, "data"),
        },
        inputs={"_tick": Input(ids.REFRESH_INTERVAL, "n_intervals")},
        state={
            "drawn": State(ids.FABRIC_TOPOLOGY_DIGEST, "data"),
            "rendered": State(ids.FABRIC_RENDERED_DIGEST, "data"),
        },
    )(refresh)
    dash_app.callback(
        Output(ids.FABRIC_HOVER, "children"),
        Input(ids.FABRIC_GRAPH, "mouseoverEdgeData"),
        Input(ids.FABRIC_GRAPH, "mouseoverNodeData"),
        prevent_initial_call=True,
    )(hover_text)


def refresh(_tick: int | None, drawn: str | None, rendered: str | None) -> dict:
    """Fetch the topology, link loads and events and render them, unless they are what the
    page already shows (`rendered` digest); redraw the graph with new positions only when the
    topology's shape differs from the drawn one (`drawn` digest), else patch data/classes."""
    client = api.current_client()
    try:
        topology = client.fabric_topology()
        loads = client.fabric_links()
        events = client.fabric_events(components.MAX_EVENT_ROWS)
    except ApiError as exc:
        return {**_UNCHANGED, "status": components.notice(str(exc), "error")}
    always = {
        "status": None if topology.nodes else components.no_fabric_notice(),
        "updated": f"updated {datetime.now(UTC):%H:%M:%S} UTC",
    }
    shown = digest((topology, loads, events))
    if shown == rendered:
        return {**_UNCHANGED, **always}
    shape = digest(_shape(topology))
    elements: list[dict[str, Any]] | Patch
    if shape != drawn:
        elements = cyto_style.elements(topology, loads)
    else:
        elements = Patch()
        for i, update in enumerate(cyto_style.element_updates(topology, loads)):
            elements[i]["data"] = update["data"]
            elements[i]["classes"] = update["classes"]
    return {
        **always,
        "summary": components.fabric_summary(topology, loads),
        "elements": elements,
        "links": components.fabric_links_table_markdown(loads),
        "events": components.fabric_events_markdown(events),
        "topology": shape,
        "rendered": shown,
    }


def hover_text(edge: dict | None, node: dict | None) -> str:
    """What the mouse last pointed at: a link's ends, utilisation, busier direction's rate
    and errors (`title` of its data), or a node's name and kind."""
    if ctx.triggered_id is None:
        raise PreventUpdate
    pointed = ctx.triggered[0]["prop_id"].endswith("mouseoverEdgeData")
    if pointed and edge:
        return str(edge.get("title", ""))
    if not pointed and node:
        return f"{node.get('label', '')} ({node.get('kind', '')}, GUID {node.get('id', '')})"
    return ""


def _shape(topology: Topology) -> tuple:
    """What fixes the drawing: the nodes (in order) and each link's ends, not their state."""
    return (
        tuple((n.guid, n.type) for n in topology.nodes),
        tuple((lk.id, lk.a.guid, lk.b.guid) for lk in topology.links),
    )
