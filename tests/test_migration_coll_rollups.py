"""Migration 0039 (collective rollups with root and bytes) on a database holding a rolled-up
job, down to 0038 and up again: each time both tables are the raw deltas' sums in their
shape, every minute marked dirty left to the collector."""

from __future__ import annotations

import psycopg
from alembic import command

from collector.service import BackgroundCollector
from stacklens.db import alembic_config, migrate
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import roll_up
from tests.conftest import query
from tests.server.test_series_rollups import FIVE_ENDS, five_frame

MINUTE = "t_end_ns / 60000000000 * 60000000000"


def _raw(keys: str, values: str, dirty: bool = False) -> str:
    """The raw deltas' sums per minute, rank and `keys` (the dirty minutes left out)."""
    clean = "" if not dirty else (
        f"WHERE NOT EXISTS (SELECT 1 FROM rollup_dirty r WHERE r.run_id = d.run_id "
        f"AND r.minute_ns = {MINUTE})"
    )  # fmt: skip
    sums = ", ".join(f"sum({v})::bigint" for v in values.split(", "))
    return (f"SELECT {MINUTE}, world_rank, {keys}, {sums} FROM coll_deltas d {clean} "
            f"GROUP BY {MINUTE}, world_rank, {keys} ORDER BY 1, 2, {keys}")  # fmt: skip


def test_the_collective_rollups_are_filled_again_both_ways(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_coll_migration")
        conn.execute("CREATE DATABASE stacklens_coll_migration")
    url = pg_server.replace("/postgres?", "/stacklens_coll_migration?")
    migrate(url)
    with BackgroundCollector(url, token="secret") as collector:
        frames = [five_frame(k, rank) for k in range(len(FIVE_ENDS)) for rank in (0, 1)]
        exchange(collector.address, b"".join(frames), acks=len(frames))
        roll_up(collector)
    config = alembic_config(url)
    old, new = "comm_id, comm_size, op_id", "comm_id, comm_size, op_id, root"
    minutes = "SELECT minute_ns, world_rank, {}, {} FROM coll_minutes ORDER BY 1, 2, {}"

    command.downgrade(config, "0038")
    want = query(url, _raw(old, "calls, time_ns"))
    assert len(want) == 26 and query(url, minutes.format(old, "calls, time_ns", old)) == want

    dirty = FIVE_ENDS[0] // 60_000_000_000 * 60_000_000_000
    query(url, f"INSERT INTO rollup_dirty (job_id, run_id, minute_ns) SELECT job_id, id, "
               f"{dirty} FROM runs RETURNING 1")  # fmt: skip
    command.upgrade(config, "0039")
    want = query(url, _raw(new, "calls, time_ns, bytes", dirty=True))
    got = query(url, minutes.format(new, "calls, time_ns, bytes", new))
    assert len(got) == 24 and got == want  # the dirty minute's two rows left out
    assert all(row[5] == -1 and row[8] == 8 * row[6] for row in got)  # no root, 8 B a call
    fives = query(url, "SELECT sum(calls), sum(bytes), sum(time_ns) FROM coll_fives")
    assert fives == query(url, "SELECT sum(calls), sum(bytes), sum(time_ns) FROM coll_minutes")
