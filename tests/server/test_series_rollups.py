"""The series rollups (`io_seconds`, `peer_minutes`, `rank_value_minutes`, migration 0020)
equal the sums of the raw deltas exactly, also after a late frame and a second pass; a
series read from the rollups (whole-second or whole-minute steps) equals the same window
read from the raw deltas, with minutes still dirty and once all are rolled up; an empty
window is empty; an answer over the size bound is refused with 422 naming the step that
fits, or, with the step chosen, coarsened to it."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.families import repository as families_repo
from server.jobs import repository as jobs_repo
from server.jobs import series
from server.jobs.repository import Scope
from server.query_params import ALL_TIME
from server.traffic import repository as traffic_repo
from server.traffic.repository import TrafficConfig
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_classes, op_names
from stacklens.schema import SHARE_CLASSES, Job
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0, roll_up
from tests.conftest import query
from tests.server.test_job_windows import S, job  # noqa: F401 (fixture)

BASE = "/api/jobs/windows/series"

#: Each rollup, and the same sums made from the raw deltas.
ROLLUPS = {
    "io_seconds": (
        "SELECT second_ns, phase, layer, path, reads, writes, bytes_read, bytes_written, time_ns "
        "FROM io_seconds ORDER BY 1, 2, 3, 4",
        "SELECT t_end_ns / 1000000000 * 1000000000, phase, layer, path, sum(reads)::bigint, "
        "sum(writes)::bigint, sum(bytes_read)::bigint, sum(bytes_written)::bigint, "
        "sum(read_time_ns + write_time_ns + meta_time_ns)::bigint FROM io_deltas "
        "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
    ),
    "peer_minutes": (
        "SELECT minute_ns, peer, bytes_sent, msgs_sent FROM peer_minutes ORDER BY 1, 2",
        "SELECT t_end_ns / 60000000000 * 60000000000, peer, sum(bytes_sent)::bigint, "
        "sum(msgs_sent)::bigint FROM p2p_deltas GROUP BY 1, 2 ORDER BY 1, 2",
    ),
    "rank_value_minutes": (
        "SELECT minute_ns, world_rank, mpi_calls, mpi_time_ns, bytes_sent, io_bytes, "
        "io_time_ns, file_io_ns FROM rank_value_minutes ORDER BY 1, 2",
        "SELECT minute, rank, sum(calls)::bigint, sum(ns)::bigint, sum(sent)::bigint, "
        "sum(io)::bigint, sum(io_ns)::bigint, sum(file_ns)::bigint FROM ("
        " SELECT t_end_ns / 60000000000 * 60000000000 AS minute, world_rank AS rank, calls, "
        "  time_ns AS ns, 0 AS sent, 0 AS io, 0 AS io_ns, 0 AS file_ns FROM op_deltas"
        " UNION ALL SELECT t_end_ns / 60000000000 * 60000000000, world_rank, 0, 0, bytes_sent,"
        "  0, 0, 0 FROM p2p_deltas"
        " UNION ALL SELECT t_end_ns / 60000000000 * 60000000000, world_rank, 0, 0, 0, "
        "  bytes_read + bytes_written, read_time_ns + write_time_ns + meta_time_ns, "
        "  CASE WHEN layer IN (1, 2) THEN read_time_ns + write_time_ns + meta_time_ns "
        "  ELSE 0 END FROM io_deltas WHERE phase = 0) u GROUP BY 1, 2 ORDER BY 1, 2",
    ),
}


def test_the_rollups_are_the_raw_sums(job, collector, pg_url):  # noqa: F811
    roll_up(collector)  # the late frame's minute too
    assert query(pg_url, "SELECT count(*) FROM rollup_dirty") == [(0,)]
    for rolled, raw in ROLLUPS.values():
        assert query(pg_url, rolled) == query(pg_url, raw) != []
    # rank 0's minute M0: intervals 0-5 (ends M0 + 10 k s + 1 ns), MPI_Send time k, 10 (k + 1)
    # bytes to rank 1, 100 k bytes written by POSIX (no time)
    assert query(pg_url, f"SELECT mpi_calls, mpi_time_ns, bytes_sent, io_bytes FROM "
                 f"rank_value_minutes WHERE minute_ns = {M0} AND world_rank = 0") == [
        (6, 15, 10 * 21, 100 * 15)]  # fmt: skip
    # another late frame for a rolled-up minute: recomputed, still the raw sums
    exchange(collector.address, late_frame(), acks=1)
    assert query(pg_url, "SELECT minute_ns FROM rollup_dirty") == [(M0,)]
    roll_up(collector)
    for rolled, raw in ROLLUPS.values():
        assert query(pg_url, rolled) == query(pg_url, raw)


def late_frame() -> bytes:
    """A frame of rank 1 with sequence number 40 ending in minute M0 (I/O and traffic)."""
    return wire.encode_frame(
        job_id="windows", world_rank=1, world_size=2, seq=40, token="secret",
        interval_start_ns=M0 + 30 * S, interval_end_ns=M0 + 35 * S,
        tables={
            "p2p": wire.records("p2p", [{"peer": 0, "bytes_sent": 7000, "msgs_sent": 3}]),
            "io": wire.records("io", [{"layer": 2, "writes": 1, "bytes_written": 9,
                                       "write_time_ns": 77, "path": b"/tmp/late",
                                       "mount": b"/", "fstype": b"ext4"}]),
        },
    )  # fmt: skip


def points(api_client, params: dict) -> list[tuple]:
    answer = api_client.get(BASE, params=params)
    assert answer.status_code == 200, answer.text
    return [(p["t_ns"], p["key"], p["values"]) for p in answer.json()["points"]]


@pytest.mark.parametrize(
    ("by", "step"),
    [("category", 1), ("op", 1), ("file", 1), ("rank", 60), ("peer", 60), ("category", 60)],
)
def test_rolled_up_and_raw_readings_agree(job, collector, api_client, by, step):  # noqa: F811
    """[M0, M0 + 180 s) in whole steps reads the rollups (its last minute is dirty: raw);
    [M0 - 0.5 s, M0 + 179.5 s) holds the same intervals in the same steps, read raw."""
    rolled = {"by": by, "step": step, "from": M0 // S, "to": M0 // S + 180}
    raw = {**rolled, "from": f"{M0 // S - 1}.5", "to": f"{M0 // S + 179}.5"}

    def shifted() -> list[tuple]:
        return [(t + S // 2, k, v) for t, k, v in points(api_client, raw)]

    want = shifted()
    assert want != [] and points(api_client, rolled) == want
    roll_up(collector)  # every minute rolled up
    assert points(api_client, rolled) == want == shifted()
    empty = {**rolled, "from": M0 // S + 1000, "to": M0 // S + 1060}
    assert points(api_client, empty) == []


def test_too_large_answers_are_refused_or_coarsened(job, api_client, monkeypatch):  # noqa: F811
    # by rank: the job's 2 ranks x 10,000 one-second steps, counted before any query
    long = {"from": M0 // S, "to": M0 // S + 10_000}
    refused = api_client.get(BASE, params={**long, "by": "rank", "step": 1})
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "by=rank at step=1 s over 10000 s is 20,000 points (2 keys x 10,000 steps), more than "
        "16,384: ask for step >= 2 s or a shorter window, or leave step out (chosen to fit)"
    )
    chosen = api_client.get(BASE, params={**long, "by": "rank"}).json()
    assert chosen["step_ns"] == 30 * S  # 334 steps: within 600 steps and 16,384 points
    profile = api_client.get("/api/jobs/windows/profile", params={**long, "step": 1})
    assert profile.status_code == 422
    assert "20,000 rank x step cells (2 ranks), more than 16,384" in profile.json()["detail"]

    # by category: the points found; with the step chosen, the step that fits them
    monkeypatch.setattr(series, "MAX_POINTS", 4)
    whole = {"from": M0 // S, "to": M0 // S + 180}
    refused = api_client.get(BASE, params={**whole, "step": 1})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith(
        "by=category at step=1 s over 180 s is 36 points (2 keys x 180 steps), more than 4: "
        "ask for step >= 120 s"
    )
    coarse = api_client.get(BASE, params=whole).json()
    assert coarse["step_ns"] == 120 * S  # 2 keys x 2 steps
    assert [(p["t_ns"], p["key"]) for p in coarse["points"]] == [
        (M0, "mpi_p2p"), (M0, "fs:POSIX"), (M0 + 120 * S, "mpi_p2p"), (M0 + 120 * S, "fs:POSIX")
    ]  # fmt: skip


def test_per_rank_readings_of_many_rank_seconds_take_whole_minutes(
    job,  # noqa: F811
    api_client,
    monkeypatch,
):
    """A chosen step under a minute reads a per-rank series or profile raw: past
    MAX_RAW_RANK_SECONDS (ranks x window) it is a whole minute, the rollups' step."""
    whole = {"from": M0 // S, "to": M0 // S + 180}
    assert api_client.get(BASE, params={**whole, "by": "rank"}).json()["step_ns"] == S
    monkeypatch.setattr(series, "MAX_RAW_RANK_SECONDS", 2 * 180 - 1)  # 2 ranks x 180 s
    for by in ("rank", "peer"):
        assert api_client.get(BASE, params={**whole, "by": by}).json()["step_ns"] == 60 * S
    profile = api_client.get("/api/jobs/windows/profile", params=whole).json()
    assert profile["step_ns"] == 60 * S
    assert api_client.get(BASE, params=whole).json()["step_ns"] == S  # by category: no ranks
    given = api_client.get(BASE, params={**whole, "by": "rank", "step": 1}).json()
    assert given["step_ns"] == S  # a given step is kept


# ---- the five-minute rollups (migration 0021) ------------------------------------------

#: A five-minute boundary (M0 + 60 s); the "fives" job's intervals end every 30 s (1 ns past
#: a 30-second mark) from two minutes before it to eleven minutes after: a partial five
#: minutes, two whole ones, a partial one.
F0 = M0 + 60 * S
FIVE_ENDS = [F0 - 120 * S + k * 30 * S + 1 for k in range(26)]
FIVES = "/api/jobs/fives"


def five_frame(k: int, rank: int, seq: int | None = None, extra: int = 0, run: int = 1) -> bytes:
    """Interval k of the two-rank "fives" job (sequence number `seq`, default k; MPI run
    `run`): traffic, MPI_Send and MPI_Allreduce (also as a collective of communicator 1)
    and POSIX writes whose values name the interval and rank (plus `extra`)."""
    op = op_names().index
    v = (k + 1) * (rank + 1) + extra
    tables: dict[str, list[dict[str, Any]]] = {
        "p2p": [{"peer": 1 - rank, "bytes_sent": 10 * v, "msgs_sent": 1}],
        "op": [{"op_id": op("MPI_Send"), "calls": 1, "bytes": 10 * v, "time_ns": v},
               {"op_id": op("MPI_Allreduce"), "calls": 1, "bytes": 8, "time_ns": 1000 * v}],
        "coll": [{"op_id": op("MPI_Allreduce"), "comm_id": 1, "comm_size": 2,
                  "root": 0xFFFFFFFF, "calls": 1, "bytes": 8, "time_ns": 1000 * v}],
        "io": [{"layer": 1, "writes": 1, "bytes_written": 100 * v, "write_time_ns": 7 * v,
                "path": b"/tmp/out", "mount": b"/", "fstype": b"ext4"}],
    }  # fmt: skip
    return wire.encode_frame(
        job_id="fives", run_id=run, world_rank=rank, world_size=2, seq=k if seq is None else seq,
        token="secret", interval_start_ns=FIVE_ENDS[k] - 30 * S, interval_end_ns=FIVE_ENDS[k],
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )  # fmt: skip


@pytest.fixture
def fives(collector):
    """The "fives" job stored and rolled up."""
    frames = [five_frame(k, rank) for k in range(len(FIVE_ENDS)) for rank in (0, 1)]
    n = len(frames)
    assert [s for s, _ in exchange(collector.address, b"".join(frames), acks=n)] == [0] * n
    assert roll_up(collector) > 0
    return collector


def _per_five(sql: str) -> str:
    return sql.replace("60000000000", "300000000000")


#: Each five-minute rollup, and the same sums made from the raw deltas.
FIVE_ROLLUPS = {
    "rank_fives": (
        "SELECT minute_ns, world_rank, first_start_ns, last_end_ns FROM rank_fives ORDER BY 1, 2",
        "SELECT t_end_ns / 300000000000 * 300000000000, world_rank, min(t_start_ns), "
        "max(t_end_ns) FROM (SELECT world_rank, t_start_ns, t_end_ns FROM op_frames UNION ALL "
        "SELECT world_rank, t_start_ns, t_end_ns FROM io_deltas) d GROUP BY 1, 2 ORDER BY 1, 2",
    ),
    "rank_op_fives": (
        "SELECT minute_ns, world_rank, op_id, calls, time_ns FROM rank_op_fives ORDER BY 1, 2, 3",
        "SELECT t_end_ns / 300000000000 * 300000000000, world_rank, op_id, sum(calls)::bigint, "
        "sum(time_ns)::bigint FROM op_deltas GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    ),
    "coll_fives": (
        "SELECT minute_ns, world_rank, comm_id, comm_size, op_id, root, calls, time_ns, bytes "
        "FROM coll_fives ORDER BY 1, 2, 3, 4, 5, 6",
        "SELECT t_end_ns / 300000000000 * 300000000000, world_rank, comm_id, comm_size, op_id, "
        "root, sum(calls)::bigint, sum(time_ns)::bigint, sum(bytes)::bigint FROM coll_deltas "
        "GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6",
    ),
    "coll_minutes": tuple(
        sql.replace("300000000000", "60000000000").replace("coll_fives", "coll_minutes")
        for sql in (
            "SELECT minute_ns, world_rank, comm_id, comm_size, op_id, root, calls, time_ns, "
            "bytes FROM coll_fives ORDER BY 1, 2, 3, 4, 5, 6",
            "SELECT t_end_ns / 300000000000 * 300000000000, world_rank, comm_id, comm_size, "
            "op_id, root, sum(calls)::bigint, sum(time_ns)::bigint, sum(bytes)::bigint FROM "
            "coll_deltas GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6",
        )
    ),
    "peer_fives": tuple(
        _per_five(sql).replace("peer_minutes", "peer_fives") for sql in ROLLUPS["peer_minutes"]
    ),
    "rank_value_fives": tuple(
        _per_five(sql).replace("rank_value_minutes", "rank_value_fives")
        for sql in ROLLUPS["rank_value_minutes"]
    ),
    # per job (its runs summed): the time its intervals cover (as rank_fives), then per
    # op_class the time inside MPI and, in io_ns, POSIX and stdio's file I/O (layers 1, 2)
    "rank_share_fives": (
        f"SELECT minute_ns, world_rank, elapsed_ns, {', '.join(SHARE_CLASSES)} "
        "FROM rank_share_fives ORDER BY 1, 2",
        "SELECT five, world_rank, "
        + ", ".join(f"sum({c})::bigint" for c in ("elapsed_ns", *SHARE_CLASSES))
        + " FROM (SELECT t_end_ns / 300000000000 * 300000000000 AS five, run_id, world_rank, "
        "max(t_end_ns) - min(t_start_ns) AS elapsed_ns, "
        + ", ".join(
            f"coalesce(sum(ns) FILTER (WHERE cls = {k}), 0) AS {name}"
            for k, name in enumerate(SHARE_CLASSES)
        )  # fmt: skip
        + " FROM (SELECT run_id, world_rank, t_start_ns, t_end_ns, NULL AS cls, 0 AS ns "
        "FROM op_frames UNION ALL SELECT run_id, world_rank, t_start_ns, t_end_ns, CASE WHEN "
        f"phase = 0 AND layer IN (1, 2) THEN {SHARE_CLASSES.index('io_ns')} END, "
        "read_time_ns + write_time_ns + meta_time_ns FROM io_deltas UNION ALL SELECT run_id, "
        f"world_rank, t_start_ns, t_end_ns, ('{{{','.join(map(str, op_classes()))}}}'::int[])"
        "[op_id + 1], time_ns FROM op_deltas) d GROUP BY 1, 2, 3) per_run "
        "GROUP BY 1, 2 ORDER BY 1, 2",
    ),
}


def test_the_five_minute_rollups_are_the_raw_sums(fives, collector, pg_url):
    assert query(pg_url, "SELECT count(*) FROM rollup_dirty") == [(0,)]
    for rolled, raw in FIVE_ROLLUPS.values():
        assert query(pg_url, rolled) == query(pg_url, raw) != []
    # rank 1's five minutes F0: intervals 4-13, MPI_Send time 2 (k + 1) each
    assert query(pg_url, f"SELECT calls, time_ns FROM rank_op_fives WHERE minute_ns = {F0} "
                 f"AND world_rank = 1 AND op_id = {op_names().index('MPI_Send')}") == [
        (10, sum(2 * (k + 1) for k in range(4, 14)))]  # fmt: skip
    # and its share: intervals 4-13, MPI_Send (mpi_p2p) 2 (k + 1), MPI_Allreduce (mpi_coll)
    # 2000 (k + 1), POSIX writes 14 (k + 1)
    assert query(pg_url, f"SELECT * FROM rank_share_fives WHERE minute_ns = {F0} "
                 "AND world_rank = 1") == [(
        query(pg_url, "SELECT id FROM jobs")[0][0], F0, 1, FIVE_ENDS[13] - FIVE_ENDS[4] + 30 * S,
        190, 0, 190_000, 0, 0, 7 * 190, 0, 0,
    )]  # fmt: skip
    # a late frame (a new sequence number) in a rolled-up five minutes: recomputed with its
    # minute in the next pass, still the raw sums; a second pass changes nothing
    exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)
    assert query(pg_url, "SELECT minute_ns FROM rollup_dirty") == [(F0 + 60 * S,)]
    roll_up(collector)
    for rolled, raw in FIVE_ROLLUPS.values():
        assert query(pg_url, rolled) == query(pg_url, raw)
    before = [query(pg_url, rolled) for rolled, _ in FIVE_ROLLUPS.values()]
    roll_up(collector)
    assert [query(pg_url, rolled) for rolled, _ in FIVE_ROLLUPS.values()] == before


def _reading(api_client, route: str, params: dict) -> list:
    answer = api_client.get(f"{FIVES}/{route}", params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    if route == "series":
        return [(p["t_ns"], p["key"], p["values"]) for p in body["points"]]
    return [body["shares"], body["imbalance"], body["outliers"]]


def _shifted(reading: list, route: str) -> list:
    """A reading of the window half a second earlier, its steps' starts moved to the
    window's."""
    if route == "series":
        return [(t + S // 2, k, v) for t, k, v in reading]
    return [[{**s, "t_ns": s["t_ns"] + S // 2} for s in reading[0]], *reading[1:]]


CASES = [("series", {"by": "rank"}), ("series", {"by": "peer"}), ("profile", {})]


@pytest.mark.parametrize(("route", "params"), CASES)
def test_five_minute_readings_agree_with_raw(fives, collector, pg_url, api_client, route, params):
    """[F0, F0 + 11 min) at 5-minute steps reads two whole five minutes from the five-minute
    rollups (one of them, with a dirty minute, from its minutes and raw deltas until the next
    pass) and the last, partial one from minutes and raw deltas; the same window half a
    second earlier is read from the raw deltas alone: the same sums."""
    rolled = {**params, "step": 300, "from": F0 // S, "to": F0 // S + 660}
    raw = {**rolled, "from": f"{F0 // S - 1}.5", "to": f"{F0 // S + 659}.5"}
    want = _shifted(_reading(api_client, route, raw), route)
    assert want[0] != [] and _reading(api_client, route, rolled) == want
    exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)  # in F0's five
    want = _shifted(_reading(api_client, route, raw), route)
    assert _reading(api_client, route, rolled) == want
    roll_up(collector)
    assert _reading(api_client, route, rolled) == want
    # the whole five minutes F0 is read from its five-minute rollup, not from its minutes
    five = f"minute_ns >= {F0} AND minute_ns < {F0 + 300 * S}"
    for table in ("rank_minutes", "rank_op_minutes", "coll_minutes", "peer_minutes",
                  "rank_value_minutes"):  # fmt: skip
        assert query(pg_url, f"DELETE FROM {table} WHERE {five} RETURNING 1") != []
    assert _reading(api_client, route, rolled) == want
    if route == "profile":  # and its shares from rank_share_fives, not made from the others
        for table in ("rank_fives", "rank_value_fives"):
            assert query(pg_url, f"DELETE FROM {table} WHERE {five} RETURNING 1") != []
        assert _reading(api_client, route, rolled) == want


def test_five_minute_shares_sum_the_runs(fives, collector, pg_url, api_client):
    """A second run of the job in the five minutes F0 (a relaunch, both ranks, intervals
    5-8): rank_share_fives sums the two runs as the raw deltas do, and the profile read
    from it is the one made from the raw deltas."""
    frames = [five_frame(k, rank, seq=k - 5, extra=3, run=2) for k in range(5, 9)
              for rank in (0, 1)]  # fmt: skip
    exchange(collector.address, b"".join(frames), acks=len(frames))
    roll_up(collector)
    assert query(
        pg_url, f"SELECT count(DISTINCT run_id) FROM rank_fives WHERE minute_ns = {F0}"
    ) == [(2,)]
    rolled_shares, raw_shares = FIVE_ROLLUPS["rank_share_fives"]  # (the others are per run)
    assert query(pg_url, rolled_shares) == query(pg_url, raw_shares)
    rolled = {"step": 300, "from": F0 // S, "to": F0 // S + 660}
    raw = {**rolled, "from": f"{F0 // S - 1}.5", "to": f"{F0 // S + 659}.5"}
    want = _shifted(_reading(api_client, "profile", raw), "profile")
    assert want[0] != [] and _reading(api_client, "profile", rolled) == want


def test_a_jobs_operations_are_read_from_the_rollups_and_are_the_raw_sums(
    fives, collector, pg_url, api_client
):
    """The job's operations over [F0, F0 + 11 min) and over all time come from the rollups
    (`op_seconds`, `rank_op_minutes`/`_fives`), with a dirty minute and once rolled up: the
    same as the window half a second earlier (and all time from 0.5 s), read from the raw
    deltas alone; with a five minutes of `op_seconds` gone, the rolled reading changes."""
    rolled = {"from": F0 // S, "to": F0 // S + 660}
    raw = {"from": f"{F0 // S - 1}.5", "to": f"{F0 // S + 659}.5"}

    def ops(params: dict) -> list:
        answer = api_client.get(f"{FIVES}/ops", params=params)
        assert answer.status_code == 200, answer.text
        return answer.json()["ops"]

    want = ops(raw)
    assert want != [] and ops(rolled) == want and ops({}) == ops({"from": "0.5"})
    exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)  # in F0's five
    want = ops(raw)
    assert ops(rolled) == want and ops({}) == ops({"from": "0.5"})
    roll_up(collector)
    assert ops(rolled) == want and ops({}) == ops({"from": "0.5"})
    send = next(o for o in want if o["op"] == "MPI_Send")
    assert (send["ranks"], send["calls"]) == (2, 45), send
    gone = f"second_ns >= {F0} AND second_ns < {F0 + 300 * S}"
    assert query(pg_url, f"DELETE FROM op_seconds WHERE {gone} RETURNING 1") != []
    assert ops(rolled) != want


def test_the_members_of_a_communicator_come_from_the_rollups(fives, collector, pg_url):
    """The attribution models a collective over its communicator's members, the ranks with a
    collective row on it at any time: read from `coll_minutes` for the minutes rolled up and
    from the raw deltas for a dirty one, the same transfers either way; with the minute
    rollups gone, neither the members nor the collectives of the clean minutes are read
    (their sums come from the same rollups: test_the_collective_sums_come_from_the_rollups)."""
    engine = make_engine(pg_url)

    def traffic() -> tuple[list, dict]:
        with Session(engine) as session:
            job = session.scalars(select(Job.id).where(Job.job_key == "fives")).one()
            got = traffic_repo.job_traffic(session, ALL_TIME, TrafficConfig(), [job])
            return sorted(got.transfers, key=repr), got.left_out

    try:
        transfers, left = traffic()
        colls = [t for t in transfers if t.category == "mpi_coll"]
        assert colls != [] and "unmodelled_collective" not in left
        exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)  # dirty
        transfers, left = traffic()
        assert "unmodelled_collective" not in left
        assert [t for t in transfers if t.category == "mpi_coll"] != colls
        roll_up(collector)
        assert traffic() == (transfers, left)
        assert query(pg_url, "DELETE FROM coll_minutes RETURNING 1") != []
        transfers, left = traffic()
        assert [t for t in transfers if t.category == "mpi_coll"] == []
        assert "unmodelled_collective" not in left  # the collectives' sums went with them
    finally:
        engine.dispose()


def test_the_attributed_p2p_bytes_come_from_the_rollups(fives, collector, pg_url):
    """The attribution's point-to-point transfers and the families' bytes per pair are the
    deltas' exact sums (rank 0 sent 10 x (1 + ... + 26) = 3,510 B to rank 1, rank 1 twice
    that), read from `p2p_minutes` for the window's whole clean minutes: a minute made dirty
    is read raw (rank 0's interval sent again with 120 B: the same sums after its roll-up),
    and with the minute rollups gone nothing of the clean minutes is read."""
    engine = make_engine(pg_url)

    def sums() -> tuple[int, dict[tuple[int, int], int]]:
        with Session(engine) as session:
            job = session.scalars(select(Job.id).where(Job.job_key == "fives")).one()
            got = traffic_repo.job_traffic(session, ALL_TIME, TrafficConfig(), [job])
            pairs = families_repo.pair_bytes(session, Scope(job))
        sent = sum(t.nbytes for t in got.transfers if t.category == "mpi_p2p")
        return sent, {(a, b): n for (_run, a, b), n in pairs.items()}

    try:
        assert sums() == (10_530, {(0, 1): 3_510, (1, 0): 7_020})
        exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)  # dirty
        assert sums() == (10_650, {(0, 1): 3_630, (1, 0): 7_020})
        roll_up(collector)
        assert sums() == (10_650, {(0, 1): 3_630, (1, 0): 7_020})
        assert query(pg_url, "DELETE FROM p2p_minutes RETURNING 1") != []
        assert sums() == (0, {})
    finally:
        engine.dispose()


def test_the_collective_sums_come_from_the_rollups(fives, collector, pg_url):
    """A job's collective sums with bytes and root (the families' collectives, the job's
    collective totals) are the deltas' exact sums (each rank: 26 MPI_Allreduce calls of 8 B
    on communicator 1, 1,000 x (1 + ... + 26) ns, rank 1 twice that), read from
    `coll_minutes` for the window's whole clean minutes: a minute made dirty is read raw
    (rank 0's interval sent again: the same sums after its roll-up), and with the minute
    rollups gone nothing of the clean minutes is read."""
    engine = make_engine(pg_url)
    allreduce = op_names().index("MPI_Allreduce")

    def sums() -> tuple[list[tuple[int, ...]], list[tuple[int, int, int]]]:
        with Session(engine) as session:
            job = session.scalars(select(Job.id).where(Job.job_key == "fives")).one()
            colls = families_repo.collectives(session, Scope(job))
            _, per_op = jobs_repo.collective_totals(session, Scope(job))
        rows = sorted(row[1:] for row in colls)  # without the run's id
        return rows, [(c["calls"], c["bytes"], c["time_ns"]) for c in per_op]

    def want(calls: int, ns: int) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """Rank 0 with `calls` calls and `ns` ns, rank 1 as sent."""
        rows: list[tuple[int, ...]] = [(0, 1, 2, allreduce, -1, calls, 8 * calls, ns),
                                       (1, 1, 2, allreduce, -1, 26, 208, 702_000)]  # fmt: skip
        return rows, [(calls + 26, 8 * (calls + 26), ns + 702_000)]

    try:
        assert sums() == want(26, 351_000)
        exchange(collector.address, five_frame(6, 0, seq=900, extra=5), acks=1)  # dirty
        assert sums() == want(27, 363_000)  # its call: 1,000 x (7 x 1 + 5) ns
        roll_up(collector)
        assert sums() == want(27, 363_000)
        assert query(pg_url, "DELETE FROM coll_minutes RETURNING 1") != []
        assert sums() == ([], [])
    finally:
        engine.dispose()
