"""Every report figure reads without hovering (a PDF has no hover): the topology figure has
a title, axis titles naming its levels, a legend for its link and node traces, and the
switches' names beside them on a small fabric; a link whose senders wait (PortXmitWait at
the congestion threshold) at low utilisation is drawn apart from an idle one, with its
legend entry."""

from __future__ import annotations

from presentation import report_figures as figures


def _node(guid: str, name: str, kind: str) -> dict:
    return {"guid": guid, "name": name, "type": kind}


def _link(link_id: int, a: dict, b: dict) -> dict:
    return {"id": link_id, "a": {"guid": a["guid"], "name": a["name"], "port": 1},
            "b": {"guid": b["guid"], "name": b["name"], "port": 2}}  # fmt: skip


def test_the_topology_figure_is_labelled():
    spine = _node("s", "spine1", "switch")
    leaf = _node("l", "leaf1", "switch")
    hosts = [_node(f"h{i}", f"host{i} HCA-1", "hca") for i in range(2)]
    links = [_link(1, spine, leaf), *(_link(2 + i, leaf, h) for i, h in enumerate(hosts))]
    fig = figures.topology([spine, leaf, *hosts], links, {1: 0.95}, {"host0"}, waiting={1: 0.0},
                           congested_from=1e6)  # fmt: skip
    layout = fig.layout
    assert layout.title.text == (
        "Fabric topology: links coloured by their peak load, congested ones haloed"
    )
    assert layout.xaxis.title.text == "the nodes of each level, by name"
    assert layout.yaxis.title.text == "level"
    assert list(layout.yaxis.ticktext) == ["hosts", "leaf switches", "spine switches"]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["other links", "peak ≥ 80 %", "nodes", "these hosts"], legend
    (names,) = [t for t in fig.data if t.mode == "text"]
    assert sorted(names.text) == ["leaf1", "spine1"]


def test_a_congested_link_at_low_utilisation_is_not_drawn_as_an_idle_one():
    spine = _node("s", "spine1", "switch")
    leaf = _node("l", "leaf1", "switch")
    host = _node("h", "host1", "hca")
    links = [_link(1, spine, leaf), _link(2, leaf, host)]
    # the spine link waits 5 M ticks/s at 4 %; the host link is idle
    fig = figures.topology([spine, leaf, host], links, {1: 0.04, 2: 0.0}, set(),
                           waiting={1: 5e6, 2: 0.0}, congested_from=1e6)  # fmt: skip
    drawn = {t.name: t for t in fig.data if t.mode == "lines"}
    assert list(drawn) == ["other links", "congested (PortXmitWait ≥ 1,000,000 ticks/s)",
                           "peak < 20 %"]  # fmt: skip
    halo = drawn["congested (PortXmitWait ≥ 1,000,000 ticks/s)"]
    assert (halo.line.color, halo.line.width, halo.opacity) == ("#fdb022", 11, 0.75)
    assert [t for t in halo.text if t] == ["spine1[1] – leaf1[2]: peak 4 %, PortXmitWait "
                                           "5,000,000 ticks/s"] * 3  # fmt: skip
    both = [t for t in drawn["peak < 20 %"].text if t]
    assert both == ["spine1[1] – leaf1[2]: peak 4 %, PortXmitWait 5,000,000 ticks/s"] * 3 + [
        "leaf1[1] – host1[2]: peak 0 %, PortXmitWait 0 ticks/s"] * 3  # fmt: skip
    assert halo.showlegend is not False
    # nothing congested: no halo, no legend entry for it
    calm = figures.topology([spine, leaf, host], links, {1: 0.04, 2: 0.0}, set(),
                            waiting={1: 999_999.0, 2: None}, congested_from=1e6)  # fmt: skip
    assert [t.name for t in calm.data if t.mode == "lines"] == ["other links", "peak < 20 %"]
