"""Migration 0033 (p2p_frames' five arrays packed into two) on a database that holds
point-to-point rows from before it, and back down: the records read through p2p_deltas are
the same before, after and after the downgrade."""

from __future__ import annotations

import psycopg
from alembic import command

from stacklens.db import alembic_config
from tests.conftest import query

T0 = 1_764_547_200 * 10**9  # 2025-12-01 00:00 UTC
DAY = 86_400 * 10**9

#: A 3-peer row, a row with a count split over two elements of one peer, an empty row.
BEFORE = [
    f"CREATE TABLE p2p_frames_p20251201 PARTITION OF p2p_frames FOR VALUES FROM ({T0}) "
    f"TO ({T0 + DAY})",
    "INSERT INTO p2p_frames (job_id, run_id, world_rank, t_start_ns, t_end_ns, peer, "
    "bytes_sent, msgs_sent, bytes_recv, msgs_recv) VALUES "
    f"(1, 2, 0, {T0}, {T0 + 5}, '{{4,5,6}}', '{{10,20,30}}', '{{1,2,3}}', '{{11,21,31}}', "
    "'{7,8,9}'), "
    f"(1, 2, 1, {T0}, {T0 + 5}, '{{0,0}}', '{{4096,0}}', '{{2147483647,5}}', '{{0,0}}', "
    "'{0,0}'), "
    f"(1, 2, 2, {T0}, {T0 + 5}, '{{}}', '{{}}', '{{}}', '{{}}', '{{}}')",
]

RECORDS = "SELECT * FROM p2p_deltas ORDER BY world_rank, peer, msgs_sent"


def test_stored_records_are_packed_and_read_back_alike(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_p2p_packed_migration")
        conn.execute("CREATE DATABASE stacklens_p2p_packed_migration")
    url = pg_server.replace("/postgres?", "/stacklens_p2p_packed_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0032")
    with psycopg.connect(url) as conn:
        for statement in BEFORE:
            conn.execute(statement)
    head = (1, 2)
    records = [
        (*head, 0, T0, T0 + 5, 4, 10, 1, 11, 7),
        (*head, 0, T0, T0 + 5, 5, 20, 2, 21, 8),
        (*head, 0, T0, T0 + 5, 6, 30, 3, 31, 9),
        (*head, 1, T0, T0 + 5, 0, 0, 5, 0, 0),
        (*head, 1, T0, T0 + 5, 0, 4096, 2147483647, 0, 0),
    ]
    assert query(url, RECORDS) == records

    command.upgrade(config, "0033")
    assert query(url, "SELECT world_rank, peer_msgs, bytes FROM p2p_frames ORDER BY 1") == [
        (0, [4, 5, 6, 1, 2, 3, 7, 8, 9], [10, 20, 30, 11, 21, 31]),
        (1, [0, 0, 2147483647, 5, 0, 0], [4096, 0, 0, 0]),
        (2, [], []),
    ]
    assert query(url, RECORDS) == records

    command.downgrade(config, "0032")
    assert query(
        url,
        "SELECT world_rank, peer, bytes_sent, msgs_sent, bytes_recv, msgs_recv FROM p2p_frames "
        "ORDER BY 1",
    ) == [
        (0, [4, 5, 6], [10, 20, 30], [1, 2, 3], [11, 21, 31], [7, 8, 9]),
        (1, [0, 0], [4096, 0], [2147483647, 5], [0, 0], [0, 0]),
        (2, [], [], [], [], []),
    ]
    assert query(url, RECORDS) == records
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE stacklens_p2p_packed_migration")
