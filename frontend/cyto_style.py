# frontend/cyto_style.py — pure builders of the fabric graph: positions, cytoscape elements,
# stylesheet and link colours (API data in, plain dicts out, no I/O).
"""The fabric topology drawn with dash-cytoscape.

Positions are computed once per topology (`positions`, used with the `preset` layout); each
refresh only changes the elements' `data` and `classes` (`element_updates`).

Layout rule: a node's tier is its hop distance from the nearest HCA over the links (down
ones included, so a cable going down does not move anything): HCAs at the bottom, the
switches they plug into (leaves) above them, the next tier (spines) above those; switches no
HCA reaches go on top. HCAs are grouped under the switch they plug into; a leaf sits above
the middle of its HCAs; the higher tiers are spread evenly over the width, by name.

Colours: a link's colour runs from light to dark blue with its utilisation (the busier
direction's bytes/s over its capacity), grey while unknown; red (and thicker) if it had
errors in the last sweep; grey and dashed while down. Gone nodes are faded and dashed.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque

from frontend.formatting import format_bytes
from stacklens.api_models import LinkLoad, Topology

#: Horizontal distance between neighbouring HCAs, and at least between any two nodes of a
#: tier; vertical distance between tiers (cytoscape model units; the view is fitted).
HCA_GAP = 48
MIN_GAP = 60
TIER_GAP = 240
#: Utilisation colour scale, 0 -> 1 (sequential blues), and the other link colours.
UTILISATION_SCALE = ("#c6dbef", "#6baed6", "#2171b5", "#08306b")
UNKNOWN_COLOUR = "#b8c0cc"
ERROR_COLOUR = "#d92d20"
DOWN_COLOUR = "#98a2b3"


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


def utilisation_colour(utilisation: float | None) -> str:
    """Hex colour of a utilisation (0..1, clipped), linear over UTILISATION_SCALE."""
    if utilisation is None:
        return UNKNOWN_COLOUR
    u = min(max(utilisation, 0.0), 1.0) * (len(UTILISATION_SCALE) - 1)
    i = min(int(u), len(UTILISATION_SCALE) - 2)
    lo, hi = (_rgb(c) for c in UTILISATION_SCALE[i : i + 2])
    f = u - i
    return "#" + "".join(f"{round(a + (b - a) * f):02x}" for a, b in zip(lo, hi, strict=True))


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def elements(topology: Topology, loads: list[LinkLoad]) -> list[dict]:
    """All cytoscape elements (nodes, then links by id) with their positions."""
    where = positions(topology)
    out = element_updates(topology, loads)
    for element in out:
        guid = element["data"]["id"]
        if guid in where:
            element["position"] = where[guid]
    return out


def element_updates(topology: Topology, loads: list[LinkLoad]) -> list[dict]:
    """The `data` and `classes` of every element, in the same order as `elements` (nodes as
    the topology lists them, then links): what a refresh changes."""
    by_id = {x.id: x for x in loads}
    out: list[dict] = []
    for n in topology.nodes:
        out.append(
            {
                "data": {"id": n.guid, "label": n.name, "kind": n.type},
                "classes": f"{n.type} gone" if n.gone else n.type,
            }
        )
    for link in topology.links:
        load = by_id.get(link.id)
        u = load.utilisation if load else None
        errors = load.errors_total if load else 0
        classes = ["link", link.state]
        if errors:
            classes.append("error")
        if u is None:
            classes.append("unknown")
        out.append(
            {
                "data": {
                    "id": f"link-{link.id}",
                    "source": link.a.guid,
                    "target": link.b.guid,
                    "colour": utilisation_colour(u),
                    "width": round(2 + 6 * min(max(u or 0.0, 0.0), 1.0), 2),
                    "title": _link_title(link.a.label(), link.b.label(), load),
                },
                "classes": " ".join(classes),
            }
        )
    return out


def _link_title(a: str, b: str, load: LinkLoad | None) -> str:
    if load is None or load.utilisation is None:
        return f"{a} - {b}: load unknown"
    busier = max(r for r in (load.a_to_b_bytes_per_s, load.b_to_a_bytes_per_s) if r is not None)
    text = f"{a} - {b}: {load.utilisation:.1%} ({format_bytes(busier)}/s)"
    return text + (f", {load.errors_total} errors" if load.errors_total else "")


def stylesheet() -> list[dict]:
    """The cytoscape stylesheet: switches as rounded boxes above HCAs as small circles,
    links coloured by `data(colour)`; error, down, unknown and gone classes."""
    return [
        {
            "selector": "node",
            "style": {
                "label": "data(label)",
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
        {"selector": "edge.error", "style": {"line-color": ERROR_COLOUR, "width": 5}},
        {
            "selector": "edge.down",
            "style": {"line-color": DOWN_COLOUR, "line-style": "dashed", "width": 2},
        },
    ]
