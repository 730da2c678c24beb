# tests/callsites/test_route.py — GET /api/jobs/{job}/callsites through the real collector.
"""A two-rank job's call-site records (wire tables callsite and callsite_frame) sent through
the real collector into the real database, their frames the true offsets of the
tests/symbols program (run here under ASLR): the API answers the sites across ranks with
exact sums, share, size range, the rank with the most time and imbalance, each resolved to its line;
paging, CSV and the window hold; a rank's own site ids never join ranks."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from stacklens import wire
from stacklens.mpi_ops import op_names
from stacklens.symbols import file_build_id
from tests.collector.test_ingest import T0
from tests.e2e.test_jobs_page import seed
from tests.symbols.programs import build, run

JOB = "sites"
OVERFLOW = 2**32 - 1


def frame(rank: int, start_s: int, sites: list[dict], paths: list[dict]) -> bytes:
    tables = {"rank_info": wire.records("rank_info", [{"command": b"./sites", "user": b"alice"}]),
              "callsite": wire.records("callsite", sites)}  # fmt: skip
    if paths:
        tables["callsite_frame"] = wire.records("callsite_frame", paths)
    return wire.encode_frame(job_id=JOB, world_rank=rank, world_size=2, seq=start_s,
                             interval_start_ns=T0 + start_s * 10**9,
                             interval_end_ns=T0 + (start_s + 1) * 10**9, token="secret",
                             tables=tables)  # fmt: skip


def site(site_id: int, op: str, bucket: int, calls: int, nbytes: int, ns: int) -> dict:
    return {"site_id": site_id, "layer": 0, "op_id": op_names().index(op), "comm_id": OVERFLOW,
            "bucket": bucket, "calls": calls, "bytes": nbytes, "time_ns": ns}  # fmt: skip


def path(site_id: int, module: str, offset: int) -> dict:
    bid = (file_build_id(module) or "").encode()
    return {"site_id": site_id, "frame": 0, "depth": 1, "site_offset": offset,
            "build_id": bid, "module": module.encode()}  # fmt: skip


def test_sites_across_ranks_resolved(collector, api_client, tmp_path: Path) -> None:
    program = build(tmp_path, ["-g"])
    rows = run(program)  # (line, module, offset, map offset, address): lines 13, 8, 7, 8, 16
    (_, main, off13, _, _), _, (_, lib, off7, _, _), _, (_, _, off16, _, _) = rows
    seed(collector, [
        # rank 0: line 13 (ids 1), line 16 (id 2); rank 1 numbers them the other way round
        frame(0, 0, [site(1, "MPI_Allreduce", 4, 10, 80, 4_000),
                     site(2, "MPI_Allreduce", 13, 2, 8192, 1_000)],
              [path(1, main, off13), path(2, main, off16)]),
        frame(1, 0, [site(2, "MPI_Allreduce", 4, 10, 80, 12_000),
                     site(1, "MPI_Allreduce", 13, 2, 8192, 1_000)],
              [path(2, main, off13), path(1, main, off16)]),
        # a later interval: the frames were sent before; the library's site; the overflow
        frame(0, 1, [site(1, "MPI_Allreduce", 4, 5, 40, 2_000),
                     site(3, "MPI_Sendrecv", 3, 1, 4, 1_000),
                     site(OVERFLOW, "MPI_Allreduce", 0, 1, 0, 0)], [path(3, lib, off7)]),
    ])  # fmt: skip
    answer = api_client.get(f"/api/jobs/{JOB}/callsites").json()
    assert (answer["mpi_time_ns"], answer["io_time_ns"]) == (21_000, 0)
    got = [(s["label"], s["op"], s["calls"], s["bytes"], s["time_ns"], s["ranks"],
            s["most_time_rank"], s["most_time_ns"], round(s["imbalance"], 4),
            s["min_bytes"], s["max_bytes"]) for s in answer["sites"]]  # fmt: skip
    assert got == [
        ("sites_main.c:13", "MPI_Allreduce", 25, 200, 18_000, 2, 1, 12_000, 1.3333, 8, 15),
        ("sites_main.c:16", "MPI_Allreduce", 4, 16384, 2_000, 2, 0, 1_000, 1.0, 4096, 8191),
        ("sites_lib.c:7", "MPI_Sendrecv", 1, 4, 1_000, 1, 0, 1_000, 1.0, 4, 7),
        ("<other call sites>", "MPI_Allreduce", 1, 0, 0, 1, 0, 0, 1.0, 0, 0),
    ]
    first = answer["sites"][0]
    assert round(first["share"], 4) == round(18_000 / 21_000, 4)
    (top,) = first["frames"]
    source = Path(__file__).resolve().parent.parent / "symbols" / "sites_main.c"
    assert {**top, "function_offset": None} == {
        "frame": 0, "module": main, "build_id": file_build_id(main), "offset": off13,
        "quality": "line", "function": "main", "function_offset": None, "file": str(source),
        "line": 13, "reason": "", "resolved": "server"}  # fmt: skip
    # paging: two pages of two, the same sites in order
    one = api_client.get(f"/api/jobs/{JOB}/callsites", params={"limit": 2}).json()
    after = {"limit": 2, "cursor": one["page"]["next_cursor"]}
    two = api_client.get(f"/api/jobs/{JOB}/callsites", params=after).json()
    assert [s["key"] for s in one["sites"] + two["sites"]] == [s["key"] for s in answer["sites"]]
    assert (one["page"]["total"], two["page"]["next_cursor"]) == (4, None)
    # the window: only the second interval (the frames sent in the first still name its sites)
    later = api_client.get(f"/api/jobs/{JOB}/callsites",
                           params={"from": str((T0 + 2 * 10**9) // 10**9)}).json()  # fmt: skip
    assert [(s["label"], s["calls"]) for s in later["sites"]] == [
        ("sites_main.c:13", 5),
        ("sites_lib.c:7", 1),
        ("<other call sites>", 1),
    ]
    # CSV: one row per site, frames as JSON
    text = api_client.get(f"/api/jobs/{JOB}/callsites", params={"format": "csv"}).text
    table = list(csv.DictReader(io.StringIO(text)))
    assert [(r["label"], r["calls"]) for r in table] == [
        ("sites_main.c:13", "25"),
        ("sites_main.c:16", "4"),
        ("sites_lib.c:7", "1"),
        ("<other call sites>", "1"),
    ]
    assert api_client.get("/api/jobs/nosuchjob/callsites").status_code == 404
