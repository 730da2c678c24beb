"""The sampler's store writer (collector/fabric/writer.py, issue #30 point 2): with the
store held up, sweeps go on, at most `store_queue` of them wait, the oldest waiting ones
are merged into the next (one sample spanning both intervals) and counted, and every sweep
is either stored or counted merged; sweeps that waited are stored together, exactly as one
by one.

A real sampler over the sysfs fixture tree (one port), the real database; the store is
held up for real: another connection holds fabric_port_latest locked, so a sweep's store
waits for the lock.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.fabric.sysfs import SysfsSource
from stacklens.constants import MINUTE_NS
from tests.conftest import query

SYSFS_FIXTURE = Path(__file__).parent / "fixtures" / "sysfs"


@contextmanager
def store_held(url: str) -> Iterator[None]:
    """fabric_port_latest locked against writes until the block ends."""
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("LOCK TABLE fabric_port_latest IN EXCLUSIVE MODE")
        yield


def until(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Wait for `condition` (failing after `timeout_s`: it never came)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not reached: {what}"
        time.sleep(0.01)


def stored_ends(url: str) -> list[int]:
    """The sweep ends stored (each sweep of the one port: one sample)."""
    return [t for (t,) in query(url, "SELECT ts_ns FROM fabric_port_samples ORDER BY ts_ns")]


def stored_spans(url: str) -> list[int]:
    """The intervals the stored samples span (ns), oldest first."""
    return [dt for (dt,) in query(url, "SELECT dt_ns FROM fabric_port_samples ORDER BY ts_ns")]


def writer_queue_ends(writer) -> list[int]:
    """The ends of the sweeps waiting in `writer`, in order."""
    return [item[0].raw.t_end_ns for item in writer._queue if isinstance(item, tuple)]


def test_a_held_store_merges_the_oldest_waiting_sweeps_and_counts_them(
    pg_url: str, caplog: pytest.LogCaptureFixture
):
    sampler = FabricSampler(pg_url, SysfsSource(SYSFS_FIXTURE), 1.0, 60.0, store_queue=2)
    writer = sampler.writer
    caplog.set_level(logging.WARNING, logger="collector.fabric.service")
    try:
        sampler.step()  # stepped by hand before start: stored at once
        assert (writer.stored, len(stored_ends(pg_url))) == (1, 1)
        writer.start()
        with store_held(pg_url):
            sampler.step()  # sweep 1: the writer takes it and waits for the lock
            until(lambda: writer.pending == 0 and not writer.idle(), "sweep 1 taken")
            for _ in range(5):  # sweeps 2-6: the steps return, the store still held
                sampler.step()
            # 2 and 3 wait; 4 comes: 2 merged into 3; 5: 2-3 into 4; 6: 2-4 into 5
            assert (sampler.sweeps, writer.pending, writer.merged, writer.stored) == (7, 2, 3, 1)
            step_ends = writer_queue_ends(writer)
        writer.stop()  # the lock is gone: sweep 1 is stored, then 2-5 and 6 together
    finally:
        writer.stop()
        sampler.store.close()
    assert (writer.pending, writer.merged, writer.stored, writer.failed) == (0, 3, 4, 0)
    assert writer.store_timings.count == 3  # 0 at once, 1 alone, then 2-5 and 6 together
    ends, spans = stored_ends(pg_url), stored_spans(pg_url)
    merged = [int(m[1]) for r in caplog.records
              if (m := re.search(r"ending at (\d+) ns was merged", r.getMessage()))]  # fmt: skip
    # the first merge is logged, the next two held by the rate limit
    assert len(ends) == 4 and len(merged) == 1
    assert ends[1] < merged[0] < ends[2]  # sweep 2, between the stored 1 and 2-5
    assert ends[2:] == step_ends  # the merged 2-5 ends with 5, then 6
    # each sample spans from the one stored before it: 2-5 from 1's end, nothing unspanned
    assert spans[1:] == [b - a for a, b in zip(ends, ends[1:], strict=False)]
    (latest,) = query(pg_url, "SELECT ts_ns FROM fabric_port_latest")
    assert latest == (ends[-1],)
    (minutes,) = query(pg_url, "SELECT sum(samples) FROM fabric_port_minutes")
    assert minutes == (4,)


def test_the_loop_sweeps_on_while_the_store_is_held(pg_url: str):
    """The sampling loop (period 20 ms) goes on while no sweep can be stored: the sweeps
    past `store_queue` + 1 are merged; once the store is free every sweep is stored or
    counted merged, exactly."""

    async def run() -> FabricSampler:
        sampler = FabricSampler(pg_url, SysfsSource(SYSFS_FIXTURE), 0.02, 60.0, store_queue=3)
        with store_held(pg_url):
            await sampler.start()
            while sampler.writer.merged < 5:
                await asyncio.sleep(0.01)
            assert sampler.writer.stored == 0 and sampler.writer.pending == 3
        await sampler.stop()  # the store free again: what waits is stored
        return sampler

    sampler = asyncio.run(run())
    writer = sampler.writer
    assert writer.stored + writer.merged == sampler.sweeps and writer.merged >= 5
    assert (writer.pending, writer.failed) == (0, 0)
    assert len(stored_ends(pg_url)) == writer.stored


def test_sweeps_stored_together_equal_the_rollups_of_their_samples(pg_url: str, mad: MadSource):
    """Sweeps that waited are stored in one go: each port's newest sample is the newest
    stored, and the rollups are exactly those rebuilt from the stored samples."""
    sampler = FabricSampler(pg_url, mad, interval_s=1.0, rediscover_s=3600)
    writer = sampler.writer
    try:
        sampler.step()  # the topology and a first sweep, at once
        writer.start()
        with store_held(pg_url):
            sampler.step()  # taken alone, waits for the lock
            until(lambda: writer.pending == 0 and not writer.idle(), "sweep 2 taken")
            for _ in range(3):
                sampler.step()
            assert writer.pending == 3
        writer.stop()
        assert (writer.stored, writer.merged, writer.store_timings.count) == (5, 0, 3)
        newest = (
            "SELECT * FROM (SELECT DISTINCT ON (port_id) * FROM fabric_port_samples "
            "ORDER BY port_id, ts_ns DESC) s ORDER BY port_id"
        )
        assert query(pg_url, "SELECT * FROM fabric_port_latest ORDER BY port_id") == query(
            pg_url, newest
        )
        tables = ("fabric_port_minutes", "fabric_port_10s")
        stored = {t: query(pg_url, f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables}
        assert sum(r[2] for r in stored["fabric_port_minutes"]) == 5 * len(
            sampler.topology.sweep_targets()
        )
        ((lo, hi),) = query(pg_url, "SELECT min(ts_ns), max(ts_ns) FROM fabric_port_samples")
        sampler.store.rebuild_rollups(
            lo // MINUTE_NS * MINUTE_NS, (hi // MINUTE_NS + 1) * MINUTE_NS
        )
        assert {t: query(pg_url, f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables} == stored
    finally:
        writer.stop()
        sampler.store.close()
