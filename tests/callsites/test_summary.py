# tests/callsites/test_summary.py — call sites summed across ranks (server/callsites/summary.py).
"""Per-rank rows as the repository gives them become sites: joined across ranks by their
frames' build-id and offset (never by the ranks' own site ids), per op; exact sums, share,
size range from the buckets, the rank with the most time and imbalance; the overflow row apart."""

from __future__ import annotations

from server.callsites.summary import OTHER, OVERFLOW_SITE, size_bounds, summarize

BID = "ab" * 20


def frame(offset: int, n: int = 0, module: str = "/apps/solver", bid: str = BID) -> dict:
    return {"frame": n, "module": module, "build_id": bid, "offset": offset}


def row(rank: int, site_id: int | None, op: str, calls: int, nbytes: int, ns: int, frames: list,
        buckets: dict, layer: int = 0) -> dict:  # fmt: skip
    return {"rank": rank, "site_id": site_id, "layer": layer, "op": op, "op_id": 0,
            "comm_id": None, "calls": calls, "bytes": nbytes, "time_ns": ns,
            "buckets": buckets, "frames": frames}  # fmt: skip


RESOLVED = {("", BID, 0x1234): {"quality": "line", "function": "solve", "function_offset": 0x1f,
                                "file": "/src/solver.c", "line": 212, "reason": "",
                                "resolved": "server"}}  # fmt: skip


def test_sites_join_ranks_on_frames_not_site_ids() -> None:
    rows = [
        # the same line on three ranks, each with its own site id; rank 2 with the most time
        row(0, 5, "MPI_Allreduce", 10, 80, 1_000, [frame(0x1234)], {7: 10}),
        row(1, 9, "MPI_Allreduce", 10, 80, 2_000, [frame(0x1234)], {7: 10}),
        row(2, 1, "MPI_Allreduce", 10, 80, 6_000, [frame(0x1234, module="/copy/solver")], {7: 10}),
        # another site of the same op: two sizes
        row(0, 6, "MPI_Allreduce", 4, 4 * 4096 + 4 * 16, 1_000, [frame(0x2000)], {13: 4, 5: 4}),
        # file I/O at its own site
        row(0, 7, "write", 2, 8192, 500, [frame(0x3000)], {13: 2}, layer=1),
        # the overflow: no frames
        row(1, OVERFLOW_SITE, "MPI_Allreduce", 1, 0, 0, [], {0: 1}),
    ]
    out = summarize(rows, RESOLVED)
    assert (out["mpi_time_ns"], out["io_time_ns"]) == (10_000, 500)
    first, second, io, other = out["sites"]
    assert first["label"] == "solver.c:212" and first["op"] == "MPI_Allreduce"
    assert (first["calls"], first["bytes"], first["time_ns"], first["ranks"]) == (30, 240, 9_000, 3)
    assert first["share"] == 0.9
    assert (first["most_time_rank"], first["most_time_ns"]) == (2, 6_000)
    assert first["imbalance"] == 6_000 / 3_000
    assert (first["mean_bytes"], first["min_bytes"], first["max_bytes"]) == (8.0, 64, 127)
    assert first["frames"][0]["quality"] == "line" and first["frames"][0]["line"] == 212
    assert second["label"] == "solver+0x2000"
    assert second["frames"][0]["quality"] == "module+offset"
    assert (second["min_bytes"], second["max_bytes"]) == (16, 8191)
    assert second["share"] == 0.1 and second["imbalance"] == 1.0
    assert (io["layer"], io["op"], io["share"]) == ("posix", "write", 1.0)
    assert (other["label"], other["frames"], other["calls"]) == (OTHER, [], 1)
    assert len({s["key"] for s in out["sites"]}) == 4


def test_a_module_without_build_id_joins_by_path() -> None:
    rows = [
        row(0, 1, "MPI_Send", 1, 8, 10, [frame(0x10, bid="")], {4: 1}),
        row(1, 1, "MPI_Send", 1, 8, 10, [frame(0x10, bid="", module="/other")], {4: 1}),
    ]
    assert [s["ranks"] for s in summarize(rows, {})["sites"]] == [1, 1]


def test_deeper_paths_are_other_sites() -> None:
    """Depth 2: the same innermost frame reached from two callers is two sites."""
    rows = [
        row(0, 1, "MPI_Send", 1, 8, 10, [frame(0x1234), frame(0x50, 1)], {4: 1}),
        row(0, 2, "MPI_Send", 1, 8, 30, [frame(0x1234), frame(0x60, 1)], {4: 1}),
    ]
    sites = summarize(rows, RESOLVED)["sites"]
    assert [s["label"] for s in sites] == [
        "solver.c:212 < solver+0x60",
        "solver.c:212 < solver+0x50",
    ]


def test_size_bounds() -> None:
    assert size_bounds({}) == (0, 0)
    assert size_bounds({0: 3}) == (0, 0)
    assert size_bounds({1: 1}) == (1, 1)
    assert size_bounds({0: 1, 13: 2, 20: 0}) == (0, 8191)


def test_an_mpi4py_frame_is_labelled() -> None:
    module = "/venv/lib/python3.11/site-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so"
    rows = [row(0, 1, "MPI_Allreduce", 1, 8, 10, [frame(0x99, module=module)], {4: 1})]
    (site,) = summarize(rows, {})["sites"]
    assert site["label"] == "mpi4py (a Python call; its file and line are not read)"


def test_rows_as_the_raw_route_gives_them() -> None:
    """The same sites from rows whose layer is a name, buckets a list, overflow flagged."""
    raw = [
        {**row(0, 5, "MPI_Allreduce", 10, 80, 1_000, [frame(0x1234)], {}),
         "layer": "MPI", "buckets": [{"bucket": 7, "calls": 10}]},
        {**row(1, None, "MPI_Allreduce", 1, 0, 0, [], {}), "layer": "MPI", "overflow": True,
         "buckets": [{"bucket": 0, "calls": 1}]},
    ]  # fmt: skip
    first, other = summarize(raw, RESOLVED)["sites"]
    assert (first["label"], first["layer"], first["min_bytes"], first["max_bytes"]) == (
        "solver.c:212",
        "mpi",
        64,
        127,
    )
    assert other["label"] == OTHER
