# tests/compare/test_context.py — families and fabric context of a comparison (pure).
"""server/compare/diff.py's family functions and fabric phrases, and
server/compare/context.py's summary, on hand-made rows: families matched by label (two of
one label summed), the median per label, the largest change first; the placement's leaves
are the switch ends of the hosts' own links; other jobs' bytes are counted only on the link
directions the run's own traffic crossed; the finding's fabric phrases are ranked by how far
apart the two sides are, and say nothing below notice."""

from __future__ import annotations

from server.compare import context, diff


def fam(label: str, time_ns: int, nbytes: int, calls: list[int]) -> dict:
    return {"label": label, "time_ns": time_ns, "bytes": nbytes,
            "ops": [{"op": "MPI_Allreduce", "calls": c} for c in calls]}  # fmt: skip


def test_families_match_by_label_largest_change_first() -> None:
    a = diff.family_totals([fam("world", 100, 8, [2]), fam("rows", 50, 16, [1, 1])])
    b = diff.family_totals([fam("world", 90, 8, [2]), fam("rows", 40, 8, [1]),
                            fam("rows", 500, 64, [3]), fam("tp", 7, 1, [1])])  # fmt: skip
    assert b["rows"] == {"time_ns": 540, "calls": 4, "bytes": 72}
    rows = diff.family_differences(a, b)
    assert [(r["label"], r["present"], r["delta_ns"]) for r in rows] == [
        ("rows", "both", 490), ("world", "both", -10), ("tp", "b", 7)]  # fmt: skip
    assert rows[0]["delta_pct"] == 980.0 and rows[2]["delta_pct"] is None
    assert (rows[2]["a_calls"], rows[2]["b_calls"], rows[2]["a_bytes"]) == (0, 1, 0)
    median = diff.median_families([a, b, diff.family_totals([fam("world", 10, 0, [0])])])
    assert median == {"rows": {"time_ns": 50, "calls": 2, "bytes": 16},
                      "tp": {"time_ns": 0, "calls": 0, "bytes": 0},
                      "world": {"time_ns": 90, "calls": 2, "bytes": 8}}  # fmt: skip


def end(guid: str, port: int, name: str) -> dict:
    return {"guid": guid, "port": port, "name": name}


def link(i: int, a: dict, b: dict, kind: str, sent: tuple, wait: int | None) -> dict:
    return {"id": i, "a": a, "b": b, "kind": kind, "a_to_b_bytes": sent[0],
            "b_to_a_bytes": sent[1], "xmit_wait": wait}  # fmt: skip


def test_summary_of_a_placement_across_two_leaves() -> None:
    h1, h2 = end("0x1", 1, "host01"), end("0x2", 1, "host09")
    placed = {
        "hosts": [{"host": "host01", "match": "host name", "ports": [h1]},
                  {"host": "host09", "match": "guid", "ports": [h2]},
                  {"host": "login", "match": "unmatched", "ports": []}],
        "links": [link(1, h1, end("0xa", 3, "leaf1"), "host", (10, 20), 5),
                  link(2, end("0xb", 4, "leaf2"), h2, "host", (None, None), None),
                  link(3, end("0xa", 30, "leaf1"), end("0xs", 1, "spine1"), "candidate",
                       (100, 200), 7)],
    }  # fmt: skip
    shares = {
        (1, "a_to_b"): {(5, "mpi_p2p", "routed", ""): 1000.0, (6, "io", "routed", ""): 30.0},
        (3, "a_to_b"): {(5, "mpi_coll", "modelled", ""): 200.0, (7, "mpi_p2p", "routed", ""): 5e9},
        (3, "b_to_a"): {(8, "mpi_p2p", "routed", ""): 1e9},  # a direction job 5 did not use
    }  # fmt: skip
    got = context.summarise(placed, shares, 5)
    assert got == {"hosts": 3, "placed_hosts": 2, "leaves": ["leaf1", "leaf2"], "links": 3,
                   "crossed_links": 1, "link_bytes": 330, "xmit_wait": 12, "used_links": 2,
                   "own_bytes": 1200.0, "other_job_bytes": 5e9 + 30.0,
                   "other_jobs": 2}  # fmt: skip
    empty = context.summarise({"hosts": [], "links": []}, {}, 5)
    assert (empty["link_bytes"], empty["xmit_wait"], empty["leaves"]) == (None, None, [])


def ctx(leaves: list[str], other: float, jobs: int, wait: int | None, kinds: list[str]) -> dict:
    return {"leaves": leaves, "other_job_bytes": other, "other_jobs": jobs, "xmit_wait": wait,
            "incidents": [{"kind": k} for k in kinds]}  # fmt: skip


def test_fabric_phrases_ranked_largest_change_first() -> None:
    a = ctx(["leaf1"], 0.0, 0, 0, [])
    b = ctx(["leaf1", "leaf2", "leaf3"], 3.2 * 2**30, 1, 4242, ["congestion"])
    assert diff.fabric_changes(a, b) == [
        "on links that carried 3.20 GiB of another job during run b (0 B during run a)",
        "PortXmitWait on its links 0 → 4,242 ticks",
        "1 incident (congestion) during run b, 0 during run a",
        "placement went from 1 leaf to 3 leaves",
    ]
    same = ctx(["leaf1"], 2**20, 2, 10, [])  # a MiB of others, 10 ticks: below notice
    assert diff.fabric_changes(a, same) == []
    assert diff.fabric_changes(a, ctx(["leaf2"], 0.0, 0, None, [])) == [
        "placement moved from leaf1 to leaf2"]  # fmt: skip
    assert diff.fabric_changes(None, b) == []
    prof = {"elapsed_ns": 10**9, "hosts": ["h1"]}
    slow = {"elapsed_ns": 3 * 10**9, "hosts": ["h1"]}
    assert diff.finding(prof, slow, [], diff.fabric_changes(a, b)[:1]) == (
        "+2.0 s elapsed per run (1.0 s → 3.0 s); on links that carried 3.20 GiB of another "
        "job during run b (0 B during run a).")  # fmt: skip
