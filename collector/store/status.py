"""What `stacklens status` reads of the database: its schema revision, the newest frame the
collectors stored and the newest fabric sweep."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg


@dataclass(frozen=True)
class StoredStatus:
    """The newest data in the database (None where there is none yet)."""

    revision: str | None  #: the Alembic revision the schema is at
    jobs: int  #: jobs stored
    newest_job: str | None  #: the job whose frames arrived last
    newest_frame_ns: int | None  #: the latest interval end stored (ns since the epoch)
    fabric_nodes: int  #: fabric nodes present (not gone)
    fabric_ports: int  #: ports with a stored sample
    newest_sweep_ns: int | None  #: end of the newest fabric sweep stored


def stored_status(conn: psycopg.Connection) -> StoredStatus:
    """Read the StoredStatus (a database without stacklens' schema reads as empty)."""
    revision = None
    if conn.execute("SELECT to_regclass('alembic_version')").fetchone() != (None,):
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        revision = row[0] if row else None
    if conn.execute("SELECT to_regclass('jobs')").fetchone() == (None,):
        return StoredStatus(revision, 0, None, None, 0, 0, None)
    jobs = conn.execute("SELECT count(*) FROM jobs").fetchone()
    newest = conn.execute(
        "SELECT job_key, last_seen_ns FROM jobs ORDER BY last_seen_ns DESC LIMIT 1"
    ).fetchone()
    nodes = conn.execute("SELECT count(*) FROM fabric_nodes WHERE gone_ns IS NULL").fetchone()
    sweep = conn.execute("SELECT count(*), max(ts_ns) FROM fabric_port_latest").fetchone()
    assert jobs is not None and nodes is not None and sweep is not None  # aggregates: one row
    return StoredStatus(
        revision, jobs[0], newest[0] if newest else None, newest[1] if newest else None,
        nodes[0], sweep[0], sweep[1],
    )  # fmt: skip
