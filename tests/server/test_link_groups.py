"""Groups of parallel links and the imbalance detector, as pure functions (server/fabric/
groups.py, server/incidents/detect.py): which links form a group, the skew's exact values,
an imbalance opening after STACKLENS_INCIDENT_IMBALANCE_SWEEPS sweeps, a balanced group
never, a blip never, and the end after the clear sweeps."""

from __future__ import annotations

import math

import pytest

from server.fabric.groups import group_id, groups, skew
from server.incidents.detect import GroupDetector, Signal, Thresholds, busiest, imbalanced, join

S = 10**9
TH = Thresholds(utilisation=0.8, clear=3, imbalance_sweeps=2)


def _node(guid: int, name: str, kind: str) -> dict:
    return {"guid": f"{guid:#018x}", "name": name, "type": kind}


def _link(i: int, a: tuple[int, int], b: tuple[int, int], state: str = "up") -> dict:
    return {"id": i, "a": {"guid": f"{a[0]:#018x}", "port": a[1]},
            "b": {"guid": f"{b[0]:#018x}", "port": b[1]}, "state": state}  # fmt: skip


def fabric() -> tuple[list[dict], list[dict]]:
    """spine1 (1), spine2 (2); leaf1 (3) with two links to spine1 and one to spine2; leaf2 (4)
    with one to each spine; host a with two HCAs ("a mlx5_0" on leaf1, "a mlx5_1" on leaf2),
    host b with one; a down link leaf2 - spine2 (not a member)."""
    nodes = [_node(1, "spine1", "switch"), _node(2, "spine2", "switch"),
             _node(3, "leaf1", "switch"), _node(4, "leaf2", "switch"),
             _node(10, "a mlx5_0", "hca"), _node(11, "a mlx5_1", "hca"),
             _node(12, "b mlx5_0", "hca")]  # fmt: skip
    links = [_link(1, (3, 9), (1, 1)), _link(2, (3, 10), (1, 2)), _link(3, (3, 11), (2, 1)),
             _link(4, (4, 9), (1, 3)), _link(5, (4, 10), (2, 2)),
             _link(6, (10, 1), (3, 1)), _link(7, (11, 1), (4, 1)), _link(8, (12, 1), (3, 2)),
             _link(9, (4, 11), (2, 3), state="down")]  # fmt: skip
    return nodes, links


def test_groups_of_a_fabric():
    found = groups(*fabric())
    assert [(g.kind, g.name, g.members) for g in found] == [
        ("parallel", "leaf1 – spine1", (1, 2)),
        ("uplinks", "uplinks of leaf1", (1, 2, 3)),
        ("uplinks", "uplinks of leaf2", (4, 5)),
        ("rails", "rails of a", (6, 7)),
    ]
    # ids are stable: the kind and the GUIDs (or host) that define the group
    assert found[0].id == group_id("parallel", f"{1:#018x}-{3:#018x}")
    assert found[3].id == group_id("rails", "a")
    assert all(0 <= g.id < 2**31 for g in found)


def test_skew_values():
    assert skew([0.9, 0.1]) == (pytest.approx(1.8), pytest.approx(0.8))
    mm, cv = skew([3.0, 1.0, 2.0])
    assert mm == pytest.approx(1.5)
    assert cv == pytest.approx(math.sqrt(2 / 3) / 2)
    assert skew([0.5, 0.5]) == (1.0, 0.0)
    assert skew([0.5, None]) == (None, None)  # one known member: no skew
    assert skew([0.0, 0.0]) == (None, None)  # nothing loaded: no skew


def test_imbalanced_needs_one_hot_and_one_below_half():
    assert imbalanced({1: 0.9, 2: 0.1}, TH) == (True, pytest.approx(1.8))
    assert imbalanced({1: 0.9, 2: 0.4}, TH)[0] is False  # 0.4 is half of 0.8, not below
    assert imbalanced({1: 0.79, 2: 0.0}, TH)[0] is False  # none at the threshold
    assert imbalanced({1: 0.9, 2: None}, TH)[0] is False  # one known member
    assert imbalanced({1: 0.9, 2: 0.85, 3: 0.1}, TH)[0] is True


def _feed(detector: GroupDetector, sweeps: list[dict[int, float | None]]) -> list[Signal]:
    changed = []
    for i, utils in enumerate(sweeps):
        changed += detector.sweep(i * S, (i + 1) * S, {77: utils})
    return changed


