"""Daily partitions created ahead and on demand; retention drops whole partitions and jobs."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from collector.service import BackgroundCollector
from collector.store.partitions import day_of, partition_name
from stacklens import wire
from stacklens.constants import DAY_NS
from tests.collector.test_ingest import exchange
from tests.conftest import query

DAY0 = day_of(1_700_000_000_000_000_000)  # 2023-11-14


def partitions(url: str, table: str = "p2p_frames") -> list[str]:
    return [
        name
        for (name,) in query(
            url,
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY 1",
            (table,),
        )
    ]


def frame_on_day(day: int, seq: int, job: str = "job-D", **kw) -> bytes:
    end = day * DAY_NS + 3600 * 10**9
    return wire.encode_frame(
        job_id=job, world_rank=0, world_size=2, seq=seq, token="secret",
        interval_start_ns=end - 10**9, interval_end_ns=end,
        tables={"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": 10 + seq,
                                              "msgs_sent": 1}])},
        **kw,
    )  # fmt: skip


@pytest.fixture
def clean_partitions(pg_url):
    """Drop every partition before and after the test (they outlive TRUNCATE)."""

    def drop():
        from collector.store.tables import DELTA_TABLES

        for table in DELTA_TABLES:
            for name in partitions(pg_url, table.sql):
                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute(f"DROP TABLE {name}")

    drop()
    yield pg_url
    drop()


def test_partition_names():
    assert partition_name("p2p_frames", DAY0) == "p2p_frames_p20231114"


def test_partitions_are_created_for_the_days_frames_need(clean_partitions, collector):
    url = clean_partitions
    acks = exchange(collector.address, frame_on_day(DAY0, 0) + frame_on_day(DAY0 + 2, 1), acks=2)
    assert acks == [(0, 0), (0, 1)]
    maintained = collector.service.maintained.wait()
    asyncio.run_coroutine_threadsafe(maintained, collector.loop).result(30)
    today = day_of(time.time_ns())
    ahead = [partition_name("p2p_frames", d) for d in range(today, today + 3)]  # at start
    assert partitions(url) == ["p2p_frames_p20231114", "p2p_frames_p20231116", *ahead]
    assert partitions(url, "io_deltas")[:2] == ["io_deltas_p20231114", "io_deltas_p20231116"]
    sent = "bytes[1:cardinality(bytes) / 2]"  # bytes_sent (packed before bytes_recv)
    assert query(url, f"SELECT tableoid::regclass::text, {sent} FROM p2p_frames ORDER BY 2") == [
        ("p2p_frames_p20231114", [10]),
        ("p2p_frames_p20231116", [11]),
    ]


def test_maintenance_creates_ahead_and_applies_retention(clean_partitions):
    url = clean_partitions
    with BackgroundCollector(url, token="secret") as running:
        exchange(running.address, frame_on_day(DAY0, 0, job="old"), acks=1)
        exchange(running.address, frame_on_day(DAY0 + 5, 1, job="new"), acks=1)
        service = running.service
        wait = asyncio.run_coroutine_threadsafe(service.maintained.wait(), running.loop)
        wait.result(30)  # the pass at start (no retention) is over
        service.retention_days = 3
        now = (DAY0 + 6) * DAY_NS + 7200 * 10**9  # day 6, 02:00: the cutoff is day 3, 02:00
        asyncio.run_coroutine_threadsafe(service.maintain_once(now), running.loop).result(30)
        # The writer still remembers the deleted job's id: a later frame of that job key
        # must go to a new job row, not to the deleted id.
        assert exchange(running.address, frame_on_day(DAY0 + 4, 2, job="old"), acks=1) == [
            (wire.Status.COMMITTED, 2)
        ]
    today = day_of(time.time_ns())  # created ahead when the collector started
    assert partitions(url) == [
        "p2p_frames_p20231118",  # the late frame of "old"
        "p2p_frames_p20231119", "p2p_frames_p20231120", "p2p_frames_p20231121",
        "p2p_frames_p20231122", *(partition_name("p2p_frames", d) for d in range(today, today + 3)),
    ]  # fmt: skip
    assert query(
        url, "SELECT job_key, sum(bytes_sent) FROM p2p_deltas JOIN jobs ON jobs.id = job_id "
        "GROUP BY job_key ORDER BY job_key",
    ) == [("new", 11), ("old", 12)]  # fmt: skip
    assert query(url, "SELECT count(*) FROM p2p_deltas") == [(2,)]
    assert query(
        url, "SELECT job_key, seq FROM received_frames JOIN jobs ON jobs.id = job_id "
        "ORDER BY job_key",
    ) == [("new", 1), ("old", 2)]  # fmt: skip
    assert query(url, "SELECT count(*) FROM received_frames") == [(2,)]


def test_frames_older_than_the_retention_window_are_rejected(clean_partitions):
    url = clean_partitions
    with BackgroundCollector(url, token="secret") as running:
        running.service.ingest.retention_days = 2
        today = day_of(time.time_ns())
        acks = exchange(running.address, frame_on_day(today - 3, 0), acks=1)
        assert acks == [(wire.Status.OUT_OF_RANGE, 0)]
        assert exchange(running.address, frame_on_day(today - 1, 1), acks=1) == [(0, 1)]
    assert query(url, "SELECT count(*) FROM p2p_deltas") == [(1,)]
