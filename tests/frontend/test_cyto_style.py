"""Pure pieces of the Fabric page: the layout rule (tiers by hop distance from the HCAs),
the elements of the full and the aggregated view, and the links / events Markdown tables
(the browser paints and shows them in tests/e2e/test_fabric_page.py)."""

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


def _node(guid: str, name: str, kind: str, gone: bool = False) -> api_models.FabricNode:
    return FabricNode(guid, name, kind, 1, 0, gone, 5 if gone else None, 0)


def _link(i: int, a: str, b: str, state: str = "up") -> api_models.FabricLink:
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
        samples=2,
        a_to_b_bytes=None,
        b_to_a_bytes=None,
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
        xmit_wait_per_s=None,
    )


def test_full_view_has_every_node_and_link_with_positions():
    elements = cyto_style.elements(TOPOLOGY)
    where = cyto_style.positions(TOPOLOGY)
    nodes = [e for e in elements if "source" not in e["data"]]
    edges = [e for e in elements if "source" in e["data"]]
    assert [n["data"]["id"] for n in nodes] == ["sw9", "spine", "leaf2", "leaf1", "h3", "h2", "h1"]
    assert all(n["position"] == where[n["data"]["id"]] for n in nodes)
    assert [n["classes"] for n in nodes] == [*["switch"] * 4, "hca", "hca gone", "hca"]
    assert [(e["data"]["id"], e["data"]["links"], e["classes"]) for e in edges] == [
        ("link-1", [1], "link up"),
        ("link-2", [2], "link down"),
        ("link-3", [3], "link up"),
        ("link-4", [4], "link up"),
        ("link-5", [5], "link up"),
    ]
    assert edges[0]["data"]["ends"] == "h1[1] - leaf1[1]"
    assert nodes[6]["data"]["search"] == "h1 h1"


def test_aggregated_view_folds_hosts_into_their_leaf_and_expands_one():
    assert cyto_style.folds(TOPOLOGY, 2) and not cyto_style.folds(TOPOLOGY, 3)
    elements = cyto_style.elements(TOPOLOGY, fold=True)
    ids = [e["data"]["id"] for e in elements]
    assert ids == ["sw9", "spine", "leaf2", "leaf1", "group-leaf2", "group-leaf1",
                   "link-4", "link-5", "bundle-leaf1", "bundle-leaf2"]  # fmt: skip
    group = elements[ids.index("group-leaf1")]
    assert group["data"]["label"] == "2 hosts (1 gone)" and group["data"]["count"] == 2
    assert group["data"]["members"] == {"h2": "h2", "h1": "h1"}
    where = cyto_style.positions(TOPOLOGY)
    assert group["position"] == {"x": 0.5 * HCA_GAP, "y": where["h1"]["y"]}  # under leaf1
    bundle = elements[ids.index("bundle-leaf1")]
    assert (bundle["data"]["source"], bundle["data"]["target"]) == ("leaf1", "group-leaf1")
    assert bundle["data"]["links"] == [1, 2]
    assert elements[ids.index("leaf1")]["classes"] == "switch folded"
    # leaf1 expanded: its hosts and their links are back, leaf2's stay folded.
    open_one = [e["data"]["id"] for e in cyto_style.elements(TOPOLOGY, {"leaf1"}, fold=True)]
    assert open_one == ["sw9", "spine", "leaf2", "leaf1", "h2", "h1", "group-leaf2",
                        "link-1", "link-2", "link-4", "link-5", "bundle-leaf2"]  # fmt: skip


def test_links_grid_rows_say_unknown_and_the_page_they_are():
    page = api_models.LinkPage(
        links=[_load(1, 0.25, errors=3), _load(2, None)],
        page=api_models.PageInfo(total=5, limit=2, next_cursor="c2"),
        sort="utilisation",
        from_ns=None,
        to_ns=None,
        freshness=api_models.Freshness(
            last_sweep_ns=2, sweep_interval_ns=None, stale_after_ns=3, stale=False
        ),
    )
    rows = components.fabric_link_rows(page)
    assert rows[0] == {
        "id": 1,
        "link": "h1[1] - leaf1[1]",
        "state": "up",
        "utilisation": "25.0 %",
        "a_to_b": "953.67 MiB/s",  # in units, exact on hover
        "a_to_b_exact": "1000000000 bytes/s",
        "b_to_a": "0 B/s",
        "b_to_a_exact": "0 bytes/s",
        "capacity": "3.73 GiB/s",
        "capacity_exact": "4000000000 bytes/s",
        "errors": "3 (some ?)",  # rcv errors unknown, the others not in this load
        "error_detail": "Symbol errors: 3, Link error recovery: ?, Link downed: ?, "
        "Rcv errors: ?, Xmit discards: ?, VL15 dropped: ?",
        "xmit_wait": "?",
        "sampled": "1970-01-01 00:00:02 UTC",
    }
    assert (rows[1]["state"], rows[1]["utilisation"], rows[1]["a_to_b"]) == ("down", "?", "?")
    caption = components.fabric_links_caption(page, 101, "over the last 5 min")
    assert caption == (
        "links 101–102 of 5, busiest first, over the last 5 min (? = unknown; a down link "
        "has no rate)"
    )


def test_events_table_says_start_end_and_open():
    events = [
        FabricEvent(2, "link_down", "h2[1] - leaf1[2]", 3_000_000_000, None, 2, {}),
        FabricEvent(1, "error_burst", "h1[1]", 1_000_000_000, 2_000_000_000, 1, {}),
    ]
    lines = components.fabric_events_markdown(events, 7, "over the last 5 min").splitlines()
    assert lines[0] == "2 of 7 fabric events over the last 5 min, newest first."
    assert lines[4:] == [
        "| 1970-01-01 00:00:03 UTC | open | link&#95;down | h2&#91;1&#93; - leaf1&#91;2&#93; |",
        "| 1970-01-01 00:00:01 UTC | 1970-01-01 00:00:02 UTC | error&#95;burst | h1&#91;1&#93; |",
    ]


def test_a_congested_link_is_marked_apart_from_its_utilisation_with_a_legend():
    """Congestion (PortXmitWait at or above the threshold; the painter, assets/fabric.js,
    sets the class) is a halo around the link's own utilisation colour: a link waiting at
    4 % is not drawn like an idle one. The legend says what the halo means, with the
    threshold."""
    rules = {rule["selector"]: rule["style"] for rule in cyto_style.stylesheet()}
    assert rules["edge.congested, node.group.congested"] == {
        "underlay-color": "#fdb022", "underlay-padding": 5, "underlay-opacity": 0.9,
    }  # fmt: skip
    assert not any("underlay-color" in style for selector, style in rules.items()
                   if "congested" not in selector)  # fmt: skip
    legend = components.fabric_legend(1_000_000.0)
    texts = [c.children for c in legend.children if isinstance(c.children, str)]
    assert "congested: PortXmitWait ≥ 1,000,000 ticks/s (data waiting to be sent, at any " \
        "utilisation)" in texts  # fmt: skip
    (halo,) = [c for c in legend.children if "legend-congested" in getattr(c, "className", "")]
    assert halo.style == {"background": "#9ecae1", "boxShadow": "0 0 0 3px #fdb022"}
    assert texts[:2] == ["Link utilisation (log: one step per decade; quantiles: rank): ",
                         "≤0.01 %"]  # fmt: skip
