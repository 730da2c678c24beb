"""The pure placement (server/jobs/placement.py `place`) on small hand-made fabrics: the
cases the simulated fat tree of tests/fabric/test_placement.py does not show — a host with
two HCAs, a fully qualified host name against a short node description, a reported GUID
that is not on the fabric, hosts on one switch (no switch link), a down trunk, a longer
path through a core switch — and the window figures of a link from its ends' sums."""

from __future__ import annotations

from server.jobs.placement import link_window, place


def _guid(n: int) -> str:
    return f"{n:#018x}"


#: Two leaves (1, 2) under a spine (3) and a core (4) above the spine and a third leaf (5):
#: leaf1 - spine - leaf2, and leaf5 - core - spine. HCAs 11..15.
NODES = [
    *({"guid": _guid(n), "name": f"sw{n}", "type": "switch"} for n in (1, 2, 3, 4, 5)),
    {"guid": _guid(11), "name": "alpha mlx5_0", "type": "hca"},
    {"guid": _guid(12), "name": "alpha mlx5_1", "type": "hca"},
    {"guid": _guid(13), "name": "beta", "type": "hca"},
    {"guid": _guid(14), "name": "gamma", "type": "hca"},
    {"guid": _guid(15), "name": "delta", "type": "hca"},
]


def _link(i: int, a: tuple[int, int], b: tuple[int, int], state: str = "up") -> dict:
    def end(e: tuple[int, int]) -> dict:
        name = next(n["name"] for n in NODES if n["guid"] == _guid(e[0]))
        return {"guid": _guid(e[0]), "port": e[1], "name": name}

    return {"id": i, "a": end(a), "b": end(b), "state": state, "capacity_bytes_per_s": 1000,
            "a_port_id": 2 * i, "b_port_id": 2 * i + 1}  # fmt: skip


LINKS = [
    _link(1, (11, 1), (1, 1)),  # alpha's first HCA on leaf1
    _link(2, (12, 1), (2, 1)),  # alpha's second HCA on leaf2
    _link(3, (13, 1), (1, 2)),  # beta on leaf1
    _link(4, (14, 1), (2, 2)),  # gamma on leaf2
    _link(5, (15, 1), (5, 1)),  # delta on leaf5
    _link(6, (1, 9), (3, 1)),  # leaf1 - spine
    _link(7, (2, 9), (3, 2)),  # leaf2 - spine
    _link(8, (2, 10), (3, 3), state="down"),  # a second, down trunk leaf2 - spine
    _link(9, (3, 9), (4, 1)),  # spine - core
    _link(10, (5, 9), (4, 2)),  # leaf5 - core
]


def _kinds(placed: dict) -> dict[int, str]:
    return {lk["id"]: lk["kind"] for lk in placed["links"]}


def test_two_hcas_a_qualified_name_and_an_unknown_guid():
    placed = place(
        {"alpha.cluster.example": [0, 1], "beta": [2], "nowhere": [3]},
        {"beta": {(_guid(99), 1)}},  # not on this fabric: the name decides
        NODES,
        LINKS,
    )
    hosts = {h["host"]: h for h in placed["hosts"]}
    assert [h["host"] for h in placed["hosts"]] == ["alpha.cluster.example", "beta", "nowhere"]
    assert hosts["alpha.cluster.example"]["match"] == "host name"
    assert [(p["name"], p["port"]) for p in hosts["alpha.cluster.example"]["ports"]] == [
        ("alpha mlx5_0", 1), ("alpha mlx5_1", 1)
    ]  # fmt: skip
    assert (hosts["beta"]["match"], hosts["nowhere"]["match"]) == ("host name", "unmatched")
    assert (hosts["nowhere"]["ranks"], hosts["nowhere"]["ports"]) == ([3], [])
    # alpha spans leaf1 and leaf2: the up trunks between them, not the down one.
    assert _kinds(placed) == {1: "host", 2: "host", 3: "host", 6: "candidate", 7: "candidate"}
    assert [lk["hosts"] for lk in placed["links"]][:3] == [
        ["alpha.cluster.example"], ["alpha.cluster.example"], ["beta"]
    ]  # fmt: skip


def test_a_reported_guid_wins_over_the_name_and_picks_the_port():
    placed = place({"gamma": [0], "x": [1]}, {"x": {(_guid(13), 1), (_guid(13), 2)}}, NODES,
                   LINKS)  # fmt: skip
    hosts = {h["host"]: h for h in placed["hosts"]}
    assert (hosts["x"]["match"], [p["name"] for p in hosts["x"]["ports"]]) == ("guid", ["beta"])
    assert _kinds(placed) == {3: "host", 4: "host", 6: "candidate", 7: "candidate"}


def test_hosts_on_one_switch_cross_no_switch_link():
    placed = place({"beta": [0], "alpha": [1]}, {"alpha": {(_guid(11), 1)}}, NODES, LINKS)
    assert _kinds(placed) == {1: "host", 3: "host"}


def test_every_shortest_path_through_the_core():
    placed = place({"beta": [0], "delta": [1]}, {}, NODES, LINKS)
    assert _kinds(placed) == {3: "host", 5: "host", 6: "candidate", 9: "candidate",
                              10: "candidate"}  # fmt: skip


def test_a_links_window_figures_from_its_ends():
    link = LINKS[0]
    a = {"samples": 2, "xmit_bytes": 500, "xmit_bytes_dt_ns": 2 * 10**9, "xmit_wait": 10,
         "xmit_wait_dt_ns": 2 * 10**9, "peak_bytes_per_s": 400.0}  # fmt: skip
    b = {"samples": 2, "xmit_bytes": 100, "xmit_bytes_dt_ns": 2 * 10**9, "xmit_wait": None,
         "xmit_wait_dt_ns": None, "peak_bytes_per_s": 60.0}  # fmt: skip
    assert link_window(link, a, b) == {
        "samples": 4,
        "a_to_b_bytes": 500,
        "b_to_a_bytes": 100,
        "a_to_b_bytes_per_s": 250.0,
        "b_to_a_bytes_per_s": 50.0,
        "utilisation": 0.25,
        "peak_utilisation": 0.4,
        "xmit_wait": 10,
        "xmit_wait_per_s": 5.0,
    }
    unknown = link_window(link, None, None)
    assert unknown["samples"] == 0
    assert {k: v for k, v in unknown.items() if k != "samples"} == dict.fromkeys(
        ("a_to_b_bytes", "b_to_a_bytes", "a_to_b_bytes_per_s", "b_to_a_bytes_per_s",
         "utilisation", "peak_utilisation", "xmit_wait", "xmit_wait_per_s")
    )  # fmt: skip
