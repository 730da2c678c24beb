# frontend/cyto_style.py — pure builders of the fabric graph: positions, cytoscape elements,
# stylesheet and link colours (API data in, plain dicts out, no I/O).
"""The fabric topology drawn with dash-cytoscape.

Positions are computed once per topology (`positions`, used with the `preset` layout); the
elements are built once per discovery (or expanded group); every sweep, the page's painter
(assets/fabric.js, in the browser) colours them from the shared fabric state.

Layout rule: a node's tier is its hop distance from the nearest HCA over the links (down
ones included, so a cable going down does not move anything): HCAs at the bottom, the
switches they plug into (leaves) above them, the next tier (spines) above those; switches no
HCA reaches go on top. HCAs are grouped under the switch they plug into; a leaf sits above
the middle of its HCAs; the higher tiers are spread evenly over the width, by name.

Above a size the view is aggregated (`elements(fold=True)`): HCAs fold into one group per
leaf, with its count, coloured by its hottest link; a click expands it.

Colours: a link's colour runs from light to dark blue with its utilisation (the busier
direction's bytes/s over its capacity) on a log scale (one step per decade from 0.01 %) or
by quantile, grey while unknown; red (and thicker) if it had errors in the last sweep; grey
and dashed while down. A congested link (its ends' PortXmitWait at or above the incident
detector's threshold: data waiting to be sent, whatever its utilisation) keeps its colour
and gets an amber halo, as does a host group with a congested link. Gone nodes are faded
and dashed.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque

from stacklens.api_models import Topology

#: Horizontal distance between neighbouring HCAs, and at least between any two nodes of a
#: tier; vertical distance between tiers (cytoscape model units; the view is fitted).
HCA_GAP = 48
MIN_GAP = 60
TIER_GAP = 240
#: Utilisation colour scale, low -> high (sequential blues), and the other link colours.
UTILISATION_SCALE = ("#deebf7", "#9ecae1", "#4292c6", "#2171b5", "#08306b")
#: The log scale's lowest utilisation (its colour: the scale's first); one colour step per
#: decade up to 100 %.
LOG_MIN = 1e-4
#: The "hot" filter keeps the busiest this share of the links with a known load.
HOT_SHARE = 0.05
#: Labels rendered smaller than this (pixels) are not drawn.
MIN_LABEL_PX = 6
UNKNOWN_COLOUR = "#b8c0cc"
ERROR_COLOUR = "#d92d20"
DOWN_COLOUR = "#98a2b3"
#: The halo of a congested link or host group (around its own colour).
CONGESTED_COLOUR = "#fdb022"
CONGESTED_HALO_PX = 5


def _natural(name: str) -> tuple:
    """Sort key putting leaf2 before leaf10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def positions(topology: Topology) -> dict[str, dict[str, float]]:
    """{guid: {"x", "y"}} of every node by the layout rule (module docstring)."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for link in topology.links:
        if link.a.guid != link.b.guid:
            neighbours[link.a.guid].add(link.b.guid)
            neighbours[link.b.guid].add(link.a.guid)
    nodes = {n.guid: n for n in topology.nodes}
    tier: dict[str, int] = {g: 0 for g, n in nodes.items() if n.type == "hca"}
    queue = deque(tier)
    while queue:
        guid = queue.popleft()
        for other in neighbours[guid]:
            if other in nodes and other not in tier:
                tier[other] = tier[guid] + 1
                queue.append(other)
    top = max([t for t in tier.values()] + [0]) + 1
    for guid in nodes:
        tier.setdefault(guid, top)  # switches no HCA reaches (and routers alone)
    name = {g: _natural(n.name) for g, n in nodes.items()}

    # Tier 1 (leaves) by name; HCAs grouped under their first leaf, then by name.
    leaves = sorted((g for g in nodes if tier[g] == 1), key=lambda g: (name[g], g))
    leaf_rank = {g: i for i, g in enumerate(leaves)}

    def hca_key(g: str) -> tuple:
        ups = [leaf_rank[o] for o in neighbours[g] if o in leaf_rank]
        return (min(ups) if ups else len(leaves), name[g], g)

    x: dict[str, float] = {}
    hcas = sorted((g for g in nodes if tier[g] == 0), key=hca_key)
    for i, g in enumerate(hcas):
        x[g] = i * HCA_GAP
    previous = None
    for g in leaves:
        below = [x[o] for o in neighbours[g] if tier.get(o) == 0]
        want = sum(below) / len(below) if below else (previous or 0) + MIN_GAP
        x[g] = want if previous is None else max(want, previous + MIN_GAP)
        previous = x[g]
    span = (min(x.values()), max(x.values())) if x else (0.0, 0.0)
    for t in range(2, top + 1):
        row = sorted((g for g in nodes if tier[g] == t), key=lambda g: (name[g], g))
        width = max(span[1] - span[0], MIN_GAP * (len(row) - 1))
        middle = (span[0] + span[1]) / 2
        step = width / (len(row) - 1) if len(row) > 1 else 0
        for i, g in enumerate(row):
            x[g] = middle - width / 2 + i * step if len(row) > 1 else middle
    return {g: {"x": float(x[g]), "y": float((top - tier[g]) * TIER_GAP)} for g in nodes}


def hca_leaves(topology: Topology) -> dict[str, str]:
    """{HCA guid: the switch it plugs into (its first, by name)} of every connected HCA."""
    nodes = {n.guid: n for n in topology.nodes}
    ups: dict[str, list[str]] = defaultdict(list)
    for link in topology.links:
        for x, y in ((link.a.guid, link.b.guid), (link.b.guid, link.a.guid)):
            if nodes.get(x) and nodes[x].type == "hca" and nodes.get(y) and nodes[y].type != "hca":
                ups[x].append(y)
    return {h: min(up, key=lambda g: (_natural(nodes[g].name), g)) for h, up in ups.items()}


def folds(topology: Topology, fold_above: int) -> bool:
    """Whether the page shows this fabric aggregated: more than `fold_above` HCAs."""
    return sum(n.type == "hca" for n in topology.nodes) > fold_above


def elements(
    topology: Topology, expanded: set[str] | None = None, fold: bool = False
) -> list[dict]:
    """The cytoscape elements of the graph with their positions: every node and link, or,
    with `fold`, the aggregated view — every switch and switch-to-switch link, and the HCAs
    of each leaf folded into one group node (`group-<leaf guid>`, its label the host count)
    joined to the leaf by one bundle edge (`bundle-<leaf guid>`), unless the leaf's guid is
    in `expanded`. Every edge's `data.links` lists the link ids it stands for (the page
    colours it by the hottest); every node's `data.search` is what the search box matches
    (name and GUID), a group's `data.members` its hosts' names and GUIDs."""
    expanded = expanded or set()
    where = positions(topology)
    leaf_of = hca_leaves(topology) if fold else {}
    folded = {h: leaf for h, leaf in leaf_of.items() if leaf not in expanded}
    members: dict[str, list] = defaultdict(list)
    for n in topology.nodes:
        if n.guid in folded:
            members[folded[n.guid]].append(n)
    out: list[dict] = []
    for n in topology.nodes:
        if n.guid in folded:
            continue
        classes = f"{n.type} gone" if n.gone else n.type
        if n.guid in members:
            classes += " folded"
        out.append(
            {
                "data": {"id": n.guid, "label": n.name, "kind": n.type,
                         "search": f"{n.name} {n.guid}".lower()},
                "classes": classes,
                "position": where[n.guid],
            }
        )  # fmt: skip
    for leaf, hosts in members.items():
        xs = [where[h.guid]["x"] for h in hosts]
        gone = sum(h.gone for h in hosts)
        out.append(
            {
                "data": {
                    "id": f"group-{leaf}",
                    "label": f"{len(hosts)} hosts" + (f" ({gone} gone)" if gone else ""),
                    "kind": "group",
                    "leaf": leaf,
                    "count": len(hosts),
                    "members": {h.name.lower(): h.guid for h in hosts},
                    "colour": UNKNOWN_COLOUR,
                },
                "classes": "group",
                "position": {"x": sum(xs) / len(xs), "y": where[hosts[0].guid]["y"]},
            }
        )
    bundles: dict[str, list[int]] = defaultdict(list)
    for link in topology.links:
        host = next((g for g in (link.a.guid, link.b.guid) if g in folded), None)
        if host is not None:
            bundles[folded[host]].append(link.id)
            continue
        out.append(
            {
                "data": {
                    "id": f"link-{link.id}",
                    "source": link.a.guid,
                    "target": link.b.guid,
                    "links": [link.id],
                    "ends": f"{link.a.label()} - {link.b.label()}",
                    "colour": UNKNOWN_COLOUR,
                    "width": 2,
                },
                "classes": f"link {link.state}" + (" fast" if fold else ""),
            }
        )
    for leaf, ids in bundles.items():
        out.append(
            {
                "data": {
                    "id": f"bundle-{leaf}",
                    "source": leaf,
                    "target": f"group-{leaf}",
                    "links": ids,
                    "ends": f"{len(ids)} host links",
                    "colour": UNKNOWN_COLOUR,
                    "width": 4,
                },
                "classes": "link bundle up fast",
            }
        )
    return out


def paint_config() -> dict:
    """What the page's painter (assets/fabric.js) colours with: the scale and the other
    link colours, the log scale's decades, the share of links the "hot" filter keeps."""
    return {
        "scale": list(UTILISATION_SCALE),
        "unknown": UNKNOWN_COLOUR,
        "error": ERROR_COLOUR,
        "log_min": LOG_MIN,
        "hot_share": HOT_SHARE,
    }


