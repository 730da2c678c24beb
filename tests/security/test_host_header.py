"""The Host header check (#13 point 3, DNS rebinding): a request naming another host is
refused with a JSON 400 and counted; the server's own names pass. Against a real
`stacklens up`."""

from __future__ import annotations

import socket

import httpx

from stacklens.settings import Settings
from tests.conftest import running_up


def raw_request(port: int, head: bytes) -> bytes:
    """Send a raw HTTP request head; the whole answer (the server closes after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_host_that_is_not_the_servers_is_refused(pg_url, tmp_path):
    with running_up(pg_url, tmp_path / "state") as up:
        base, port = up["base"], int(up["STACKLENS_HTTP_PORT"])
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST."):
            assert httpx.get(f"{base}/api/health", headers={"Host": host}).status_code == 200
        rebound = httpx.get(f"{base}/api/jobs", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 400
        assert rebound.json() == {"detail": (
            f"Host 'attacker.example:{port}' is not a name of this server (allowed: 127.0.0.1, "
            "::1, localhost; STACKLENS_HTTP_ALLOWED_HOSTS)")}  # fmt: skip
        assert rebound.headers["connection"] == "close"
        dashboard = httpx.get(f"{base}/", headers={"Host": "0.0.0.0"})
        assert dashboard.status_code == 400
        no_host = raw_request(port, b"GET /api/health HTTP/1.0\r\n\r\n")
        assert no_host.startswith(b"HTTP/1.1 400 ") and b"is not a name of this server" in no_host
        metrics = httpx.get(f"{base}/metrics").text
        assert 'stacklens_http_connections_dropped_total{reason="refused_host"} 3.0' in metrics


def test_configured_names_replace_the_derived_ones(pg_url, tmp_path):
    names = "stacklens.example, Other.Example."
    with running_up(pg_url, tmp_path / "state", STACKLENS_HTTP_ALLOWED_HOSTS=names) as up:
        base = up["base"]
        for host, status in (("stacklens.example", 200), ("other.example:80", 200),
                             ("localhost", 400), ("evil.example", 400)):  # fmt: skip
            assert httpx.get(f"{base}/api/health", headers={"Host": host}).status_code == status
        # the dashboard's own calls to the API (at 127.0.0.1) still pass
        assert httpx.get(f"{base}/api/health").status_code == 200


def test_derived_names_follow_the_bound_address():
    assert Settings(http_host="127.0.0.1").allowed_hosts() == {"127.0.0.1", "localhost", "::1"}
    assert Settings(http_host="10.1.2.3").allowed_hosts() == {"10.1.2.3"}
    everywhere = Settings(http_host="0.0.0.0").allowed_hosts()
    assert {"localhost", socket.gethostname().lower()} <= everywhere
    assert "0.0.0.0" not in everywhere
    named = Settings(http_host="0.0.0.0", http_allowed_hosts="a.example,[fd00::1]")
    assert named.allowed_hosts() == {"a.example", "fd00::1"}
