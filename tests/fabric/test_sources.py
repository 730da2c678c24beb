"""Swappable sources: replay round trip, topology arithmetic (pyverbs: test_verbs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collector.fabric.counters import RawSweep
from collector.fabric.replay import ReplaySource, record
from collector.fabric.topology import Link, Node, NodeType, Port, Topology, capacity_bytes_per_s
from stacklens.constants import PORT_COUNTERS


def test_replay_round_trip(tmp_path: Path):
    values = np.arange(2 * len(PORT_COUNTERS), dtype=np.uint64).reshape(2, -1)
    values[1, 0] = 0xFFFFFFFF
    original = RawSweep.from_words(
        [0x1, 0xFFFF_FFFF_FFFF_FFFE],
        [3, 7],
        values,
        np.array([True, False]),
        np.array([True, True]),
        10,
        20,
    )
    path = tmp_path / "rec.jsonl"
    record(original, path)
    record(original, path)
    src = ReplaySource(path)
    src.discover()
    for _ in range(2):
        got = src.sweep()
        assert got.guids.tolist() == original.guids.tolist()
        assert got.ports.tolist() == [3, 7]
        assert np.array_equal(got.values, original.values)
        assert np.array_equal(got.saturated, original.saturated) and got.saturated[1, 0]
        assert got.extended.tolist() == [True, False]
        assert (got.t_start_ns, got.t_end_ns) == (10, 20)
    with pytest.raises(EOFError):
        src.sweep()


def test_capacity_from_width_and_speed():
    assert capacity_bytes_per_s(2, 4) == 4_000_000_000  # 4x QDR
    assert capacity_bytes_per_s(2, 1) == 1_000_000_000  # 4x SDR
    assert capacity_bytes_per_s(2, 4, 1) == 6_818_181_818  # 4x FDR (14.0625 Gb/s, 64b/66b)
    assert capacity_bytes_per_s(2, 4, 0, 1) == 5_000_000_000  # 4x FDR10
    assert capacity_bytes_per_s(2, 4, 2) == 12_500_000_000  # 4x EDR
    assert capacity_bytes_per_s(2, 4, 4, 1) == 25_000_000_000  # 4x HDR (FDR10 bit ignored)
    assert capacity_bytes_per_s(2, 4, 8) == 50_000_000_000  # 4x NDR
    assert capacity_bytes_per_s(8, 4, 4) == 75_000_000_000  # 12x HDR
    assert capacity_bytes_per_s(0, 4) == 0


def _topo(links: list[Link], names: dict[int, str]) -> Topology:
    nodes = {g: Node(g, NodeType.CA, n, 1) for g, n in names.items()}
    ports = {
        end: Port(end[0], end[1], end[0], 1, 4, 5, 2, 4, 0, 4_000_000_000)
        for lk in links
        for end in (lk.a, lk.b)
    }
    return Topology(nodes, ports, links)


def test_diff_reports_links_and_nodes():
    names = {1: "a", 2: "b", 3: "c"}
    before = _topo([Link.of((1, 1), (2, 1)), Link.of((2, 2), (3, 1))], names)
    after = _topo([Link.of((1, 1), (2, 1))], {1: "a", 2: "b"})
    changes = before.diff(after)
    assert [(c.kind, c.subject) for c in changes] == [
        ("node_gone", "c"),
        ("link_down", "b[2] - c[1]"),
    ]
    assert [(c.kind, c.subject) for c in after.diff(before)] == [
        ("node_new", "c"),
        ("link_up", "b[2] - c[1]"),
    ]
