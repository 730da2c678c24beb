"""Answers of 1 KiB or more go out gzip-compressed to a client that accepts gzip, smaller
ones and the report progress stream as they are, over a real database and fabric."""

from __future__ import annotations

import gzip

import httpx

from server.app import COMPRESS_FROM_BYTES
from tests.server.fabric_data import write_small_fabric


def test_large_json_is_gzip_and_equal_to_the_plain_answer(pg_url, api_client):
    write_small_fabric(pg_url)
    path = api_client.app.url_path_for("fabric_topology")
    plain = api_client.get(path, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert len(plain.content) >= COMPRESS_FROM_BYTES
    # read the raw bytes on the wire: the test client would otherwise decode them
    with api_client.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as raw:
        assert raw.headers["content-encoding"] == "gzip"
        assert raw.headers["vary"] == "Accept-Encoding"
        wire = b"".join(raw.iter_raw())
    assert len(wire) < len(plain.content) / 3
    assert gzip.decompress(wire) == plain.content


def test_small_answers_are_sent_as_they_are(pg_url, api_client):
    response = api_client.get("/api/health", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert len(response.content) < COMPRESS_FROM_BYTES
    assert "content-encoding" not in response.headers


def test_clients_without_gzip_get_plain_answers(pg_url, api_client):
    write_small_fabric(pg_url)
    path = api_client.app.url_path_for("fabric_topology")
    response = api_client.get(path, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in response.headers
    assert httpx.Response(200, content=response.content).json()["nodes"]
