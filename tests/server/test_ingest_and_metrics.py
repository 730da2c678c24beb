"""HTTP JSON ingest (same validation and writer as TCP frames) and the /metrics exposition."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.app import create_app
from stacklens.db import make_engine
from tests.collector.test_ingest import T0, exchange, frame
from tests.conftest import query

AUTH = {"Authorization": "Bearer secret"}


@pytest.fixture
def app_client(pg_url, control_socket):
    """The API with a collector (ingest token "secret"), reached over its control channel
    as under `stacklens up`; yields the test client and the collector service."""
    engine = make_engine(pg_url)
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running:
        app = create_app(engine, collector=running.link)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            yield client, running.service
    engine.dispose()


def json_frame(seq: int, **extra) -> dict:
    body = {
        "job": "json-job", "run_id": 5, "world_rank": 0, "world_size": 2, "seq": seq, "host": "n1",
        "interval_start_ns": T0 + seq, "interval_end_ns": T0 + seq + 1,
        "tables": {"p2p": [{"peer": 1, "bytes_sent": 100, "msgs_sent": 1}],
                   "io": [{"layer": 1, "writes": 2, "bytes_written": 8192, "path": "/tmp/a",
                           "mount": "/tmp", "fstype": "tmpfs"}]},
    }  # fmt: skip
    body.update(extra)
    return body


def test_json_batch_is_stored_once(app_client, pg_url):
    client, _ = app_client
    batch = {"frames": [json_frame(0, command="./sampler", user="bob"), json_frame(1, final=True)]}
    response = client.post("/api/ingest/frames", json=batch, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json() == {"stored": 2}
    assert client.post("/api/ingest/frames", json=batch, headers=AUTH).json() == {"stored": 2}
    assert query(pg_url, "SELECT sum(bytes_sent), count(*) FROM p2p_deltas") == [(200, 2)]
    assert query(
        pg_url, "SELECT path, fstype, sum(bytes_written) FROM io_deltas GROUP BY 1, 2"
    ) == [("/tmp/a", "tmpfs", 16384)]
    assert query(pg_url, 'SELECT job_key, command, "user", status FROM jobs') == [
        ("json-job", "./sampler", "bob", "running")  # rank 1 has not finished
    ]
    killed = {"frames": [json_frame(0, world_rank=1, killed=True)]}
    assert client.post("/api/ingest/frames", json=killed, headers=AUTH).json() == {"stored": 1}
    assert query(pg_url, "SELECT status FROM jobs") == [("killed",)]


def test_json_frames_say_their_run(app_client, pg_url):
    client, _ = app_client
    # The same rank and seq in another run, then a process without MPI; runs are numbered
    # in the order of their first interval.
    second = json_frame(0, run_id=2**64 - 1, run_label="7", interval_start_ns=T0 + 1)
    helper = json_frame(0, run_id=0, world_size=1, proc_start_ns=99, pid=4, tables={},
                        interval_start_ns=T0 + 2, interval_end_ns=T0 + 3)  # fmt: skip
    batch = {"frames": [json_frame(0), second, helper]}
    assert client.post("/api/ingest/frames", json=batch, headers=AUTH).json() == {"stored": 3}
    assert query(pg_url, "SELECT ordinal, run_key, kind, label FROM runs ORDER BY 1") == [
        (1, 5, "mpi", None), (2, -1, "mpi", "7"), (3, 0, "processes", None)
    ]  # fmt: skip
    missing = {k: v for k, v in json_frame(1).items() if k != "run_id"}
    response = client.post("/api/ingest/frames", json={"frames": [missing]}, headers=AUTH)
    assert response.status_code == 422 and "run_id" in response.text
    no_start = json_frame(1, run_id=0, world_size=1)
    response = client.post("/api/ingest/frames", json={"frames": [no_start]}, headers=AUTH)
    assert response.status_code == 422 and "non-MPI frame" in response.text


@pytest.mark.parametrize(
    ("frame_fields", "reason"),
    [
        ({"tables": {"nosuch": [{}]}}, "unknown table"),
        ({"tables": {"p2p": [{"peer": 1, "nosuch": 3}]}}, "unknown field 'nosuch' in table p2p"),
        ({"tables": {"p2p": [{"peer": 1, "bytes_sent": -5}]}}, "bad value"),
        ({"tables": {"p2p": [{"peer": 7}]}}, "peer rank out of range"),
        ({"tables": {"monitored": [{"peer": 2, "bytes": 8}]}}, "monitored peer rank out of range"),
        ({"world_rank": 2}, "rank 2 out of range"),
        ({"interval_end_ns": 1}, "interval ends before it starts"),
    ],
)
def test_a_bad_frame_rejects_the_whole_batch(app_client, pg_url, frame_fields, reason):
    client, _ = app_client
    batch = {"frames": [json_frame(0), json_frame(1, **frame_fields)]}
    response = client.post("/api/ingest/frames", json=batch, headers=AUTH)
    assert response.status_code == 422
    assert reason in str(response.json()["detail"])
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(0,)]


def test_a_body_not_sent_as_json_is_refused(app_client, pg_url):
    """The route reads the body as bytes for the collector; it keeps FastAPI's rule that a
    body is parsed only when announced as JSON (a page cannot post one as a plain form)."""
    client, _ = app_client
    body = json.dumps({"frames": [json_frame(0)]})
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded"):
        headers = AUTH if content_type is None else {**AUTH, "Content-Type": content_type}
        response = client.post("/api/ingest/frames", content=body, headers=headers)
        assert response.status_code == 422, (content_type, response.text)
        assert response.json() == {"detail": [{
            "loc": ["body"], "type": "model_attributes_type",
            "msg": "the body must be a JSON batch (Content-Type: application/json)",
        }]}  # fmt: skip
    sent_as = {**AUTH, "Content-Type": "application/vnd.batch+json; charset=utf-8"}
    response = client.post("/api/ingest/frames", content=body, headers=sent_as)
    assert response.json() == {"stored": 1}
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(1,)]


def test_wrong_token_is_401(app_client, pg_url):
    client, _ = app_client
    response = client.post(
        "/api/ingest/frames",
        json={"frames": [json_frame(0)]},
        headers={"Authorization": "Bearer guess"},
    )
    assert response.status_code == 401
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(0,)]


def test_metrics_count_what_happened(app_client):
    client, service = app_client
    address = ("127.0.0.1", service.port)
    assert exchange(address, frame(0) + frame(0), acks=2) == [(0, 0), (0, 0)]
    exchange(address, b"garbage" * 40, acks=1)
    client.post("/api/ingest/frames", json={"frames": [json_frame(0)]}, headers={})
    text = client.get("/metrics").text
    for line in (
        "stacklens_ingest_frames_received_total 2.0",
        'stacklens_ingest_frames_rejected_total{reason="bad_magic"} 1.0',
        'stacklens_ingest_frames_rejected_total{reason="bad_token"} 1.0',
        "stacklens_store_frames_committed_total 1.0",
        "stacklens_store_frames_duplicate_total 1.0",
        'stacklens_store_rows_total{table="p2p_deltas"} 1.0',
        'stacklens_store_rows_total{table="op_deltas"} 1.0',
        "stacklens_store_queue_depth 0.0",
    ):
        assert line in text.splitlines(), (line, text)
