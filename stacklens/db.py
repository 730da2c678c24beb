"""Database plumbing: the embedded PostgreSQL (pgserver), URL forms, migrations, engines,
and the lock table the day partitions need (`fit_lock_table`)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine

from stacklens.paths import ALEMBIC_INI, MIGRATIONS_DIR
from stacklens.settings import ConfigError, Settings

log = logging.getLogger(__name__)


class EmbeddedServer(Protocol):
    """What stacklens uses of pgserver's PostgresServer handle."""

    def cleanup(self) -> None:
        """Stop the server (once no other process of the same data directory uses it)."""


@dataclass
class Database:
    """A PostgreSQL server stacklens uses: its libpq URL and, if embedded, its handle."""

    url: str
    embedded: EmbeddedServer | None = None  # set when stacklens started it
    data_dir: Path | None = None  # the embedded server's

    def stop(self) -> None:
        """Stop the embedded server stacklens started; nothing for an external one."""
        if self.embedded is not None:
            self.embedded.cleanup()

    @property
    def sqlalchemy_url(self) -> str:
        """The URL in SQLAlchemy's psycopg 3 dialect form."""
        return sqlalchemy_url(self.url)


def sqlalchemy_url(url: str) -> str:
    """Turn a libpq URL (postgresql://...) into SQLAlchemy's psycopg 3 form."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return "postgresql+psycopg://" + rest


def libpq_url(url: str) -> str:
    """Turn a SQLAlchemy or libpq URL into the plain libpq form psycopg accepts."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return "postgresql://" + rest


def start_embedded(data_dir: Path) -> Database:
    """Start (or attach to) the embedded PostgreSQL whose data lives in `data_dir`.

    The server stops when this process exits.
    """
    import pgserver  # imported lazily: only the embedded path needs it

    if str(data_dir.resolve()).startswith("/root/"):
        raise ConfigError(
            f"the embedded PostgreSQL data dir {data_dir} is under root's home directory; "
            "pgserver would open its parents to other users: set STACKLENS_STATE_DIR elsewhere"
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir, cleanup_mode="stop")
    return Database(url=server.get_uri(), embedded=server, data_dir=data_dir)


def running_embedded_url(data_dir: Path) -> str | None:
    """URL of the embedded PostgreSQL in `data_dir` if it is running and ready, else None.

    Only reads its postmaster.pid: unlike `start_embedded`, this neither starts the server
    nor registers the caller as one of its owners (whose exit would stop it).
    """
    from pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(data_dir)
    except (OSError, AssertionError, ValueError):
        return None  # absent, or being written
    if info is None or not info.is_running() or info.status != "ready":
        return None
    return info.get_uri()


def open_database(settings: Settings) -> Database:
    """The database of these settings: the external URL if set, else the embedded server."""
    if settings.database_url:
        return Database(url=libpq_url(settings.database_url))
    data_dir = settings.state_dir / "pg"
    log.info("starting embedded PostgreSQL in %s", data_dir)
    return start_embedded(data_dir)


def alembic_config(url: str) -> Config:
    """The Alembic configuration of the database at `url` (stacklens' migrations)."""
    config = Config(str(ALEMBIC_INI))
    config.attributes["configure_logger"] = False  # keep the caller's logging setup
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def migrate(url: str) -> None:
    """Apply every Alembic migration up to head."""
    command.upgrade(alembic_config(url), "head")


def head_revision() -> str:
    """The newest revision of stacklens' migrations (what `migrate` brings a database to)."""
    from alembic.script import ScriptDirectory

    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None  # the migrations are one chain
    return head


def make_engine(url: str) -> Engine:
    """A pooled SQLAlchemy engine for the API's queries."""
    return create_engine(sqlalchemy_url(url), pool_pre_ping=True)


#: Server processes that may each hold a lock on every partition at once: the API's pool
#: (SQLAlchemy's 5 + 10 overflow), the collector's writer, rollup, maintenance and fabric
#: connections, and the parallel workers PostgreSQL adds to them (max_parallel_workers 8).
LOCK_HOLDERS = 32
#: The most stacklens sets max_locks_per_transaction to: the lock table's shared memory
#: grows with it (about 80 MB at 2,048 with PostgreSQL's default 100 connections).
MAX_LOCKS_SET = 2048

