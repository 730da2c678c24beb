"""The jobs API over a real database filled through a real collector."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from stacklens.db import make_engine
from tests.collector.test_ingest import T0, exchange, frame


@pytest.fixture
def client(pg_url):
    engine = make_engine(pg_url)
    app = create_app(engine, api_base_url="http://testserver", with_frontend=False)
    with TestClient(app) as test_client:
        yield test_client
    engine.dispose()


def test_jobs_and_matrix(collector, client):
    rows_0 = [{"peer": 1, "bytes_sent": 300, "msgs_sent": 3}]
    rows_1 = [{"peer": 0, "bytes_sent": 50, "msgs_sent": 1}]
    exchange(
        collector.address,
        frame(0, p2p_rows=rows_0) + frame(1, p2p_rows=rows_0) + frame(0, rank=1, p2p_rows=rows_1),
        acks=3,
    )
    exchange(collector.address, frame(0, job="job-B", p2p_rows=[]), acks=1)

    # Newest first: same start, so the later-registered job-B comes first.
    jobs = client.get(client.app.url_path_for("list_jobs")).json()
    assert jobs == [
        {
            "job": "job-B",
            "world_size": 2,
            "command": "./prog --size 8",
            "user": "alice",
            "status": "running",
            "started_ns": T0,
            "last_seen_ns": T0 + 10**9,
            "ranks_seen": 1,
            "bytes_sent": 0,
            "messages_sent": 0,
        },
        {
            "job": "job-A",
            "world_size": 2,
            "command": "./prog --size 8",
            "user": "alice",
            "status": "running",
            "started_ns": T0,
            "last_seen_ns": T0 + 2 * 10**9,
            "ranks_seen": 2,
            "bytes_sent": 650,
            "messages_sent": 7,
        },
    ]
    matrix = client.get(client.app.url_path_for("job_matrix", job="job-A")).json()
    assert matrix == {
        "job": "job-A",
        "world_size": 2,
        "cells": [
            {"src": 0, "dst": 1, "bytes": 600, "messages": 6},
            {"src": 1, "dst": 0, "bytes": 50, "messages": 1},
        ],
    }


def test_unknown_job_is_404(client):
    response = client.get(client.app.url_path_for("job_matrix", job="no/such job"))
    assert response.status_code == 404
    assert response.json() == {"detail": "unknown job 'no/such job'"}


def test_openapi_docs_are_served(client):
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/api/jobs", "/api/jobs/{job}/matrix"} <= set(paths)
