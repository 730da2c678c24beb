"""What `stacklens status` reads of the database: its schema revision, the newest frame the
collectors stored and the newest fabric sweep; and how many users sent runs lately (also
read by the server's /metrics and GET /api/deployment, and the collector's log)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from stacklens.modes import SENDERS_WINDOW_NS


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


def recent_senders(conn: psycopg.Connection, now_ns: int) -> int:
    """How many distinct users the runs last seen within SENDERS_WINDOW_NS before `now_ns`
    name (in proven mode their proven owners, in trusted mode the users their frames claim;
    runs that name none are not counted). Reads every user's runs: the number names nobody."""
    row = conn.execute(
        'SELECT count(DISTINCT "user") FROM runs WHERE last_seen_ns >= %s',
        (now_ns - SENDERS_WINDOW_NS,),
    ).fetchone()
    assert row is not None  # an aggregate: one row
    return int(row[0])
