"""The late rank on a job with a known time profile (frames built with the real wire
encoder, ingested through the real collector): four ranks in lock step on MPI_Allreduce,
rank 2 computing far longer in five known intervals (the others wait for it inside the
collective), rank 0 writing a burst of 1 GiB in one known interval (instead of computing:
no rank waits for it), start-up and shutdown in the first and last. Every share is exactly
the known one, rank 2 is named late with the ranks that wait for it, the I/O burst is in
its step but no finding, an empty window is empty; the rule itself (server/jobs/profile.py)
on known sums: noise and ranks taking turns at waiting name nobody, a rank late in file
I/O, a two-rank job's waiting rank, waiting with no late rank."""

from __future__ import annotations

from typing import Any

import pytest

from server.jobs import profile
from stacklens import wire
from stacklens.constants import MPI_CATEGORIES
from stacklens.mpi_ops import op_names
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


def late_rank_2(window_s: int, excess_s: float, peak_k: int) -> dict:
    """Rank 2 as the profile names it: late at MPI_Allreduce by `excess_s` over a window of
    `window_s` seconds of every rank's intervals, standing out most in interval `peak_k`."""
    share = excess_s / window_s
    return {
        "rank": 2, "role": "late", "what": "computation", "op": "MPI_Allreduce",
        "excess_ns": round(excess_s * S), "share": round(share, 4), "ranks": [0, 1, 3],
        "peak_t_ns": M0 + (peak_k + 1) * S,
        "text": f"rank 2 arrives last at MPI_Allreduce: {excess_s:.2f} s more computing than "
                f"the median rank ({share:.0%} of the elapsed time); ranks 0, 1, 3 wait for it",
        "site": None, "site_key": None,  # no call sites recorded
    }  # fmt: skip


def test_the_late_rank_and_the_ranks_waiting_for_it_are_named(job, api_client):
    slow = get_profile(api_client, SLOW[0] + 1, SLOW[-1] + 2)  # the steps of the slow part
    # 5 s: rank 2 computes 950 ms a second, the others 200 ms (they wait 800 ms inside)
    assert slow["outliers"] == [
        {**late_rank_2(5, 3.75, SLOW[0]), "time_ns": 5 * 950 * MS, "median_ns": 5 * 200 * MS}
    ]
    assert slow["imbalance"] == [{
        "comm_id": 7, "comm_size": 4, "op": "MPI_Allreduce", "ranks": 4,
        "min_ns": 250 * MS, "median_ns": 4 * S, "max_ns": 4 * S, "max_rank": 0, "min_rank": 2,
        "text": "MPI_Allreduce on communicator 00000007 (4 ranks): rank 2 arrives last (the least "
                "time inside: 250 ms, median 4.00 s); rank 0 waits longest (4.00 s)",
    }]  # fmt: skip


