"""1-minute rollups equal the raw deltas, also after late frames and a second pass."""

from __future__ import annotations

import asyncio

from stacklens import wire
from stacklens.constants import MINUTE_NS
from tests.collector.test_ingest import exchange
from tests.conftest import query

M0 = 1_700_000_040 * 10**9  # a minute boundary (2023-11-14 22:14 UTC)


def frame(seq: int, end_ns: int, rank: int = 0, bytes_sent: int = 100) -> bytes:
    return wire.encode_frame(
        job_id="roll", world_rank=rank, world_size=2, seq=seq, token="secret",
        interval_start_ns=end_ns - 10**9, interval_end_ns=end_ns,
        tables={"p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": bytes_sent,
                                              "msgs_sent": 2, "bytes_recv": 7,
                                              "msgs_recv": 1}])},
    )  # fmt: skip


RAW_BY_MINUTE = f"""
SELECT t_end_ns / {MINUTE_NS} * {MINUTE_NS}, world_rank, peer, sum(bytes_sent)::bigint,
       sum(msgs_sent)::bigint, sum(bytes_recv)::bigint, sum(msgs_recv)::bigint
FROM p2p_deltas GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""
ROLLUP = """
SELECT minute_ns, world_rank, peer, bytes_sent, msgs_sent, bytes_recv, msgs_recv
FROM p2p_minutes ORDER BY 1, 2, 3
"""


def roll_up(collector) -> int:
    job = collector.service.roll_up_once()
    return asyncio.run_coroutine_threadsafe(job, collector.loop).result(30)


def test_rollups_match_raw_data_including_late_frames(collector, pg_url):
    frames = b"".join(
        frame(seq, M0 + seq * 20 * 10**9 + 1, bytes_sent=100 + seq) for seq in range(6)
    )  # 6 frames, 20 s apart: minutes M0, M0+1, M0+1 ... spread over two minutes
    exchange(collector.address, frames + frame(0, M0 + 5 * 10**9, rank=1), acks=7)
    assert roll_up(collector) > 0
    assert query(pg_url, ROLLUP) == query(pg_url, RAW_BY_MINUTE)
    assert query(pg_url, "SELECT count(*) FROM rollup_dirty") == [(0,)]

    # A frame that arrives late for an already rolled-up minute: the bucket is recomputed.
    exchange(collector.address, frame(9, M0 + 30 * 10**9, bytes_sent=5000), acks=1)
    assert query(pg_url, "SELECT job_id, minute_ns FROM rollup_dirty") == [(1, M0)]
    roll_up(collector)
    assert query(pg_url, ROLLUP) == query(pg_url, RAW_BY_MINUTE)
    assert query(
        pg_url, f"SELECT bytes_sent FROM p2p_minutes WHERE minute_ns = {M0} AND world_rank = 0"
    ) == [(100 + 101 + 102 + 5000,)]
    assert roll_up(collector) == 0  # nothing dirty: nothing to do


OPS_BY_SECOND = """
SELECT t_end_ns / 1000000000 * 1000000000, op_id, sum(calls)::bigint, sum(bytes)::bigint,
       sum(time_ns)::bigint
FROM op_deltas GROUP BY 1, 2 ORDER BY 1, 2
"""


def test_op_seconds_match_raw_data_including_late_frames(collector, pg_url):
    def ops_frame(seq: int, end_ns: int, rank: int, time_ns: int) -> bytes:
        records = [{"op_id": 4, "calls": 1, "bytes": 8, "time_ns": time_ns},
                   {"op_id": 7, "calls": 2, "bytes": 0, "time_ns": 3}]  # fmt: skip
        return wire.encode_frame(
            job_id="roll-ops", world_rank=rank, world_size=2, seq=seq, token="secret",
            interval_start_ns=end_ns - 10**9, interval_end_ns=end_ns,
            tables={"op": wire.records("op", records)},
        )  # fmt: skip

    # two ranks, frames 700 ms apart over two minutes (no p2p): several in some seconds
    frames = [ops_frame(k, M0 + k * 700_000_000, r, 100 * k + r) for k in range(1, 150)
              for r in (0, 1)]  # fmt: skip
    exchange(collector.address, b"".join(frames), acks=len(frames))
    roll_up(collector)  # (the collector's own passes may have done part of it already)
    rolled = "SELECT second_ns, op_id, calls, bytes, time_ns FROM op_seconds ORDER BY 1, 2"
    assert query(pg_url, rolled) == query(pg_url, OPS_BY_SECOND) != []
    assert query(pg_url, "SELECT count(*) FROM rollup_dirty") == [(0,)]
    exchange(collector.address, ops_frame(500, M0 + 30 * 10**9, 0, 10**6), acks=1)
    assert query(pg_url, "SELECT minute_ns FROM rollup_dirty") == [(M0,)]
    roll_up(collector)
    assert query(pg_url, rolled) == query(pg_url, OPS_BY_SECOND)
    in_second_30 = [k for k in range(1, 150) if 30 * 10**9 <= k * 700_000_000 < 31 * 10**9]
    assert in_second_30 == [43, 44]
    want = sum(100 * k + r for k in in_second_30 for r in (0, 1)) + 10**6
    assert query(pg_url, f"SELECT time_ns FROM op_seconds WHERE second_ns = {M0 + 30 * 10**9} "
                 "AND op_id = 4") == [(want,)]  # fmt: skip
