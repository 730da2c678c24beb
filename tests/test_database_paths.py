"""Both database paths of `stacklens`: embedded pgserver by default, an external server by URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import query

STACKLENS = [sys.executable, "-m", "stacklens_cli"]


def _head_revision() -> str:
    """The newest migration's revision id."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from stacklens.paths import MIGRATIONS_DIR

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(extra)
    return env


def test_embedded_postgres_in_the_state_dir(tmp_path: Path):
    state = tmp_path / "state"
    result = subprocess.run(
        [*STACKLENS, "migrate"],
        env=_env(STACKLENS_STATE_DIR=str(state)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (state / "pg" / "PG_VERSION").read_text().strip() == "16"
    # The server stopped with the process; start it again and find the schema in place.
    from stacklens.db import start_embedded

    database = start_embedded(state / "pg")
    try:
        tables = {
            row[0]
            for row in query(
                database.url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
        assert {
            "jobs",
            "ranks",
            "p2p_frames",
            "op_frames",
            "io_deltas",
            "received_frames",
        } <= tables
        assert query(database.url, "SELECT version_num FROM alembic_version") == [
            (_head_revision(),)
        ]
    finally:
        database.stop()


def test_external_database_by_url(tmp_path: Path, pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_external")
        conn.execute("CREATE DATABASE stacklens_external")
    url = pg_server.replace("/postgres?", "/stacklens_external?")
    state = tmp_path / "state"
    result = subprocess.run(
        [*STACKLENS, "migrate"],
        env=_env(STACKLENS_STATE_DIR=str(state), STACKLENS_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert not (state / "pg").exists(), "an external URL must not start the embedded server"
    assert query(url, "SELECT version_num FROM alembic_version") == [(_head_revision(),)]


def test_embedded_data_dir_under_root_home_is_refused(tmp_path: Path):
    result = subprocess.run(
        [*STACKLENS, "migrate"],
        env=_env(STACKLENS_STATE_DIR="/root/.stacklens-test"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "under root's home directory" in result.stderr
    assert not Path("/root/.stacklens-test").exists()


def test_bad_configuration_is_a_clear_error():
    result = subprocess.run(
        [*STACKLENS, "env"],
        env=_env(STACKLENS_COLLECTOR="nocolon"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "bad configuration" in result.stderr and "expected host:port" in result.stderr