def test_a_sustained_skew_opens_after_two_sweeps_and_ends_after_three_quiet():
    detector = GroupDetector(TH)
    skewed, even = {6: 0.95, 7: 0.05}, {6: 0.5, 7: 0.5}
    assert _feed(detector, [even, skewed]) == []  # one skewed sweep: not yet
    opened = detector.sweep(2 * S, 3 * S, {77: skewed})
    assert len(opened) == 1 and opened[0].end_ns is None
    signal = opened[0]
    assert (signal.kind, signal.subject, signal.start_ns, signal.detected_ns) == (
        "imbalance",
        77,
        1 * S,
        3 * S,
    )
    assert signal.peak == pytest.approx(1.9)
    assert signal.evidence[-1]["members"] == {"6": 0.95, "7": 0.05}
    assert busiest(signal) == 6
    assert detector.sweep(3 * S, 4 * S, {77: even}) == []
    assert detector.sweep(4 * S, 5 * S, {77: even}) == []
    closed = detector.sweep(5 * S, 6 * S, {77: even})
    assert len(closed) == 1 and closed[0].end_ns == 3 * S
    assert detector.streaks == {}  # balanced groups keep no state


def test_a_balanced_group_and_a_blip_open_nothing():
    detector = GroupDetector(TH)
    assert _feed(detector, [{6: 0.9, 7: 0.9}] * 5) == []
    assert _feed(detector, [{6: 0.95, 7: 0.05}, {6: 0.5, 7: 0.5}] * 3) == []
    assert detector.active() == []


def test_the_setting_sets_the_sweeps():
    detector = GroupDetector(Thresholds(imbalance_sweeps=3))
    skewed = {6: 0.95, 7: 0.05}
    assert _feed(detector, [skewed, skewed]) == []
    assert len(detector.sweep(2 * S, 3 * S, {77: skewed})) == 1


def test_an_imbalance_names_its_members_and_the_jobs_on_the_busiest():
    detector = GroupDetector(TH)
    (signal,) = _feed(detector, [{6: 0.1, 7: 0.9}] * 2)
    assert busiest(signal) == 7
    joined = join(signal, [], {101: 5_000, 102: 9_000}, TH, S, [6, 7])
    assert joined.kind == "imbalance" and joined.links == [6, 7]
    assert [(m.job, m.role, m.link_bytes) for m in joined.members] == [
        (102, "aggressor", 9_000),
        (101, "on link", 5_000),
    ]
    assert joined.reported  # never silent: the sweeps setting is its guard


def test_the_fabric_pages_rows_and_legend():
    """The Fabric page's groups grid (frontend/components.py): numbers stay numbers (the
    grid sorts them), utilisations in %, the busiest link named, the legend in words."""
    from frontend import components
    from stacklens.api_models import LinkGroupPage

    end = {"guid": "0x0000000000000001", "port": 1}
    member = {"capacity_bytes_per_s": 4_000_000_000, "a_to_b_bytes_per_s": None,
              "b_to_a_bytes_per_s": None, "b_to_a_bytes": 0}  # fmt: skip
    page = LinkGroupPage.model_validate({
        "groups": [{
            "id": 7, "kind": "rails", "name": "rails of host02",
            "members": [
                {**member, "link_id": 3, "name": "host02 mlx5_0[1] – leaf01[2]",
                 "a": {**end, "name": "host02 mlx5_0"}, "b": {**end, "name": "leaf01"},
                 "a_to_b_bytes": 3 * 2**30, "utilisation": 0.8},
                {**member, "link_id": 9, "name": "host02 mlx5_1[1] – leaf02[2]",
                 "a": {**end, "name": "host02 mlx5_1"}, "b": {**end, "name": "leaf02"},
                 "a_to_b_bytes": 0, "utilisation": 0.0}],
            "max_mean": 2.0, "cv": 1.0, "busiest_link_id": 3, "peak_max_mean": 2.0,
            "peak_t_ns": 1_700_000_000 * S,
            "series": {"t_ns": [1_700_000_000 * S], "max_mean": [2.0], "cv": [1.0]},
        }],
        "page": {"total": 1, "limit": 500, "next_cursor": None},
        "from_ns": 0, "to_ns": 1, "step_ns": 1, "resolution": "samples",
    })  # fmt: skip
    (row,) = components.fabric_group_rows(page)
    assert row == {
        "id": 7, "name": "rails of host02", "kind": "rails", "members": 2, "skew": 2.0,
        "cv": 1.0, "peak": 2.0, "peak_at": "2023-11-14 22:13:20 UTC",
        "busiest": "host02 mlx5_0[1] – leaf01[2] (80.0 %)", "loads": "80.0 % / 0.0 %",
        "loads_exact": "host02 mlx5_0[1] – leaf01[2]: 3.00 GiB A → B, 0 B B → A; "
                       "host02 mlx5_1[1] – leaf02[2]: 0 B A → B, 0 B B → A",
    }  # fmt: skip
    assert components.fabric_groups_caption(page, "over the last 5 minutes") == (
        "1 group of parallel links, over the last 5 minutes, highest skew first. Skew: the "
        "busiest link's utilisation over the group's mean (1 = even; 2 = all on one of two "
        "links); CV: standard deviation over the mean; blank = fewer than two links with a "
        "load.")  # fmt: skip
