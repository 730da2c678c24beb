"""Every report figure reads without hovering (a PDF has no hover): the topology figure has
a title, axis titles naming its levels, a legend for its link and node traces, and the
switches' names beside them on a small fabric."""

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
    fig = figures.topology([spine, leaf, *hosts], links, {1: 0.95}, {"host0"})
    layout = fig.layout
    assert layout.title.text == "Fabric topology: links coloured by their peak load"
    assert layout.xaxis.title.text == "the nodes of each level, by name"
    assert layout.yaxis.title.text == "level"
    assert list(layout.yaxis.ticktext) == ["hosts", "leaf switches", "spine switches"]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["other links", "peak ≥ 80 %", "nodes", "these hosts"], legend
    (names,) = [t for t in fig.data if t.mode == "text"]
    assert sorted(names.text) == ["leaf1", "spine1"]
