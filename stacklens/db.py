"""Database plumbing: the embedded PostgreSQL (pgserver), URL forms, migrations, engines."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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
    return Database(url=server.get_uri(), embedded=server)


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
