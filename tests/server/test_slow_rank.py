"""The slow rank on a job with a known time profile (frames built with the real wire
encoder, ingested through the real collector): four ranks in lock step on MPI_Allreduce,
rank 2 computing far longer in five known intervals (the others wait for it inside the
collective), rank 0 writing a burst of 1 GiB in one known interval, start-up and shutdown
in the first and last. Every share is exactly the known one, the outliers and the last
rank to arrive are named, the I/O burst is in its step, an empty window is empty."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from server.jobs import profile, series
from server.jobs.repository import Scope
from server.query_params import Window
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import MPI_CATEGORIES, op_names
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0, roll_up
from tests.conftest import query

S, MS = 10**9, 10**6
RANKS = 4
INTERVALS = 30
SLOW = range(10, 15)  # intervals in which rank 2 is slow
BURST = 20  # the interval in which rank 0 writes 1 GiB
NO_ROOT = 0xFFFFFFFF


def allreduce_ns(k: int, rank: int) -> int:
    """Time inside MPI_Allreduce of a rank in interval k."""
    if k in SLOW:
        return 50 * MS if rank == 2 else 800 * MS
    return 200 * MS


def interval_frame(k: int, rank: int) -> bytes:
    op = op_names().index
    ops, coll, io = [], [], []
    if k == 0:
        ops.append({"op_id": op("MPI_Init"), "calls": 1, "time_ns": 300 * MS})
    elif k == INTERVALS - 1:
        ops.append({"op_id": op("MPI_Finalize"), "calls": 1, "time_ns": 100 * MS})
    else:
        t = allreduce_ns(k, rank)
        ops.append({"op_id": op("MPI_Allreduce"), "calls": 1, "bytes": 8, "time_ns": t})
        coll.append({"op_id": op("MPI_Allreduce"), "comm_id": 7, "comm_size": RANKS,
                     "root": NO_ROOT, "calls": 1, "bytes": 8, "time_ns": t})  # fmt: skip
    if k == BURST and rank == 0:
        io.append({"layer": 1, "writes": 1024, "bytes_written": 2**30, "write_time_ns": 400 * MS,
                   "path": b"/scratch/burst", "mount": b"/", "fstype": b"ext4"})  # fmt: skip
    tables: dict[str, list[dict[str, Any]]] = {"op": ops, "coll": coll, "io": io}
    return wire.encode_frame(
        job_id="slow", world_rank=rank, world_size=RANKS, seq=k, token="secret",
        interval_start_ns=M0 + k * S, interval_end_ns=M0 + (k + 1) * S,
        tables={name: wire.records(name, rows) for name, rows in tables.items() if rows},
    )  # fmt: skip


@pytest.fixture
def job(collector):
    frames = [interval_frame(k, r) for k in range(INTERVALS) for r in range(RANKS)]
    statuses = [s for s, _ in exchange(collector.address, b"".join(frames), acks=len(frames))]
    assert statuses == [0] * len(frames)


def expected_share(k: int, rank: int) -> dict:
    """The share of interval k (in the step of its end, 1 s steps) of a rank."""
    mpi = dict.fromkeys(MPI_CATEGORIES, 0)
    startup = 300 * MS if k == 0 else 0
    shutdown = 100 * MS if k == INTERVALS - 1 else 0
    if 0 < k < INTERVALS - 1:
        mpi["mpi_coll"] = allreduce_ns(k, rank)
    io = 400 * MS if (k, rank) == (BURST, 0) else 0
    compute = S - shutdown - io - mpi["mpi_coll"]  # MPI_Init: before the first interval
    return {"t_ns": M0 + (k + 1) * S, "rank": rank, "elapsed_ns": S, "mpi_ns": mpi,
            "io_ns": io, "startup_ns": startup, "shutdown_ns": shutdown,
            "compute_ns": compute}  # fmt: skip


def get_profile(api_client, lo_s: int, hi_s: int) -> dict:
    params = {"from": M0 // S + lo_s, "to": M0 // S + hi_s, "step": 1}
    answer = api_client.get("/api/jobs/slow/profile", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_every_share_is_the_known_one(job, api_client):
    whole = get_profile(api_client, 0, INTERVALS + 1)
    assert whole["shares"] == [expected_share(k, r) for k in range(INTERVALS)
                               for r in range(RANKS)]  # fmt: skip


def test_the_slow_rank_and_the_last_to_arrive_are_named(job, api_client):
    slow = get_profile(api_client, SLOW[0] + 1, SLOW[-1] + 2)  # the steps of the slow part
    assert slow["outliers"] == [{
        "rank": 2, "what": "computation", "time_ns": 5 * 950 * MS, "median_ns": 5 * 200 * MS,
        "ratio": 4.75, "peak_t_ns": M0 + (SLOW[0] + 1) * S,
        "text": "rank 2: 4.8× the median time in computation (4.75 s against 1.00 s)",
    }]  # fmt: skip
    assert slow["imbalance"] == [{
        "comm_id": 7, "comm_size": 4, "op": "MPI_Allreduce", "ranks": 4,
        "min_ns": 250 * MS, "median_ns": 4 * S, "max_ns": 4 * S, "max_rank": 0, "min_rank": 2,
        "text": "MPI_Allreduce on communicator 7 (4 ranks): rank 2 spent the least time "
                "inside (250 ms, median 4.00 s): it is the last to arrive; rank 0 waited "
                "longest (4.00 s)",
    }]  # fmt: skip


def test_the_io_burst_is_named_in_its_step(job, api_client):
    whole = get_profile(api_client, 0, INTERVALS + 1)
    burst = [o for o in whole["outliers"] if o["what"] == "file I/O"]
    assert burst == [{
        "rank": 0, "what": "file I/O", "time_ns": 400 * MS, "median_ns": 0, "ratio": 400.0,
        "peak_t_ns": M0 + (BURST + 1) * S,
        "text": "rank 0: 400 ms in file I/O; the median rank: 0 µs",
    }]  # fmt: skip
    series = api_client.get(
        "/api/jobs/slow/series",
        params={"by": "category", "from": M0 // S, "to": M0 // S + INTERVALS + 1, "step": 1},
    ).json()
    fs = [p for p in series["points"] if p["key"] == "fs:POSIX"]
    assert fs == [{"t_ns": M0 + (BURST + 1) * S, "key": "fs:POSIX",
                   "values": [1024, 2**30, 400 * MS]}]  # fmt: skip


def test_an_empty_window_is_empty(job, api_client):
    empty = get_profile(api_client, 100, 200)
    assert (empty["shares"], empty["outliers"], empty["imbalance"]) == ([], [], [])


def test_outliers_are_a_pure_function_of_the_sums():
    totals: dict[str, dict[int, int]] = {}
    steps: dict[str, dict[int, dict[int, int]]] = {}
    for k in SLOW:
        for rank in range(RANKS):
            share = expected_share(k, rank)
            places = [*share["mpi_ns"].items(), (profile.FILE_IO, share["io_ns"]),
                      (profile.COMPUTATION, share["compute_ns"])]  # fmt: skip
            for place, ns in places:
                per_rank = totals.setdefault(place, {})
                per_rank[rank] = per_rank.get(rank, 0) + ns
                steps.setdefault(place, {}).setdefault(share["t_ns"], {})[rank] = ns
    asked: list[list[str]] = []

    def steps_of(places: list[str]) -> dict[str, dict[int, dict[int, int]]]:
        asked.append(places)
        return {place: steps[place] for place in places}

    named = profile.outliers(totals, list(range(RANKS)), steps_of)
    assert [(o["text"], o["peak_t_ns"]) for o in named] == [
        ("rank 2: 4.8× the median time in computation (4.75 s against 1.00 s)",
         M0 + (SLOW[0] + 1) * S)
    ]  # fmt: skip
    assert asked == [["computation"]]  # per-step values only of a place with an outlier, once


def test_whole_minute_steps_read_the_rollups_exactly(job, collector, api_client, pg_url):
    """Steps of whole minutes from a whole minute read the per-rank minute rollups where a
    minute is rolled up, the raw deltas where it is not: before the rollup pass, after it
    and after a late frame the profile and the per-rank series are the same, and equal to
    the raw reading (a window starting off the minute)."""
    minute = {"from": M0 // S, "to": M0 // S + 60, "step": 60}
    raw = {"from": f"{M0 // S - 1}.5", "to": f"{M0 // S + 59}.5", "step": 60}

    def answers(params: dict) -> tuple:
        profile_ = api_client.get("/api/jobs/slow/profile", params=params).json()
        ranks = api_client.get("/api/jobs/slow/series", params={**params, "by": "rank"}).json()
        shares = [{k: v for k, v in s.items() if k != "t_ns"} for s in profile_["shares"]]
        points = [(p["key"], p["values"]) for p in ranks["points"]]
        return shares, profile_["imbalance"], points

    want = answers(raw)
    assert [s["elapsed_ns"] for s in want[0]] == [INTERVALS * S] * RANKS
    assert want[0][0]["io_ns"] == 400 * MS and want[0][0]["startup_ns"] == 300 * MS
    assert answers(minute) == want  # (partly) dirty: raw
    roll_up(collector)
    # per rank: its minute; its three ops (MPI_Init, MPI_Allreduce, MPI_Finalize); its
    # communicator
    for table, rows in (("rank_minutes", 1), ("rank_op_minutes", 3), ("coll_minutes", 1)):
        assert query(pg_url, f"SELECT count(*) FROM {table}") == [(rows * RANKS,)]
    assert query(pg_url, "SELECT count(*) FROM rollup_dirty") == [(0,)]
    assert answers(minute) == want  # rolled up
    late = interval_frame(INTERVALS, 1)  # a 31st interval of rank 1, ending in the minute
    assert [s for s, _ in exchange(collector.address, late, acks=1)] == [0]
    want = answers(raw)
    assert want[0][1]["elapsed_ns"] == (INTERVALS + 1) * S
    assert answers(minute) == want  # its minute dirty again: raw
    roll_up(collector)
    assert answers(minute) == want


def waitall_frame(k: int, rank: int) -> bytes:
    """Interval k (of 6) of a four-rank job "waits": 200 ms in MPI_Waitall a second, rank 1
    900 and 950 ms in intervals 2 and 3, rank 3 10 ms; rank 3 writes files for 100 ms in
    interval 1 and 300 ms in interval 4."""
    ns = {(1, 2): 900 * MS, (1, 3): 950 * MS}.get((rank, k), 10 * MS if rank == 3 else 200 * MS)
    write_ns = {(3, 1): 100 * MS, (3, 4): 300 * MS}.get((rank, k), 0)
    tables: dict[str, list[dict[str, Any]]] = {
        "op": [{"op_id": op_names().index("MPI_Waitall"), "calls": 1, "time_ns": ns}],
        "io": [{"layer": 1, "writes": 1, "bytes_written": 1, "write_time_ns": write_ns,
                "path": b"/scratch/out", "mount": b"/", "fstype": b"ext4"}] if write_ns else [],
    }  # fmt: skip
    return wire.encode_frame(
        job_id="waits", world_rank=rank, world_size=RANKS, seq=k, token="secret",
        interval_start_ns=M0 + k * S, interval_end_ns=M0 + (k + 1) * S,
        tables={name: wire.records(name, rows) for name, rows in tables.items() if rows},
    )  # fmt: skip


def test_outliers_in_an_op_its_category_and_file_io_are_named_with_their_steps(
    collector, api_client, pg_url
):
    """Outliers in several places at once (an op, its category, file I/O) get the step in
    which each rank was furthest above that step's median: the category's and file I/O's
    from the shares, the op's read in one query of its rows."""
    frames = [waitall_frame(k, r) for k in range(6) for r in range(RANKS)]
    statuses = [s for s, _ in exchange(collector.address, b"".join(frames), acks=len(frames))]
    assert statuses == [0] * len(frames)
    params = {"from": M0 // S, "to": M0 // S + 7, "step": 1}
    answer = api_client.get("/api/jobs/waits/profile", params=params).json()
    waits = {"rank": 1, "time_ns": 2650 * MS, "median_ns": 1200 * MS, "ratio": 2.208,
             "peak_t_ns": M0 + 4 * S}  # fmt: skip
    assert answer["outliers"] == [
        {"rank": 3, "what": "file I/O", "time_ns": 400 * MS, "median_ns": 0, "ratio": 400.0,
         "peak_t_ns": M0 + 5 * S, "text": "rank 3: 400 ms in file I/O; the median rank: 0 µs"},
        {**waits, "what": "MPI_Waitall",
         "text": "rank 1: 2.2× the median time in MPI_Waitall (2.65 s against 1.20 s)"},
        {**waits, "what": "mpi_completion",
         "text": "rank 1: 2.2× the median time in mpi_completion (2.65 s against 1.20 s)"},
    ]  # fmt: skip

    engine = make_engine(pg_url)
    statements: list[str] = []

    def seen(conn, cursor, statement, *_args) -> None:  # noqa: ANN001
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    with Session(engine) as session:
        (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = 'waits'")[0]
        steps = series.Steps(M0, M0 + 7 * S, S)
        scope = Scope(job_id, window=Window(M0, M0 + 7 * S))
        shares = series.profile_rows(session, scope, steps).shares
        statements.clear()
        found = series.profile_steps(session, scope, steps, shares, ["MPI_Waitall", "file I/O"])
    engine.dispose()
    assert [s for s in statements if not s.startswith("SET")] == [statements[-1]]
    waitall = {r: 10 * MS if r == 3 else 200 * MS for r in range(RANKS)}
    assert found == {
        "MPI_Waitall": {M0 + (k + 1) * S: {**waitall, **({1: ns} if ns else {})}
                        for k, ns in enumerate([0, 0, 900 * MS, 950 * MS, 0, 0])},
        "file I/O": {M0 + (k + 1) * S: {r: (100 * MS if (r, k) == (3, 1) else 300 * MS
                                            if (r, k) == (3, 4) else 0) for r in range(RANKS)}
                     for k in range(6)},
    }  # fmt: skip