def stylesheet() -> list[dict]:
    """The cytoscape stylesheet: switches as rounded boxes above HCAs as small circles and
    host groups as boxes coloured by their hottest link (labels only where readable),
    links coloured by `data(colour)`;
    error, congested, down, gone, dimmed (filtered out), stale (no recent sweep), job
    (highlighted job's) and focused (searched, or in the URL) classes."""
    return [
        {
            "selector": "node",
            "style": {
                "label": "data(label)",
                # no label drawn while it would be under this many pixels (a whole large
                # fabric fitted): cytoscape then skips them, labels show when zoomed in
                "min-zoomed-font-size": MIN_LABEL_PX,
                "font-size": 12,
                "color": "#1f2a37",
                "text-valign": "bottom",
                "text-margin-y": 4,
                "background-color": "#5b6675",
                "width": 14,
                "height": 14,
            },
        },
        {
            "selector": "node.switch",
            "style": {
                "shape": "round-rectangle",
                "background-color": "#0f1b2d",
                "width": 48,
                "height": 22,
                "font-size": 15,
                "font-weight": 600,
                "text-background-color": "#fbfcfe",  # the graph's background: labels stay
                "text-background-opacity": 0.9,  # readable over the links they sit on
                "text-background-padding": 2,
                "text-valign": "top",
                "text-margin-y": -4,
            },
        },
        {"selector": "node.hca", "style": {"shape": "ellipse", "font-size": 11}},
        {
            "selector": "node.gone",
            "style": {
                "opacity": 0.45,
                "border-width": 2,
                "border-style": "dashed",
                "border-color": ERROR_COLOUR,
            },
        },
        {
            "selector": "edge",
            "style": {
                "curve-style": "bezier",
                "control-point-step-size": 6,
                "line-color": "data(colour)",
                "width": "data(width)",
            },
        },
        {
            "selector": "node.group",
            "style": {
                "shape": "round-rectangle",
                "background-color": "data(colour)",
                "border-width": 1,
                "border-color": "#5b6675",
                "width": 44,
                "height": 18,
                "font-size": 12,
            },
        },
        {
            "selector": "node.group.error",
            "style": {"border-color": ERROR_COLOUR, "border-width": 3},
        },
        {"selector": "edge.bundle", "style": {"line-style": "solid"}},
        # Aggregated views: straight "haystack" edges, far cheaper to draw than bezier ones
        # (one link per switch pair there, so none hides another).
        {"selector": "edge.fast", "style": {"curve-style": "haystack"}},
        {"selector": "edge.error", "style": {"line-color": ERROR_COLOUR, "width": 5}},
        # Congested: a halo around the link's own colour (utilisation and congestion are two
        # things: a link can wait at 4 % of its capacity).
        {
            "selector": "edge.congested, node.group.congested",
            "style": {
                "underlay-color": CONGESTED_COLOUR,
                "underlay-padding": CONGESTED_HALO_PX,
                "underlay-opacity": 0.9,
            },
        },
        {
            "selector": "edge.down",
            "style": {"line-color": DOWN_COLOUR, "line-style": "dashed", "width": 2},
        },
        {"selector": ".dim", "style": {"opacity": 0.12}},
        # Stale data (no sweep for a while): the last known colours, faded and dashed.
        {"selector": "edge.stale", "style": {"opacity": 0.4, "line-style": "dashed"}},
        {"selector": "node.job", "style": {"border-width": 4, "border-color": "#7a5af8"}},
        {"selector": "edge.job", "style": {"line-style": "solid", "z-index": 9}},
        {
            "selector": ".focus",
            "style": {"border-width": 4, "border-color": "#f79009", "z-index": 10},
        },
        {"selector": "edge.focus", "style": {"width": 9, "z-index": 10}},
    ]
