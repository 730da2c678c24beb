"""Migration 0040 (call-site fallbacks keyed by the jobs' owner too, issue #26) on fallbacks
stored before it, and back down: the rows read as the collector's user become uid 0's,
with their reasons and times; another owner's row of the same frame can then be stored;
the downgrade keeps uid 0's rows only."""

from __future__ import annotations

import psycopg
from alembic import command

from stacklens.db import alembic_config
from tests.conftest import query

ROWS = "SELECT * FROM callsite_fallbacks ORDER BY 1, 2, 3, 4"
#: Two fallbacks as stored before 0040: (module, build-id, offset, reason, when).
BEFORE = [("/opt/a", "ab12", 16, "/opt/a is not here", 7),
          ("/opt/b", "cd34", 32, "/opt/b is larger than 2048 MiB", 8)]  # fmt: skip


def test_fallbacks_become_uid_0s_and_back(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_fallback_owner_migration")
        conn.execute("CREATE DATABASE stacklens_fallback_owner_migration")
    url = pg_server.replace("/postgres?", "/stacklens_fallback_owner_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0039")
    with psycopg.connect(url) as conn:
        for row in BEFORE:
            conn.execute("INSERT INTO callsite_fallbacks VALUES (%s, %s, %s, %s, %s)", row)

    command.upgrade(config, "0040")
    cols = "owner_uid, module, build_id, site_offset, reason, resolved_ns"
    assert query(url, f"SELECT {cols} FROM callsite_fallbacks ORDER BY 2") == [
        (0, *row) for row in BEFORE
    ]
    with psycopg.connect(url) as conn:  # another owner's fallback of the same frame
        conn.execute(
            f"INSERT INTO callsite_fallbacks ({cols}) VALUES (1000, '/opt/a', 'ab12', 16, "
            "'/opt/a is not readable by the job''s owner where the collector runs', 9)"
        )
    assert query(url, "SELECT owner_uid, module FROM callsite_fallbacks ORDER BY 1, 2") == [
        (0, "/opt/a"), (0, "/opt/b"), (1000, "/opt/a")]  # fmt: skip
    command.downgrade(config, "0039")
    assert query(url, ROWS) == BEFORE
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE stacklens_fallback_owner_migration")
