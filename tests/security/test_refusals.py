"""Bad requests get a 4xx with a JSON reason, never a 500 or the dashboard's HTML; the
token rules are the same everywhere and the token is never repeated; the OpenAPI document
lists every answer; /docs works offline (issue #12). Each failed before the fix."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys

import httpx
import pytest

from server.app import create_app
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, serving
from tests.server.test_ingest_and_metrics import AUTH, app_client, json_frame  # noqa: F401
from tests.test_api_contract import READ_TIMEOUT_S

JOB_ROUTES = ("matrix", "ops", "io", "collectives", "sizes", "rma", "ranks")
SECRET = "s3cr3t-T0ken-nobody-may-see"


def pieces(secret: str, size: int = 6) -> list[str]:
    """Every `size`-character piece of a secret: none may appear anywhere."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


@pytest.mark.parametrize("route", JOB_ROUTES)
def test_a_nul_in_a_job_id_is_a_404_with_a_reason(api_client, route):
    response = api_client.get(f"/api/jobs/a%00b/{route}")
    assert response.status_code == 404
    assert "control characters" in response.json()["detail"]


def test_a_newline_job_id_is_refused_at_ingest_and_unknown_to_the_api(app_client):  # noqa: F811
    client, _ = app_client
    response = client.post("/api/ingest/frames", json={"frames": [json_frame(0, job="a\nb")]},
                           headers=AUTH)  # fmt: skip
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "frames", 0, "job"]
    assert client.get("/api/jobs/a%0Ab/matrix").status_code == 404
    assert client.get("/api/jobs/a%0Ab/matrix").headers["content-type"] == "application/json"


def test_a_lone_surrogate_in_a_body_is_a_422(app_client):  # noqa: F811
    client, _ = app_client
    headers = {**AUTH, "content-type": "application/json"}
    in_a_table = json_frame(0, tables={"io": [{"layer": 1, "path": "/a\ud800"}]})
    for item in (*(json_frame(0, **{f: "x\ud800"}) for f in ("job", "host", "command")),
                 in_a_table):  # fmt: skip
        body = json.dumps({"frames": [item]})  # JSON's "\ud800": a lone surrogate
        response = client.post("/api/ingest/frames", content=body, headers=headers)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/json"


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_unknown_api_paths_are_json_404s(method):
    engine = make_engine("postgresql+psycopg://nobody@/none")  # never connected
    app = create_site(engine, api_base_url="http://x")  # the dashboard mounted at / too
    with serving(app) as port:
        # (the server is a thread of this busy process: httpx's 5 s default timed out in CI)
        url = f"http://127.0.0.1:{port}"
        response = httpx.request(method, f"{url}/api/no/such/thing", timeout=READ_TIMEOUT_S)
        assert response.status_code == 404
        assert response.json() == {"detail": "unknown API path /api/no/such/thing"}
        assert httpx.get(f"{url}/", timeout=READ_TIMEOUT_S).status_code == 200  # the dashboard


def test_bearer_is_case_insensitive_and_the_token_never_echoed(app_client, caplog):  # noqa: F811
    client, _ = app_client
    batch = {"frames": [json_frame(0)]}
    for scheme in ("bearer", "BEARER", "Bearer"):
        response = client.post("/api/ingest/frames", json=batch,
                               headers={"Authorization": f"{scheme} secret"})  # fmt: skip
        assert response.status_code == 200, (scheme, response.text)
    caplog.set_level(logging.DEBUG)
    wrong = client.post("/api/ingest/frames", json=batch,
                        headers={"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert wrong.status_code == 401
    assert wrong.json() == {"detail": "missing or wrong ingest token (Authorization: Bearer ...)"}
    seen = wrong.text + str(wrong.headers) + caplog.text
    assert not [p for p in pieces(SECRET) if p in seen]


def test_a_bad_token_setting_is_refused_without_showing_it():
    env = {"STACKLENS_INGEST_TOKEN": SECRET + " with a space", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", "env"], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "stacklens: bad configuration: STACKLENS_INGEST_TOKEN must be at most 64 visible "
        "ASCII characters (no spaces)"
    ]
    assert not [p for p in pieces(SECRET) if p in result.stderr + result.stdout]


def test_a_bad_collector_setting_is_one_clear_line():
    env = {"STACKLENS_COLLECTOR": "127.0.0.1:74S1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "stacklens_cli", "replay", "/nonexistent"],
                            env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "stacklens: bad configuration: STACKLENS_COLLECTOR='127.0.0.1:74S1': expected host:port "
        "(a host name, IPv4 address or [IPv6 address], a colon, a port 0-65535)"
    ]


def test_a_tokenless_oversized_body_is_refused_before_it_is_read(pg_url, control_socket):
    from collector.service import BackgroundCollector

    engine = make_engine(pg_url)
    head = "POST /api/ingest/frames HTTP/1.1\r\nHost: [::1]\r\nContent-Type: application/json\r\n"
    try:
        with BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running:
            app = create_app(engine, collector=running.link,
                             max_body_bytes=1 << 20)  # fmt: skip
            with serving(app) as port:
                for extra, status in (("", 401), ("Authorization: bearer secret\r\n", 413)):
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                        # 37 MB announced, not one byte of it sent: the answer comes at once.
                        sock.sendall(f"{head}{extra}Content-Length: 37000000\r\n\r\n".encode())
                        answer = sock.recv(4096).decode()
                    assert answer.startswith(f"HTTP/1.1 {status} "), answer
                    assert '{"detail":' in answer
                chunked = httpx.post(f"http://127.0.0.1:{port}/api/ingest/frames", headers=AUTH,
                                     content=iter([b"[" * 65536] * 20))  # fmt: skip
                assert chunked.status_code == 413  # no length announced: cut off at the cap
                metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            assert 'stacklens_ingest_frames_rejected_total{reason="bad_token"} 1.0' in metrics
            assert 'stacklens_ingest_frames_rejected_total{reason="too_large"} 2.0' in metrics
    finally:
        engine.dispose()


def test_openapi_lists_every_error_answer(api_client):
    spec = api_client.get("/openapi.json").json()
    for route in JOB_ROUTES:
        answers = spec["paths"][f"/api/jobs/{{job}}/{route}"]["get"]["responses"]
        assert {"200", "404", "422"} <= set(answers), route
        assert answers["404"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"
        }
    ingest = spec["paths"]["/api/ingest/frames"]["post"]
    assert set(ingest["responses"]) == {"200", "400", "401", "403", "413", "422", "503"}
    assert ingest["security"] == [{"HTTPBearer": []}]


def test_docs_work_offline_in_a_browser():
    engine = make_engine("postgresql+psycopg://nobody@/none")
    app = create_app(engine)
    offsite: list[str] = []
    with serving(app) as port, chromium_page() as (page, errors):
        base = f"http://127.0.0.1:{port}"

        def only_this_server(route):
            if route.request.url.startswith(base):
                route.continue_()
            else:  # the network is blocked: any other host fails
                offsite.append(route.request.url)
                route.abort()

        page.route("**/*", only_this_server)
        page.goto(f"{base}/docs")
        page.get_by_text("/api/jobs/{job}/matrix").wait_for(timeout=30_000)
        assert page.locator(".swagger-ui .info .title").inner_text().startswith("stacklens")
    assert offsite == [] and errors == []
