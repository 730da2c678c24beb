"""The ORM models (stacklens/schema.py) and the Alembic migrations describe the same
database: a fresh database migrated to head has no difference from the models that
Alembic's autogenerate would write a migration for (what `alembic check` reports), and every
read view has the columns and types its model declares."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.dialects import postgresql

from stacklens.db import migrate, sqlalchemy_url
from stacklens.schema import Base

VIEWS = [t for t in Base.metadata.sorted_tables if t.info.get("view")]


@pytest.fixture(scope="module")
def migrated(pg_server: str):
    """A new database on the test server, migrated to head (no partitions, no data)."""
    name = "stacklens_drift"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(pg_server)._replace(path=f"/{name}"))
    migrate(url)
    engine = create_engine(sqlalchemy_url(url))
    yield engine
    engine.dispose()


def _not_a_view(obj, _name, type_, _reflected, compare_to) -> bool:
    """Read views are mapped like tables for queries; autogenerate must not see them."""
    tables = (obj, compare_to) if type_ == "table" else ()
    return not any(t is not None and t.info.get("view") for t in tables)


def test_models_equal_the_migrated_database(migrated):
    with migrated.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": _not_a_view, "compare_type": True}
        )
        assert compare_metadata(context, Base.metadata) == []


@pytest.mark.parametrize("view", VIEWS, ids=lambda t: t.name)
def test_read_views_have_their_models_columns(migrated, view):
    query = text(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = :v"
    )
    with migrated.connect() as conn:
        found = dict(conn.execute(query, {"v": view.name}).tuples().all())
    dialect = postgresql.dialect()
    declared = {c.name: c.type.compile(dialect=dialect).lower() for c in view.columns}
    assert found == declared