def test_the_io_burst_is_in_its_step_and_no_finding(job, api_client):
    whole = get_profile(api_client, 0, INTERVALS + 1)
    # 30 s of intervals; inside MPI: 23 x 200 + 5 x 800 ms (rank 2: 5 x 50 ms), 100 ms
    # of MPI_Finalize apart; rank 0's 400 ms of writes replaced computing: it is not late
    others = 30 * S - (23 * 200 + 5 * 800 + 100) * MS
    assert whole["outliers"] == [
        {**late_rank_2(30, 3.75, SLOW[0]), "time_ns": others + 3750 * MS, "median_ns": others}
    ]
    series = api_client.get(
        "/api/jobs/slow/series",
        params={"by": "category", "from": M0 // S, "to": M0 // S + INTERVALS + 1, "step": 1},
    ).json()
    fs = [p for p in series["points"] if p["key"] == "fs:POSIX"]
    assert fs == [{"t_ns": M0 + (BURST + 1) * S, "key": "fs:POSIX",
                   "values": [1024, 2**30, 400 * MS]}]  # fmt: skip


def shell_frame(k: int) -> bytes:
    """Interval k of the job's batch script shell, a process without MPI (the job's
    processes run, where it is number 0, as rank 0 is in the MPI run): reading its input
    900 ms of every second, never inside MPI."""
    io = [{"layer": 1, "reads": 10, "bytes_read": 10**6, "read_time_ns": 900 * MS,
           "path": b"/scratch/input", "mount": b"/", "fstype": b"ext4"}]  # fmt: skip
    return wire.encode_frame(
        job_id="slow", run_id=0, proc_start_ns=M0 - S, pid=4242, world_rank=0, world_size=1,
        seq=k, token="secret", interval_start_ns=M0 + k * S, interval_end_ns=M0 + (k + 1) * S,
        tables={"io": wire.records("io", io)},
    )  # fmt: skip


def test_a_scripts_shell_is_not_summed_into_rank_0(job, collector, api_client):
    """The job's profile reads its MPI run: the shell's 30 s outside MPI are not rank 0's
    (summed with it, rank 0 had twice the others' time outside MPI and was named late in
    file I/O), so the findings and shares are those of the ranks alone; the shell's own
    run (?run=) has its profile as it is."""
    frames = [shell_frame(k) for k in range(INTERVALS)]
    statuses = [s for s, _ in exchange(collector.address, b"".join(frames), acks=len(frames))]
    assert statuses == [0] * len(frames)
    whole = get_profile(api_client, 0, INTERVALS + 1)
    others = 30 * S - (23 * 200 + 5 * 800 + 100) * MS
    assert whole["outliers"] == [
        {**late_rank_2(30, 3.75, SLOW[0]), "time_ns": others + 3750 * MS, "median_ns": others}
    ]
    assert whole["shares"] == [expected_share(k, r) for k in range(INTERVALS)
                               for r in range(RANKS)]  # fmt: skip
    # the ranks' series too: rank 0's file I/O is its own 1 GiB burst, not the shell's reads
    window = {"from": M0 // S, "to": M0 // S + INTERVALS + 1, "step": 1}
    by_rank = api_client.get("/api/jobs/slow/series", params={"by": "rank", **window}).json()
    io = [(p["t_ns"], p["values"][3:]) for p in by_rank["points"]
          if p["key"] == "0" and p["values"][3]]  # fmt: skip
    assert io == [(M0 + (BURST + 1) * S, [2**30, 400 * MS])]
    runs = api_client.get("/api/jobs/slow").json()["runs"]
    (shell_run,) = [r["run"] for r in runs if r["kind"] == "processes"]
    params = {"from": M0 // S, "to": M0 // S + INTERVALS + 1, "step": 1, "run": shell_run}
    own = api_client.get("/api/jobs/slow/profile", params=params).json()
    assert own["outliers"] == []
    assert [(p["rank"], p["io_ns"], p["compute_ns"]) for p in own["shares"]] == [
        (0, 900 * MS, 100 * MS)
    ] * INTERVALS


def test_an_empty_window_is_empty(job, api_client):
    empty = get_profile(api_client, 100, 200)
    assert (empty["shares"], empty["outliers"], empty["imbalance"]) == ([], [], [])


def judge(elapsed: list[int], coll: list[int], io: list[int] | None = None,
          p2p: list[int] | None = None) -> dict:  # fmt: skip
    """profile.slow_ranks on known sums (ms per rank): elapsed, time in MPI_Allreduce (and
    in MPI_Sendrecv), file I/O; per-step inside MPI: one step, the window."""
    ranks = list(range(len(elapsed)))
    p2p = p2p or [0] * len(ranks)
    places = {
        profile.ELAPSED: {r: ms * MS for r, ms in enumerate(elapsed)},
        "mpi_coll": {r: ms * MS for r, ms in enumerate(coll)},
        "mpi_p2p": {r: ms * MS for r, ms in enumerate(p2p)},
        profile.FILE_IO: {r: ms * MS for r, ms in enumerate(io or [0] * len(ranks))},
        profile.SHUTDOWN: {},
    }
    ops = {"MPI_Allreduce": places["mpi_coll"], "MPI_Sendrecv": places["mpi_p2p"]}
    rows = [(7, len(ranks), "MPI_Allreduce", r, ns) for r, ns in places["mpi_coll"].items()]
    inside = {r: (c + p) * MS for r, (c, p) in enumerate(zip(coll, p2p, strict=True))}
    return profile.slow_ranks(ranks, places, ops, rows, lambda: {M0: inside})


def test_noise_and_ranks_taking_turns_at_waiting_name_nobody():
    # LULESH-like: 8 ranks, 4 s, 7-13 ms apart in MPI_Barrier-like time
    found = judge([4000] * 8, [40, 47, 44, 53, 41, 45, 50, 43])
    assert found == {"outliers": [], "imbalance": []}
    # an oversubscribed stencil: the ranks wait 300 ms more in one call, less in the other
    found = judge([3000] * 4, [1000, 1300, 1000, 1300], p2p=[1300, 1000, 1300, 1000])
    assert found == {"outliers": [], "imbalance": []}
    # 4 % of the time more computing (below MIN_SHARE: 5 %) is no finding either
    assert judge([10_000] * 4, [2000, 2000, 1600, 2000])["outliers"] == []


def test_a_rank_late_in_file_io_is_named_with_the_ranks_waiting_for_it():
    # 16 ranks, 10 s: rank 9 writes 2 s more (a checkpoint), the others wait inside
    coll = [2500 + 10 * (r % 3) for r in range(16)]
    coll[9] = 500
    found = judge([10_000] * 16, coll, io=[100] * 9 + [2100] + [100] * 6)
    (late,) = found["outliers"]
    assert (late["rank"], late["role"], late["what"], late["op"]) == (9, "late", "file I/O",
                                                                      "MPI_Allreduce")  # fmt: skip
    assert late["ranks"] == [r for r in range(16) if r != 9]
    assert late["text"] == (
        "rank 9 arrives last at MPI_Allreduce: 2.01 s more in file I/O than the median rank "
        "(20% of the elapsed time); ranks 0–8, 10–15 wait for it"
    )
    assert [g["min_rank"] for g in found["imbalance"]] == [9]


def test_two_ranks_the_late_one_first_then_the_one_waiting_for_it():
    # the demo's solver: rank 0 arrives 200 ms late at every collective (here 2 s of 5 s)
    found = judge([5000, 5000], [100, 2100])
    assert [(o["rank"], o["role"], o["ranks"]) for o in found["outliers"]] == [
        (0, "late", [1]), (1, "waiting", [0])
    ]  # fmt: skip
    assert [o["text"] for o in found["outliers"]] == [
        "rank 0 arrives last at MPI_Allreduce: 2.00 s more computing than the median rank "
        "(40% of the elapsed time); rank 1 waits for it",
        "rank 1 waits for rank 0 (late): 2.00 s more inside MPI than the median rank (40% of "
        "the elapsed time), most in MPI_Allreduce",
    ]


def test_a_rank_named_by_its_span_alone_has_no_peak_step():
    """Ranks whose intervals stored no MPI call or file I/O have no share in any step: one
    that ran far longer than the others is named late by its span, its peak step null (it
    was a server error: the peak was looked for among no steps)."""
    ranks = [0, 1, 2, 3]
    places = {profile.ELAPSED: {0: 9 * S, 1: 3 * S, 2: 3 * S, 3: 3 * S}, profile.FILE_IO: {},
              profile.SHUTDOWN: {}}  # fmt: skip
    found = profile.slow_ranks(ranks, places, {}, [], dict)
    assert [(o["rank"], o["role"], o["excess_ns"], o["peak_t_ns"]) for o in found["outliers"]] == [
        (0, "late", 6 * S, None)
    ]


def test_waiting_with_no_late_rank_is_the_communication_itself():
    # rank 3 spends 1.5 s more inside MPI_Sendrecv (a slow link) and less computing
    found = judge([6000] * 8, [500] * 8, p2p=[1000] * 3 + [2500] + [1000] * 4)
    assert [o["text"] for o in found["outliers"]] == [
        "rank 3 waits inside MPI: 1.50 s more than the median rank (25% of the elapsed time), "
        "most in MPI_Sendrecv; no rank is late: the time goes in the communication itself"
    ]
    assert found["imbalance"] == []


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
        late = [{k: v for k, v in o.items() if k != "peak_t_ns"} for o in profile_["outliers"]]
        return shares, late, profile_["imbalance"], points

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


def test_a_late_rank_and_a_rank_waiting_for_it_among_balanced_ones(collector, api_client):
    """Six 1 s intervals of four ranks: rank 3 spends 10 ms a second in MPI_Waitall (it
    computes, and writes 400 ms in two intervals: less than half its excess), rank 1 waits
    there 900 and 950 ms in two intervals, ranks 0 and 2 200 ms a second: rank 3 is late
    (5.94 s outside MPI against the others' median 4.80 s), rank 1 waits for it."""
    frames = [waitall_frame(k, r) for k in range(6) for r in range(RANKS)]
    statuses = [s for s, _ in exchange(collector.address, b"".join(frames), acks=len(frames))]
    assert statuses == [0] * len(frames)
    params = {"from": M0 // S, "to": M0 // S + 7, "step": 1}
    answer = api_client.get("/api/jobs/waits/profile", params=params).json()
    assert answer["outliers"] == [
        {"rank": 3, "role": "late", "what": "computation", "time_ns": 5940 * MS,
         "median_ns": 4800 * MS, "excess_ns": 1140 * MS, "share": 0.19, "op": "MPI_Waitall",
         "ranks": [0, 1, 2], "peak_t_ns": M0 + S,
         "text": "rank 3 arrives last at MPI_Waitall: 1.14 s more computing than the median "
                 "rank (19% of the elapsed time); ranks 0–2 wait for it",
         "site": None, "site_key": None},
        {"rank": 1, "role": "waiting", "what": "inside MPI", "time_ns": 2650 * MS,
         "median_ns": 1200 * MS, "excess_ns": 1450 * MS, "share": 0.2417, "op": "MPI_Waitall",
         "ranks": [3], "peak_t_ns": M0 + 4 * S,
         "text": "rank 1 waits for rank 3 (late): 1.45 s more inside MPI than the median rank "
                 "(24% of the elapsed time), most in MPI_Waitall",
         "site": None, "site_key": None},
    ]  # fmt: skip
