"""Pure pieces of the Fabric page: the layout rule (tiers by hop distance from the HCAs),
link colours, the elements a refresh patches, and the links / events Markdown tables (the
browser shows them in tests/e2e/test_fabric_page.py)."""

from __future__ import annotations

from frontend import components, cyto_style
from frontend.cyto_style import HCA_GAP, TIER_GAP
from stacklens import api_models
from stacklens.api_models import LinkLoad
from tests.frontend import positional

FabricEvent = positional(api_models.FabricEvent)
FabricLink = positional(api_models.FabricLink)
FabricNode = positional(api_models.FabricNode)
FabricTopology = positional(api_models.Topology)
LinkEnd = positional(api_models.LinkEnd)


def _node(guid: str, name: str, kind: str, gone: bool = False) -> FabricNode:
    return FabricNode(guid, name, kind, 1, 0, gone, 5 if gone else None, 0)


def _link(i: int, a: str, b: str, state: str = "up") -> FabricLink:
    return FabricLink(i, LinkEnd(a, 1, a), LinkEnd(b, i, b), state, None, 4_000_000_000)


#: spine -- leaf1 (h1, h2), spine -- leaf2 (h3), an unconnected switch sw9.
TOPOLOGY = FabricTopology(
    nodes=(
        _node("sw9", "sw9", "switch"),
        _node("spine", "spine", "switch"),
        _node("leaf2", "leaf2", "switch"),
        _node("leaf1", "leaf1", "switch"),
        _node("h3", "h3", "hca"),
        _node("h2", "h2", "hca", gone=True),
        _node("h1", "h1", "hca"),
    ),
    links=(
        _link(1, "h1", "leaf1"),
        _link(2, "h2", "leaf1", state="down"),
        _link(3, "h3", "leaf2"),
        _link(4, "leaf1", "spine"),
        _link(5, "leaf2", "spine"),
    ),
)


def test_positions_put_switches_in_tiers_above_their_hosts():
    # Tiers: HCAs 0, leaves 1, spine 2, sw9 (no HCA reaches it) on top, 3.
    assert cyto_style.positions(TOPOLOGY) == {
        "h1": {"x": 0.0, "y": 3.0 * TIER_GAP},
        "h2": {"x": 1.0 * HCA_GAP, "y": 3.0 * TIER_GAP},
        "h3": {"x": 2.0 * HCA_GAP, "y": 3.0 * TIER_GAP},
        "leaf1": {"x": 0.5 * HCA_GAP, "y": 2.0 * TIER_GAP},  # above the middle of h1, h2
        "leaf2": {"x": 2.0 * HCA_GAP, "y": 2.0 * TIER_GAP},
        "spine": {"x": 1.0 * HCA_GAP, "y": 1.0 * TIER_GAP},  # one node: the middle
        "sw9": {"x": 1.0 * HCA_GAP, "y": 0.0},
    }


def test_utilisation_colours():
    colour = cyto_style.utilisation_colour
    assert colour(0.0) == cyto_style.UTILISATION_SCALE[0]
    assert colour(1.0) == colour(1.7) == cyto_style.UTILISATION_SCALE[-1]
    assert colour(0.5) == "#4690c6"  # halfway between #6baed6 and #2171b5
    assert colour(None) == cyto_style.UNKNOWN_COLOUR


def _load(i: int, utilisation: float | None, errors: int = 0) -> LinkLoad:
    link = TOPOLOGY.links[i - 1]
    rate = None if utilisation is None else utilisation * 4e9
    return LinkLoad(
        id=i,
        a=link.a,
        b=link.b,
        state=link.state,
        capacity_bytes_per_s=4_000_000_000,
        ts_ns=2_000_000_000,
        a_to_b_bytes_per_s=rate,
        b_to_a_bytes_per_s=0.0 if rate is not None else None,
        a_to_b_pkts_per_s=None,
        b_to_a_pkts_per_s=None,
        utilisation=utilisation,
        errors={"symbol_errors": errors, "rcv_errors": None},
        errors_total=errors,
        saturated=(),
        unknown=("rcv_errors",),
        xmit_wait=None,
    )


def test_element_updates_carry_state_in_classes_and_data():
    loads = [_load(1, 0.25, errors=3), _load(2, None), _load(3, 0.0), _load(4, 1.0)]
    elements = cyto_style.elements(TOPOLOGY, loads)
    updates = cyto_style.element_updates(TOPOLOGY, loads)
    # Same order, same data and classes; only `elements` carries positions.
    assert [{k: e[k] for k in ("data", "classes")} for e in elements] == updates
    assert elements[0]["position"] == {"x": 1.0 * HCA_GAP, "y": 0.0}
    assert [u["classes"] for u in updates] == [
        *["switch"] * 4,
        "hca",
        "hca gone",
        "hca",
        "link up error",
        "link down unknown",
        "link up",
        "link up",
        "link up unknown",  # no load row for link 5
    ]
    assert updates[7]["data"] == {
        "id": "link-1",
        "source": "h1",
        "target": "leaf1",
        "colour": cyto_style.utilisation_colour(0.25),
        "width": 3.5,
        "title": "h1[1] - leaf1[1]: 25.0% (953.67 MiB/s), 3 errors",
    }


def test_links_table_lists_errors_then_down_then_busiest_and_marks_unknown():
    loads = [_load(3, 0.0), _load(4, 1.0), _load(2, None), _load(1, 0.25, errors=3)]
    lines = components.fabric_links_table_markdown(loads).splitlines()
    assert lines[0].startswith("4 links: with errors in the last sweep first, then down")
    rows = lines[4:]
    assert [r.split(" | ")[0] for r in rows] == [
        "| h1&#91;1&#93; - leaf1&#91;1&#93;",
        "| h2&#91;1&#93; - leaf1&#91;2&#93;",
        "| leaf1&#91;1&#93; - spine&#91;4&#93;",
        "| h3&#91;1&#93; - leaf2&#91;3&#93;",
    ]
    assert rows[0].split(" | ")[1:] == [
        "up",
        "25.0 %",
        "1000000000",
        "0",
        "4000000000",
        "3",  # symbol errors
        "?",  # link error recovery: not in this load at all
        "?",
        "?",  # rcv errors: unknown
        "?",
        "?",
        "?",  # xmit wait unknown
        "1970-01-01 00:00:02 UTC |",
    ]


def test_events_table_and_summary():
    events = [FabricEvent(2, 3_000_000_000, "link_down", "h2[1] - leaf1[2]", {})]
    assert components.fabric_events_markdown(events).splitlines()[4] == (
        "| 1970-01-01 00:00:03 UTC | link&#95;down | h2&#91;1&#93; - leaf1&#91;2&#93; |"
    )
    loads = [_load(1, 0.25, errors=3), _load(4, 1.0)]
    assert components.fabric_summary(TOPOLOGY, loads) == (
        "7 nodes (4 switches, 3 HCAs, 1 gone) · 5 links (1 down) · "
        "1 with errors in the last sweep · busiest link 100.0 %"
    )
