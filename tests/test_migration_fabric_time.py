"""Migration 0015 (fabric over time) on a database that holds fabric data from before it:
point events become intervals, the minute rollups are filled from the samples; and back."""

from __future__ import annotations

import psycopg
from alembic import command

from stacklens.db import alembic_config
from tests.conftest import query

T0 = 1_764_547_200 * 10**9  # 2025-12-01 00:00 UTC
DAY = 86_400 * 10**9
S = 10**9
A = "0x0002c90300000011"
B = "0xf452140300000002"  # negative as a stored bigint
B_STORED = 0xF452140300000002 - (1 << 64)
ZEROS = ", ".join(["0"] * 11)


def _sample(port: int, t: int, xmit: int | None, errors: int) -> str:
    deltas = ["NULL" if xmit is None else str(xmit)] + ["0"] * 4 + [str(errors)] + ["0"] * 5
    return f"({port}, {t}, {S}, 0, {ZEROS}, {', '.join(deltas)})"


#: Two links, two ports with samples over two minutes, and events as revision 0014 stored them.
BEFORE = [
    "INSERT INTO fabric_links (a_guid, a_port, b_guid, b_port, first_seen_ns, last_seen_ns) "
    f"VALUES (783964675506193, 1, {B_STORED}, 1, {T0}, {T0}), "
    f"(783964675506193, 2, {B_STORED}, 2, {T0}, {T0})",
    "INSERT INTO fabric_ports (guid, port, port_guid, lid, state, phys_state, width, speed, "
    f"speed_ext, capacity_bytes_per_s, updated_ns) VALUES (1, 1, 1, 1, 4, 5, 2, 4, 0, 0, {T0}), "
    f"(2, 1, 2, 2, 4, 5, 2, 4, 0, 0, {T0})",
    f"CREATE TABLE fabric_port_samples_p20251201 PARTITION OF fabric_port_samples "
    f"FOR VALUES FROM ({T0}) TO ({T0 + DAY})",
    "INSERT INTO fabric_port_samples VALUES "
    + ", ".join(
        [
            _sample(1, T0 + 30 * S, None, 0),
            _sample(1, T0 + 59 * S, 100, 2),
            _sample(1, T0 + 60 * S, 50, 0),
            _sample(2, T0 + 61 * S, 7, 1),
        ]
    ),  # fmt: skip
    "INSERT INTO fabric_events (ts_ns, kind, subject, details) VALUES "
    f'({T0}, \'link_up\', \'x\', \'{{"a": ["{A}", 2], "b": ["{B}", 2]}}\'), '
    f'({T0 + S}, \'link_down\', \'y\', \'{{"a": ["{A}", 1], "b": ["{B}", 1]}}\'), '
    f"({T0 + S}, 'node_gone', 'h', '{{\"guid\": \"{A}\"}}'), "
    f'({T0 + 2 * S}, \'link_up\', \'y\', \'{{"a": ["{A}", 1], "b": ["{B}", 1]}}\'), '
    f"({T0 + 2 * S}, 'node_new', 'h', '{{\"guid\": \"{A}\"}}'), "
    f'({T0 + 3 * S}, \'link_down\', \'y\', \'{{"a": ["{A}", 1], "b": ["{B}", 1]}}\')',
]


def test_point_events_become_intervals_and_rollups_are_filled(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_fabric_time_migration")
        conn.execute("CREATE DATABASE stacklens_fabric_time_migration")
    url = pg_server.replace("/postgres?", "/stacklens_fabric_time_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0014")
    with psycopg.connect(url) as conn:
        for statement in BEFORE:
            conn.execute(statement)

    command.upgrade(config, "0015")
    assert query(
        url,
        "SELECT kind, subject, start_ns - %s, end_ns - %s, link_id, node_guid FROM fabric_events "
        "ORDER BY start_ns, id",
        (T0, T0),
    ) == [
        ("link_up", "x", 0, 0, 2, None),  # first seen: a point
        ("link_down", "y", S, 2 * S, 1, None),  # closed by its link_up, merged into it
        ("node_gone", "h", S, 2 * S, None, 783964675506193),
        ("link_down", "y", 3 * S, None, 1, None),  # still open
    ]
    assert query(
        url,
        "SELECT port_id, minute_ns - %s, samples, last_ns - %s, d_xmit_bytes, t_xmit_bytes, "
        "d_symbol_errors FROM fabric_port_minutes ORDER BY 1, 2",
        (T0, T0),
    ) == [(1, 0, 2, 59 * S, 100, S, 2), (1, 60 * S, 1, 60 * S, 50, S, 0),
          (2, 60 * S, 1, 61 * S, 7, S, 1)]  # fmt: skip

    command.downgrade(config, "0014")
    assert query(
        url, "SELECT kind, ts_ns - %s FROM fabric_events ORDER BY ts_ns, kind", (T0,)
    ) == [("link_up", 0), ("link_down", S), ("node_gone", S), ("link_up", 2 * S),
          ("node_new", 2 * S), ("link_down", 3 * S)]  # fmt: skip
    assert query(url, "SELECT to_regclass('fabric_port_minutes')") == [(None,)]