#: Relations per day of partitions (every partitioned table's partition and its indexes',
#: a TOAST table and its index where a column may be toasted), the days of partitions
#: (`<table>_pYYYYMMDD`) before the day %(since)s, the server processes sharing the lock
#: table, and its setting.
_LOCK_FACTS = """
SELECT
  (SELECT count(*) FROM pg_class WHERE relkind IN ('p', 'I'))
  + 2 * (SELECT count(DISTINCT c.oid) FROM pg_class c
         JOIN pg_attribute a ON a.attrelid = c.oid
         WHERE c.relkind = 'p' AND a.attnum > 0 AND NOT a.attisdropped AND a.attlen = -1),
  (SELECT count(DISTINCT substring(c.relname FROM '_p([0-9]{8})$')) FROM pg_inherits
   JOIN pg_class p ON p.oid = inhparent JOIN pg_class c ON c.oid = inhrelid
   WHERE p.relkind = 'p' AND substring(c.relname FROM '_p([0-9]{8})$') < %(since)s),
  current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int
  + 1 + current_setting('max_worker_processes')::int
  + current_setting('max_wal_senders')::int,
  current_setting('max_locks_per_transaction')::int
"""


def partition_window(settings: Settings) -> int:
    """Days back from today that may get or keep partitions under `settings`: the
    retention's (older partitions are dropped; ingest reaches back at most as far), else
    the ingest horizon's (collector/store/partitions.py; docs/design.md, Partitions)."""
    return (
        settings.ingest_horizon_days if settings.retention_days is None else settings.retention_days
    )


def partition_days(settings: Settings, older: int) -> int:
    """Days of partitions a partitioned table may have under `settings`, `older` being the
    days it has before the window: the window's, today, the two made ahead, and those."""
    return older + partition_window(settings) + 3


def locks_needed(relations_per_day: int, days: int, backends: int) -> int:
    """max_locks_per_transaction for LOCK_HOLDERS processes to each lock every relation of
    `days` days of partitions at once, the lock table being shared by `backends` server
    processes; PostgreSQL's default 64 on top, rounded up to a multiple of 64."""
    partitions = math.ceil(relations_per_day * days * LOCK_HOLDERS / backends)
    return 64 * math.ceil((64 + partitions) / 64)


def fit_lock_table(database: Database, settings: Settings) -> Database:
    """Make sure `max_locks_per_transaction` covers the partitions `settings` allow (a read
    over every day of every partitioned table must not run out of shared memory).

    The embedded server gets it set (ALTER SYSTEM) and is restarted (its new handle is
    returned), never beyond MAX_LOCKS_SET (a warning then says to set a retention); an
    external server is only checked: a warning names the setting and the value it needs.
    The value is never lowered. Call it after the migrations."""
    since = datetime.now(UTC) - timedelta(days=partition_window(settings))
    with psycopg.connect(database.url, autocommit=True) as conn:
        row = conn.execute(_LOCK_FACTS, {"since": f"{since:%Y%m%d}"}).fetchone()
        assert row is not None, "one row of facts"
        relations, older, backends, have = row
        days = partition_days(settings, older)
        need = locks_needed(relations, days, backends)
        if have >= need:
            return database
        if database.embedded is None:
            log.warning("external PostgreSQL: max_locks_per_transaction is %d; %d days of "
                        "partitions need max_locks_per_transaction = %d (set it in its "
                        "postgresql.conf and restart it; reads over many days may fail with "
                        "'out of shared memory' until then)", have, days, need)  # fmt: skip
            return database
        if need > MAX_LOCKS_SET:
            log.warning("embedded PostgreSQL: %d days of partitions would need "
                        "max_locks_per_transaction = %d; stacklens sets at most %d: set "
                        "STACKLENS_RETENTION_DAYS so the days stay bounded", days, need,
                        MAX_LOCKS_SET)  # fmt: skip
            need = MAX_LOCKS_SET
            if have >= need:
                return database
        conn.execute(f"ALTER SYSTEM SET max_locks_per_transaction = {int(need)}")
    assert database.data_dir is not None, "an embedded server has its data directory"
    log.info("embedded PostgreSQL: max_locks_per_transaction %d -> %d (%d days of "
             "partitions), restarting it", have, need, days)  # fmt: skip
    database.stop()
    restarted = start_embedded(database.data_dir)
    with psycopg.connect(restarted.url) as conn:
        now = conn.execute("SELECT current_setting('max_locks_per_transaction')::int").fetchone()
    if now is None or now[0] < need:
        log.warning("embedded PostgreSQL: max_locks_per_transaction = %d applies when it "
                    "restarts (another process still uses it)", need)  # fmt: skip
    return restarted
