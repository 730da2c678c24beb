"""Migration 0038 (an incident's call sites name `most_time_rank`, not `slowest_rank`) on
incident jobs stored before it, and back down: every call site of every signal has its key
renamed with its value, in order, everything else of the evidence as it was; evidence
without call sites is left alone."""

from __future__ import annotations

import json

import psycopg
from alembic import command

from stacklens.db import alembic_config
from tests.conftest import query


def _site(label: str, rank: int, key: str) -> dict:
    """A stored call site of an incident job's evidence, its rank under `key`."""
    return {"key": f"k-{label}", "label": label, "op": "MPI_Allreduce", "share": 0.5, key: rank}


def _evidence(key: str) -> dict:
    """A victim's evidence with two signals, each with call sites (one with none)."""
    return {
        "mpi_slowdown": {"lost_ns": 7, "series": [{"t_ns": 1}],
                         "callsites": [_site("a.c:3", 0, key), _site("a.c:9", 2, key)]},
        "io_stall": {"lost_ns": 8, "callsites": [_site("b.c:5", 1, key)]},
        "link": {"callsites": []},
    }  # fmt: skip


#: An evidence kept as it is: no call sites at all.
PLAIN = {"congestion": {"series": [{"t_ns": 2, "utilisation": 0.5}]}}

ROWS = "SELECT slot, evidence FROM incident_jobs ORDER BY slot"


def test_stored_call_sites_are_renamed_and_back(pg_server: str):
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS stacklens_incident_sites_migration")
        conn.execute("CREATE DATABASE stacklens_incident_sites_migration")
    url = pg_server.replace("/postgres?", "/stacklens_incident_sites_migration?")
    config = alembic_config(url)
    command.upgrade(config, "0037")
    with psycopg.connect(url) as conn:
        conn.execute("SET session_replication_role = replica")  # no incident or job rows
        for slot, evidence in ((0, _evidence("slowest_rank")), (1, PLAIN)):
            conn.execute(
                "INSERT INTO incident_jobs (incident_id, slot, job_id, role, signals, ranks, "
                "files, evidence) VALUES (1, %s, 1, 'victim', '{}', '{}', '{}', %s)",
                (slot, json.dumps(evidence)),
            )

    command.upgrade(config, "0038")
    assert query(url, ROWS) == [(0, _evidence("most_time_rank")), (1, PLAIN)]
    command.downgrade(config, "0037")
    assert query(url, ROWS) == [(0, _evidence("slowest_rank")), (1, PLAIN)]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute("DROP DATABASE stacklens_incident_sites_migration")
