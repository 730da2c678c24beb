"""The API's query-string rules for every route: unknown parameters are refused with a JSON
422 (by one mechanism reading each route's declared parameters), and the time window
`from`/`to` is read in both forms and refused when unreadable or inverted."""

from __future__ import annotations

import re

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.app import create_app
from server.query_params import parse_instant
from stacklens.db import make_engine
from tests.collector.test_ingest import T0, exchange, frame

AUTH = {"Authorization": "Bearer secret"}


@pytest.fixture
def client(pg_url, control_socket):
    """The API (with a collector, so that its ingest route answers) over the test database."""
    engine = make_engine(pg_url)
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running:
        app = create_app(engine, collector=running.link)
        with TestClient(app, base_url="http://127.0.0.1") as test_client:
            yield test_client
    engine.dispose()


def _documented_routes(app) -> list[tuple[str, str]]:
    """(method, path with every path parameter filled) of each operation of the app's
    OpenAPI document: every route the app serves as its API."""
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "job-A", path))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    ]


def test_every_route_refuses_an_unknown_query_parameter(client):
    routes = _documented_routes(client.app)
    assert ("GET", "/api/jobs/job-A/ops") in routes and ("POST", "/api/ingest/frames") in routes
    for method, path in routes:
        answer = client.request(method, path, params={"since": "5m"}, headers=AUTH, json={})
        assert answer.status_code == 422, (method, path, answer.text)
        assert answer.json()["detail"].startswith("unknown query parameter(s) 'since'"), path


def test_the_refusal_names_what_the_route_takes(client):
    answer = client.get("/api/jobs/job-A/matrix", params={"window": "1h", "from": "0"})
    assert answer.status_code == 422
    assert answer.json() == {
        "detail": "unknown query parameter(s) 'window'; this route takes: cursor, format, from, "
        "limit, owner, run, to"
    }
    # a known parameter with an unknown one still refused; known ones alone pass on
    assert client.get("/api/health", params={"x": "1"}).status_code == 422
    assert client.get("/api/health").status_code == 200
    # unknown paths keep their 404, whatever their query string
    assert client.get("/api/nothing", params={"x": "1"}).status_code == 404


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1700000000", 1_700_000_000 * 10**9),
        ("1700000000.000000001", 1_700_000_000 * 10**9 + 1),
        ("1700000000.25", 1_700_000_000 * 10**9 + 250_000_000),
        ("0", 0),
        ("2023-11-14T22:13:20Z", 1_700_000_000 * 10**9),
        ("2023-11-14T23:13:20.5+01:00", 1_700_000_000 * 10**9 + 500_000_000),
    ],
)
def test_instants_are_read_in_both_forms(text, ns):
    assert parse_instant(text, "from") == ns


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("yesterday", "neither RFC 3339 nor epoch seconds"),
        ("2023-11-14T22:13:20", "RFC 3339 needs a UTC offset (Z or +hh:mm)"),
        ("-1", "outside 1970-01-01 .. 2262-04-11"),
        ("1e30", "not a number of seconds within 1970-01-01 .. 2262-04-11"),
        ("NaN", "not a number of seconds within 1970-01-01 .. 2262-04-11"),
        ("9" * 65, "longer than 64 characters"),
    ],
)
def test_unreadable_instants_are_refused(text, why):
    with pytest.raises(HTTPException) as refused:
        parse_instant(text, "to")
    assert refused.value.status_code == 422
    assert refused.value.detail.endswith(why)


def test_bad_and_inverted_windows_are_422_on_every_job_route(collector, client):
    exchange(collector.address, frame(0), acks=1)
    # every job route but the job's row of the job list (/api/jobs/{job}: no window)
    job_routes = [path for method, path in _documented_routes(client.app)
                  if method == "GET" and path.startswith("/api/jobs/job-A/")]  # fmt: skip
    assert len(job_routes) >= 8
    t = T0 // 10**9
    for path in job_routes:
        assert client.get(path).status_code == 200, path
        for params, detail in [
            ({"from": t + 5, "to": t + 5}, "the window is empty or inverted: to <= from"),
            ({"from": t + 6, "to": t + 5}, "the window is empty or inverted: to <= from"),
            ({"from": "soon"}, "from='soon': neither RFC 3339 nor epoch seconds"),
        ]:
            answer = client.get(path, params=params)
            assert (answer.status_code, answer.json()) == (422, {"detail": detail}), path
