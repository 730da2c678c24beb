"""Logins for people, tokens for scripts (#13 point 3): the modes set by settings, tested
against the real app, the real database and the real `stacklens` command.

- `stacklens up` refuses to serve beyond loopback without a login (one line), and with
  the explicit override serves with a warning;
- the Host header must name this server (DNS rebinding);
- API tokens from `stacklens token create` work until they expire or are revoked, and
  the database holds only their hash;
- proxy mode believes the user header only from a configured proxy address;
- OIDC login against a provider started inside the test (tests/access/oidc_provider.py).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from server.access.viewer import Access
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.access.data import ALICE_JOB, BOB_JOB, send_two_users_jobs, token_for
from tests.access.oidc_provider import Provider
from tests.conftest import free_port, query, running_up, serving


def _stacklens(*argv: str, **settings: str) -> subprocess.CompletedProcess:
    """`stacklens ARGV...` as an administrator types it, with only these STACKLENS_* set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(settings)
    return subprocess.run([sys.executable, "-m", "stacklens_cli", *argv], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.fixture
def engine(pg_url):
    engine = make_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def jobs(collector) -> None:
    """alice's job and bob's, through the real collector."""
    send_two_users_jobs(collector)


def _jobs_seen(client, **headers: str) -> list[str] | int:
    """The jobs /api/jobs lists with these headers, or the status if refused."""
    answer = client.get("/api/jobs", headers=headers)
    return (
        [j["job"] for j in answer.json()["jobs"]]
        if answer.status_code == 200
        else (answer.status_code)
    )


# -- binding beyond loopback ------------------------------------------------------------


@pytest.mark.parametrize("command", ["up", "demo"])
def test_refuses_to_serve_on_every_address_without_a_login(command, tmp_path):
    result = _stacklens(command, STACKLENS_HTTP_HOST="0.0.0.0", STACKLENS_STATE_DIR=str(tmp_path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "stacklens: refusing to serve on STACKLENS_HTTP_HOST=0.0.0.0 without authentication: "
        "anyone who reaches it reads every job, user, command and path; set "
        "STACKLENS_AUTH_MODE=proxy or oidc, or STACKLENS_HTTP_HOST=127.0.0.1 "
        "(STACKLENS_ALLOW_OPEN_BIND=1 serves anyway)\n"
    )
    assert list(tmp_path.iterdir()) == []  # nothing was started


def test_the_override_serves_with_a_warning_and_a_login_mode_serves_quietly(pg_url, tmp_path):
    with running_up(pg_url, tmp_path / "open", STACKLENS_HTTP_HOST="0.0.0.0",
                    STACKLENS_ALLOW_OPEN_BIND="1") as up:  # fmt: skip
        assert httpx.get(f"{up['base']}/api/jobs").json()["jobs"] == []
        log = Path(up["log"]).read_text()
    assert (
        "stacklens: warning: serving on STACKLENS_HTTP_HOST=0.0.0.0 without authentication: "
        "anyone who reaches it reads every job, user, command and path "
        "(STACKLENS_ALLOW_OPEN_BIND=1)\n"
    ) in log
    with running_up(pg_url, tmp_path / "proxy", STACKLENS_HTTP_HOST="0.0.0.0",
                    STACKLENS_AUTH_MODE="proxy", STACKLENS_PROXY_ADDRESSES="127.0.0.0/8",
                    STACKLENS_PROXY_USER_HEADER="X-Remote-User",
                    STACKLENS_HTTP_ALLOWED_HOSTS="stacklens.example.org") as up:  # fmt: skip
        base = up["base"]
        assert httpx.get(f"{base}/api/jobs").status_code == 401
        assert (
            httpx.get(f"{base}/api/jobs", headers={"X-Remote-User": "alice"}).json()["jobs"] == []
        )
        named = {"X-Remote-User": "alice", "Host": "stacklens.example.org:7450"}
        assert httpx.get(f"{base}/api/jobs", headers=named).status_code == 200
        log = Path(up["log"]).read_text()
    assert "warning" not in log


# -- Host header -------------------------------------------------------------------------


def test_a_host_header_naming_another_site_is_refused(pg_url, engine):
    access = Access(hosts=frozenset({"127.0.0.1", "::1", "stacklens.example.org"}))
    app = create_site(engine, api_base_url="http://127.0.0.1", access=access)
    for base in ("http://127.0.0.1:7450", "http://[::1]:7450", "http://STACKLENS.example.org"):
        with TestClient(app, base_url=base) as client:
            assert client.get("/api/jobs").json()["jobs"] == [], base
    for host in ("attacker.example", "stacklens.example.org.attacker.example", "localhost"):
        with TestClient(app, base_url=f"http://{host}:7450") as client:
            for path in ("/api/jobs", "/", "/api/health", "/api/ingest/frames"):
                answer = client.get(path)
                assert answer.status_code == 400, (host, path)
                assert answer.json() == {
                    "detail": f"this server does not answer to the host name {host!r} "
                    "(STACKLENS_HTTP_ALLOWED_HOSTS)"
                }


# -- API tokens --------------------------------------------------------------------------


def test_tokens_work_until_revoked_or_expired_and_only_their_hash_is_stored(pg_url, engine, jobs):
    db = {"STACKLENS_DATABASE_URL": pg_url}
    created = _stacklens("token", "create", "--user", "alice", "--name", "ci", **db)
    assert created.returncode == 0, created.stderr
    token, note = created.stdout.splitlines()
    assert token.startswith("slt_") and len(token) == 47
    assert note.startswith("# token 1 for alice, expires in 90 days")
    before_ns = time.time_ns()
    short = _stacklens("token", "create", "--user", "bob", "--days", "0.5", **db)
    assert short.returncode == 0, short.stderr
    short_token = short.stdout.splitlines()[0]
    ((expires_ns,),) = query(pg_url, "SELECT expires_ns FROM api_tokens WHERE id = 2")
    half_day_ns = 43_200 * 10**9
    assert before_ns + half_day_ns <= expires_ns <= time.time_ns() + half_day_ns
    stored = query(pg_url, 'SELECT id, "user", name, sha256 FROM api_tokens ORDER BY id')
    assert [(i, u, n) for i, u, n, _ in stored] == [(1, "alice", "ci"), (2, "bob", "")]
    assert bytes(stored[0][3]) == hashlib.sha256(token.encode()).digest()
    dump = str(query(pg_url, "SELECT * FROM api_tokens"))
    assert token not in dump and short_token not in dump

    app = create_site(engine, api_base_url="http://127.0.0.1", access=Access(mode="oidc"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert _jobs_seen(client, Authorization=f"Bearer {token}") == [ALICE_JOB]
        assert _jobs_seen(client, Authorization=f"bearer {short_token}") == [BOB_JOB]
        assert _jobs_seen(client, Authorization=f"Bearer {token}x") == 401
        assert _jobs_seen(client) == 401
        # Its lifetime runs out (set in the database, not waited for: a loaded node would
        # expire a seconds-long token before its first use).
        lapse = "UPDATE api_tokens SET expires_ns = %s WHERE id = 2 RETURNING id"
        assert query(pg_url, lapse, (time.time_ns() - 1,)) == [(2,)]
        refused = client.get("/api/jobs", headers={"Authorization": f"Bearer {short_token}"})
        assert refused.status_code == 401
        assert refused.json() == {"detail": "unknown, expired or revoked API token"}
        listed = _stacklens("token", "list", **db)
        assert [line.split("\t")[:3] + line.split("\t")[5:] for line in
                listed.stdout.splitlines()] == [
            ["id", "user", "name", "state"], ["1", "alice", "ci", "active"],
            ["2", "bob", "", "expired"]]  # fmt: skip
        revoked = _stacklens("token", "revoke", "1", **db)
        assert (revoked.returncode, revoked.stdout) == (0, "token 1 revoked\n")
        assert _jobs_seen(client, Authorization=f"Bearer {token}") == 401
        again = _stacklens("token", "revoke", "1", **db)
        assert (again.returncode, again.stderr) == (1, "stacklens: no active token 1\n")
        only_alice = _stacklens("token", "list", "--user", "alice", **db)
        assert only_alice.stdout.splitlines()[1].split("\t")[-1] == "revoked"
        assert len(only_alice.stdout.splitlines()) == 2


# -- proxy header ------------------------------------------------------------------------


@pytest.mark.parametrize("trusted", [True, False])
def test_the_proxy_header_counts_only_from_a_proxy_address(engine, jobs, trusted):
    proxies = "127.0.0.1/32" if trusted else "10.0.0.0/8"  # the test client is 127.0.0.1
    access = Access(
        mode="proxy", proxies=(ipaddress.ip_network(proxies),), admins=frozenset({"carol"})
    )
    app = create_site(engine, api_base_url="http://127.0.0.1", access=access)
    with serving(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        alice = _jobs_seen(client, **{"X-Forwarded-User": "alice"})
        admin = _jobs_seen(client, **{"X-Forwarded-User": "carol"})
        if trusted:
            assert (alice, admin) == ([ALICE_JOB], [BOB_JOB, ALICE_JOB])
        else:
            assert (alice, admin) == (401, 401)
        assert _jobs_seen(client) == 401
        # an API token counts from anywhere, whatever the header says
        token = token_for(engine, "bob")
        assert _jobs_seen(client, Authorization=f"Bearer {token}",
                          **{"X-Forwarded-User": "carol"}) == [BOB_JOB]  # fmt: skip


def test_a_client_supplied_forwarded_for_does_not_make_its_sender_a_proxy(engine, jobs):
    """The attack of #24 finding 1: the proxy is 127.0.0.2; a local user on 127.0.0.1 who
    sends `X-Forwarded-For: 127.0.0.2` with bob's name gets nothing (uvicorn would
    otherwise rewrite the client address from that header); the real proxy, connecting
    from 127.0.0.2, still names its users."""
    access = Access(mode="proxy", proxies=(ipaddress.ip_network("127.0.0.2/32"),))
    app = create_site(engine, api_base_url="http://127.0.0.1", access=access)
    forged = {"X-Forwarded-User": "bob", "X-Forwarded-For": "127.0.0.2",
              "X-Real-IP": "127.0.0.2", "Forwarded": "for=127.0.0.2"}  # fmt: skip
    with serving(app) as port:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as attacker:
            assert _jobs_seen(attacker, **forged) == 401
            assert attacker.get(f"/api/jobs/{BOB_JOB}", headers=forged).status_code == 401
        proxy = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=base, transport=proxy) as through_proxy:
            assert _jobs_seen(through_proxy, **{"X-Forwarded-User": "bob"}) == [BOB_JOB]
            # what the proxy forwards of its client changes nothing of who the proxy is
            relayed = {"X-Forwarded-User": "alice", "X-Forwarded-For": "10.9.9.9"}
            assert _jobs_seen(through_proxy, **relayed) == [ALICE_JOB]


# -- OIDC --------------------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[Provider]:
    port = free_port()
    provider = Provider(issuer=f"http://127.0.0.1:{port}")
    with serving(provider.app(), port=port):
        yield provider


def _login(client: httpx.Client) -> httpx.Response:
    """Follow a browser's way through the login: the dashboard, the provider, back."""
    start = client.get("/")
    assert (start.status_code, start.headers["location"]) == (302, "/auth/login")
    at_provider = client.get(start.headers["location"])
    assert at_provider.status_code == 302
    back = httpx.get(at_provider.headers["location"])  # the provider signs in at once
    assert back.status_code == 302
    return client.get(back.headers["location"])


def test_oidc_login_gives_a_session_for_the_provider_user(engine, jobs, provider):
    access = Access(mode="oidc", oidc_issuer=provider.issuer, oidc_client_id="stacklens",
                    oidc_client_secret=provider.client_secret, admin_group="hpc-staff")  # fmt: skip
    app = create_site(engine, api_base_url="http://127.0.0.1", access=access)
    with serving(app) as port:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as client:
            assert _jobs_seen(client) == 401
            done = _login(client)
            assert (done.status_code, done.headers["location"]) == (302, "/")
            assert "stacklens_session" in client.cookies
            assert _jobs_seen(client) == [ALICE_JOB]
            page = client.get("/")
            assert page.status_code == 200 and "<title>" in page.text
            # a session cookie changed by hand is no session
            cookie = client.cookies["stacklens_session"]
            forged = httpx.get(
                f"{base}/api/jobs", cookies={"stacklens_session": cookie[:-3] + "AAA"}
            )
            assert forged.status_code == 401
            client.get("/auth/logout")
            assert _jobs_seen(client) == 401
        provider.user, provider.groups = "dave", ["hpc-staff"]  # an admin by group
        with httpx.Client(base_url=base) as client:
            _login(client)
            assert _jobs_seen(client) == [BOB_JOB, ALICE_JOB]
        provider.client_secret = "changed"  # the provider no longer knows stacklens' secret
        with httpx.Client(base_url=base) as client:
            refused = _login(client)
            assert refused.status_code == 401
            assert refused.json()["detail"].startswith("login failed")
            assert _jobs_seen(client) == 401


def test_members_of_the_admin_group_see_every_job(engine, jobs):
    # root is in the Unix group root on every machine; alice is no user here at all
    access = Access(mode="proxy", proxies=(ipaddress.ip_network("127.0.0.1"),),
                    admin_group="root")  # fmt: skip
    app = create_site(engine, api_base_url="http://127.0.0.1", access=access)
    with serving(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
        assert _jobs_seen(client, **{"X-Forwarded-User": "root"}) == [BOB_JOB, ALICE_JOB]
        assert _jobs_seen(client, **{"X-Forwarded-User": "alice"}) == [ALICE_JOB]
