"""The series rollups (`io_seconds`, `peer_minutes`, `rank_value_minutes`, migration 0020)
equal the sums of the raw deltas exactly, also after a late frame and a second pass; a
series read from the rollups (whole-second or whole-minute steps) equals the same window
read from the raw deltas, with minutes still dirty and once all are rolled up; an empty
window is empty; an answer over the size bound is refused with 422 naming the step that
fits, or, with the step chosen, coarsened to it."""

from __future__ import annotations

import pytest

from server.jobs import series
from stacklens import wire
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
