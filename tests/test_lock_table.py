"""PostgreSQL's lock table fits the partitions the settings allow (issue #24 point 4).

A read over every day of every partitioned table locks each partition and its indexes;
with PostgreSQL's default max_locks_per_transaction (64) the lock table of the embedded
server cannot hold 32 such reads over the 103 days a horizon of 100 days allows (they fail
with "out of shared memory"); `fit_lock_table` sets the value they need and restarts the
embedded server, after which they all succeed. An external server is only checked: a
warning names the setting and the value.
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from collector.store.partitions import DEFAULT_TABLES, Partitions
from stacklens.constants import DAY_NS
from stacklens.db import LOCK_HOLDERS, Database, fit_lock_table, migrate, open_database
from stacklens.settings import Settings

#: The horizon of the test, and the days of partitions it allows on a fresh database:
#: those, today and the two days made ahead.
HORIZON_DAYS = 100
DAYS = HORIZON_DAYS + 3


@pytest.fixture
def embedded() -> Iterator[tuple[list[Database], Settings]]:
    """A fresh embedded database of default settings, migrated (as a one-item list: a test
    puts the restarted server's handle there), stopped and removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="stacklens-locks-", dir="/tmp"))
    settings = Settings(state_dir=scratch, ingest_horizon_days=HORIZON_DAYS)
    database = open_database(settings)
    migrate(database.url)
    handle = [database]
    yield handle, settings
    handle[0].stop()
    shutil.rmtree(scratch, ignore_errors=True)


def read_everything_at_once(url: str, tables: tuple[str, ...]) -> list[str]:
    """LOCK_HOLDERS transactions that each read every partitioned table (every partition
    and index locked) and hold their locks until all have read; the errors they got."""
    errors: list[str] = []
    barrier = threading.Barrier(LOCK_HOLDERS, timeout=60)

    def reader() -> None:
        with psycopg.connect(url) as conn:
            try:
                for table in tables:
                    conn.execute(f"SELECT count(*) FROM {table}")
            except psycopg.Error as exc:
                errors.append(type(exc).__name__)
            barrier.wait()

    threads = [threading.Thread(target=reader) for _ in range(LOCK_HOLDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


def relations_a_day(url: str) -> tuple[int, int, int]:
    """The partitioned tables, their partitioned indexes and the partitioned tables with a
    variable-length column (each partition gets a TOAST table and its index)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE relkind = 'p'), count(*) FILTER (WHERE relkind = 'I'),"
            " (SELECT count(DISTINCT c.oid) FROM pg_class c JOIN pg_attribute a"
            "  ON a.attrelid = c.oid WHERE c.relkind = 'p' AND a.attnum > 0"
            "  AND NOT a.attisdropped AND a.attlen = -1) FROM pg_class"
        ).fetchone()
    assert row is not None, "one row of counts"
    return row


def test_the_embedded_server_gets_the_locks_its_partitions_need(embedded):
    handle, settings = embedded
    database = handle[0]
    today = time.time_ns() // DAY_NS
    with psycopg.connect(database.url, autocommit=True) as conn:
        Partitions(DEFAULT_TABLES).ensure_sync(conn, range(today - DAYS + 3, today + 3))
    failed = read_everything_at_once(database.url, DEFAULT_TABLES)
    assert failed and set(failed) == {"OutOfMemory"}  # PostgreSQL's 64 do not hold them
    fitted = handle[0] = fit_lock_table(database, settings)
    with psycopg.connect(fitted.url) as conn:
        value = conn.execute("SHOW max_locks_per_transaction").fetchone()
    # Today: 51 relations a day (13 partitions, 14 indexes, 12 TOAST tables with their
    # index) x 103 days x 32 holders over 122 server processes = 1,378, plus the default
    # 64, in multiples of 64 = 1,472. Counted here, so that a new partitioned table moves it.
    partitions, indexes, toasted = relations_a_day(fitted.url)
    held = math.ceil((partitions + indexes + 2 * toasted) * DAYS * LOCK_HOLDERS / 122)
    assert value == (str(64 * math.ceil((64 + held) / 64)),)
    assert read_everything_at_once(fitted.url, DEFAULT_TABLES) == []
    assert fit_lock_table(fitted, settings) is fitted  # enough: left as it is


def test_an_external_server_short_of_locks_is_named_with_the_value(pg_url, caplog):
    caplog.set_level(logging.WARNING, "stacklens.db")
    external = Database(url=pg_url)
    assert fit_lock_table(external, Settings(database_url=pg_url)) is external
    [warning] = [r.getMessage() for r in caplog.records if "external" in r.getMessage()]
    assert warning.startswith("external PostgreSQL: max_locks_per_transaction is 64; ")
    assert "need max_locks_per_transaction = " in warning
    with psycopg.connect(pg_url) as conn:  # only checked, never changed
        assert conn.execute("SHOW max_locks_per_transaction").fetchone() == ("64",)
