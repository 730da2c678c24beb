"""Migration 0027 on a database that holds monitored traffic under the old names: the table
`wire_frames`, its day partitions and their indexes and the view `wire_deltas` become
`monitored_frames`, `monitored_frames_pYYYYMMDD` and `monitored_deltas` with every row kept
(and the collector's partition code finds the renamed partitions); and back."""

from __future__ import annotations

import psycopg
from alembic import command

from collector.store.partitions import partition_name
from stacklens.db import alembic_config
from tests.conftest import query

T0 = 1_764_547_200 * 10**9  # 2025-12-01 00:00 UTC
DAY = 86_400 * 10**9
S = 10**9

#: Two day partitions of wire_frames, a frame with two peers in one, an empty one (monitored,
#: nothing sent) in the other, as revision 0026 stored them.
BEFORE = [
    f"CREATE TABLE wire_frames_p20251201 PARTITION OF wire_frames "
    f"FOR VALUES FROM ({T0}) TO ({T0 + DAY})",
    f"CREATE TABLE wire_frames_p20251202 PARTITION OF wire_frames "
    f"FOR VALUES FROM ({T0 + DAY}) TO ({T0 + 2 * DAY})",
    "INSERT INTO wire_frames VALUES "
    f"(1, 2, 0, {T0}, {T0 + S}, '{{1, 3}}', '{{8000, 24}}', '{{1, 2}}'), "
    f"(1, 2, 1, {T0 + DAY}, {T0 + DAY + S}, '{{}}', '{{}}', '{{}}')",
]

#: The relations of the monitored tables, with the kind of each (r table, p partitioned
#: table, v view, i index, I partitioned index).
RELATIONS = (
    "SELECT relname, relkind::text FROM pg_class WHERE relname LIKE 'wire%%' "
    "OR relname LIKE 'ix_wire%%' OR relname LIKE 'monitored%%' OR relname LIKE 'ix_monitored%%' "
    "ORDER BY relname"
)


def _relations(prefix: str) -> list[tuple[str, str]]:
    """The relations the monitored tables have under names starting with `prefix`."""
    return sorted([
        (f"ix_{prefix}_frames_job_time", "I"),
        (f"{prefix}_deltas", "v"),
        (f"{prefix}_frames", "p"),
        (f"{prefix}_frames_p20251201", "r"),
        (f"{prefix}_frames_p20251201_job_id_t_end_ns_idx", "i"),
        (f"{prefix}_frames_p20251202", "r"),
        (f"{prefix}_frames_p20251202_job_id_t_end_ns_idx", "i"),
    ])  # fmt: skip


def test_wire_tables_become_monitored_with_their_rows_and_back(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_monitored_migration")
        conn.execute("CREATE DATABASE stacklens_monitored_migration")
    url = pg_server.replace("/postgres?", "/stacklens_monitored_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0026")
    with psycopg.connect(url) as conn:
        for statement in BEFORE:
            conn.execute(statement)
    assert query(url, RELATIONS) == _relations("wire")

    command.upgrade(config, "0027")
    assert query(url, RELATIONS) == _relations("monitored")
    # still the parent's partitions, named as the collector names a day's partition
    assert query(
        url,
        "SELECT child.relname FROM pg_inherits "
        "JOIN pg_class parent ON parent.oid = pg_inherits.inhparent "
        "JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
        "WHERE parent.relname = 'monitored_frames' ORDER BY 1",
    ) == [(partition_name("monitored_frames", T0 // DAY + d),) for d in (0, 1)]
    assert query(
        url,
        "SELECT world_rank, t_end_ns - %s, peer, bytes, msgs FROM monitored_deltas ORDER BY 1, 3",
        (T0,),
    ) == [(0, S, 1, 8000, 1), (0, S, 3, 24, 2)]
    assert query(url, "SELECT world_rank, cardinality(peer) FROM monitored_frames ORDER BY 1") == [
        (0, 2),
        (1, 0),
    ]

    command.downgrade(config, "0026")
    assert query(url, RELATIONS) == _relations("wire")
    assert query(url, "SELECT peer, bytes FROM wire_deltas ORDER BY peer") == [(1, 8000), (3, 24)]
