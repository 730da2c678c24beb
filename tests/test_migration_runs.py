"""Migration 0008 (runs) on a database that holds data from before it, and back down."""

from __future__ import annotations

import psycopg
from alembic import command

from stacklens.db import alembic_config
from tests.conftest import query

T0 = 1_764_547_200 * 10**9  # 2025-12-01 00:00 UTC
DAY = 86_400 * 10**9

#: Two jobs as revision 0007 stored them: ranks, ledger, a p2p frame, an I/O record, rollups.
BEFORE = [
    "INSERT INTO jobs (job_key, world_size, status, started_ns, last_seen_ns) VALUES "
    f"('old-a', 2, 'finished', {T0}, {T0 + 5}), ('old-b', 1, 'running', {T0}, {T0 + 9})",
    "INSERT INTO ranks (job_id, world_rank, host, pid, first_seen_ns, last_seen_ns, finished) "
    f"VALUES (1, 0, 'n0', 10, {T0}, {T0 + 5}, true), (1, 1, 'n1', 11, {T0}, {T0 + 5}, true), "
    f"(2, 0, 'n0', 12, {T0}, {T0 + 9}, false)",
    "INSERT INTO received_frames VALUES (1, 0, 0, 1), (1, 1, 0, 1), (2, 0, 0, 1)",
    f"CREATE TABLE p2p_frames_p20251201 PARTITION OF p2p_frames FOR VALUES FROM ({T0}) "
    f"TO ({T0 + DAY})",
    f"CREATE TABLE io_deltas_p20251201 PARTITION OF io_deltas FOR VALUES FROM ({T0}) "
    f"TO ({T0 + DAY})",
    f"INSERT INTO p2p_frames VALUES (1, 0, {T0}, {T0 + 5}, '{{1}}', '{{300}}', '{{3}}', "
    "'{0}', '{0}')",
    f"INSERT INTO io_deltas VALUES (2, 0, {T0}, {T0 + 9}, 1, 1, 0, 1, 0, 64, 0, 0, 0, "
    "'/f', '/', 'ext4')",
    f"INSERT INTO rollup_dirty VALUES (1, {T0})",
    f"INSERT INTO p2p_minutes VALUES (1, {T0}, 0, 1, 300, 3, 0, 0)",
]


def test_existing_jobs_become_one_run_each_and_come_back(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_runs_migration")
        conn.execute("CREATE DATABASE stacklens_runs_migration")
    url = pg_server.replace("/postgres?", "/stacklens_runs_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0007")
    with psycopg.connect(url) as conn:
        for statement in BEFORE:
            conn.execute(statement)

    command.upgrade(config, "0008")
    assert query(
        url, "SELECT job_id, run_key, ordinal, kind, world_size, status FROM runs ORDER BY 1"
    ) == [(1, -1, 1, "mpi", 2, "finished"), (2, -1, 1, "mpi", 1, "running")]
    runs = dict(query(url, "SELECT job_id, id FROM runs"))
    for table in ("p2p_deltas", "io_deltas", "ranks", "received_frames", "rollup_dirty",
                  "p2p_minutes"):  # fmt: skip
        rows = query(url, f"SELECT job_id, run_id FROM {table}")
        assert rows and all(run == runs[job] for job, run in rows), table
    assert query(url, "SELECT world_rank, peer, bytes_sent FROM p2p_deltas") == [(0, 1, 300)]
    assert query(
        url,
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'received_frames'::regclass "
        "AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
    ) == [("job_id",), ("run_id",), ("world_rank",), ("seq",)]

    command.downgrade(config, "0007")
    assert query(url, "SELECT job_id, world_rank, peer, bytes_sent FROM p2p_deltas") == [
        (1, 0, 1, 300)
    ]
    assert query(url, "SELECT count(*) FROM received_frames") == [(3,)]
    assert query(url, "SELECT to_regclass('runs')") == [(None,)]
