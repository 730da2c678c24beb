"""The deployment says its modes (issue #24 finding 7): `stacklens status`, /metrics and
GET /api/deployment (the dashboard's footer: tests/e2e/test_mode_footer.py) name the ingest
and auth modes and how many users sent runs lately; trusted ingest with two users sending
(frames claiming alice and bob, through the real collector of the real app served over
HTTP) is warned about there and in the collector's log, when first seen and at a start;
proven ingest with the same two users is not."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from sqlalchemy import Engine

from collector.service import BackgroundCollector, CollectorService
from server.access.viewer import Access
from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine
from stacklens.settings import Settings
from stacklens_cli.status import status_lines
from tests.access.data import token_for
from tests.collector.test_ingest import exchange
from tests.conftest import serving

S = 10**9
#: The warning of trusted ingest with alice and bob sending (stacklens/modes.py).
WARNING = (
    "trusted ingest with 2 users sending: any of them can write into another's job and "
    "claim any user (STACKLENS_INGEST_AUTH=proven keeps them apart; docs/identity.md)"
)


def send_runs(address: tuple[str, int], users: list[str], now_ns: int) -> None:
    """One single-rank run per user (job `<user>-job`), its frame claiming that user, ended
    a minute before `now_ns`."""
    frames = [
        wire.encode_frame(
            job_id=f"{user}-job", world_rank=0, world_size=1, seq=0, token="secret",
            interval_start_ns=now_ns - 61 * S, interval_end_ns=now_ns - 60 * S,
            tables={"rank_info": wire.records(
                "rank_info", [{"command": b"./app", "user": user.encode()}])},
        )
        for user in users
    ]  # fmt: skip
    assert exchange(address, b"".join(frames), acks=len(frames)) == [(0, 0)] * len(frames)


@contextlib.contextmanager
def served(
    pg_url: str, ingest: str, access: Access
) -> Iterator[tuple[str, Engine, CollectorService]]:
    """The app with its own collector (`ingest` mode, token "secret", TCP only; reached over
    its control channel) served over HTTP: (base URL, engine, collector)."""
    engine = make_engine(pg_url)
    control = Path(tempfile.mkdtemp(prefix="stacklens-control-", dir="/tmp")) / "control.sock"
    try:
        with BackgroundCollector(pg_url, token="secret", ingest_auth=ingest,
                                 control_socket=control) as running:  # fmt: skip
            app = create_app(engine, collector=running.link, access=access)
            with serving(app) as port:
                yield f"http://127.0.0.1:{port}", engine, running.service
    finally:
        engine.dispose()
        shutil.rmtree(control.parent, ignore_errors=True)


def status(pg_url: str, base: str, tmp_path: Path, token: str = "") -> dict[str, str]:
    """`stacklens status` rows by name, against the served app and the test database."""
    settings = Settings(http_port=int(base.rsplit(":", 1)[1]), state_dir=tmp_path / "state",
                        spool_dir="off", collector="127.0.0.1:9", database_url=pg_url,
                        api_token=token)  # fmt: skip
    _, lines = status_lines(settings)
    return {line[:10].strip(): line[12:] for line in lines[1:]}


def metric_lines(base: str, headers: dict[str, str] | None = None) -> list[str]:
    """The lines of /metrics about the modes and the users sending."""
    text = httpx.get(f"{base}/metrics", headers=headers).text
    return [line for line in text.splitlines()
            if line.startswith(("stacklens_mode_info", "stacklens_ingest_senders"))]  # fmt: skip


def test_trusted_ingest_with_two_users_is_said_and_warned_about(pg_url, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="collector.service")
    with served(pg_url, "trusted", Access()) as (base, _, collector):
        assert "ingest mode trusted (STACKLENS_INGEST_AUTH)" in caplog.messages
        assert httpx.get(f"{base}/api/deployment").json() == {
            "ingest": "trusted", "auth": "none", "senders": 0, "senders_window_s": 86400,
            "warning": None,
        }  # fmt: skip
        now = time.time_ns()
        send_runs(("127.0.0.1", collector.port), ["alice"], now)
        assert asyncio.run(collector.check_senders_once()) == 1
        assert WARNING not in caplog.messages  # one user: nothing to warn of
        send_runs(("127.0.0.1", collector.port), ["bob"], now)
        assert asyncio.run(collector.check_senders_once()) == 2
        assert caplog.messages.count(WARNING) == 1  # when first seen ...
        assert asyncio.run(collector.check_senders_once()) == 2
        assert caplog.messages.count(WARNING) == 1  # ... and only then
        assert httpx.get(f"{base}/api/deployment").json() == {
            "ingest": "trusted", "auth": "none", "senders": 2, "senders_window_s": 86400,
            "warning": WARNING,
        }  # fmt: skip
        assert metric_lines(base) == [
            'stacklens_mode_info{auth="none",ingest="trusted"} 1.0',
            "stacklens_ingest_senders 2.0",
        ]
        rows = status(pg_url, base, tmp_path)
    assert rows["modes"] == (
        "ingest trusted, auth none (the server's); 2 users sent runs in the last 24 h"
    )
    assert rows["warning"] == WARNING
    # a collector starting over these runs says so at its start
    caplog.clear()
    with BackgroundCollector(pg_url, token="secret"):
        assert caplog.messages.count(WARNING) == 1


def test_proven_ingest_with_the_same_users_is_said_without_a_warning(pg_url, tmp_path):
    with BackgroundCollector(pg_url, token="secret") as trusted:  # their runs, sent before
        send_runs(trusted.address, ["alice", "bob"], time.time_ns())
    access = Access(mode="oidc", admins=frozenset({"carol"}))
    with served(pg_url, "proven", access) as (base, engine, _):
        token = token_for(engine, "carol")
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{base}/api/deployment", headers=headers).json() == {
            "ingest": "proven", "auth": "oidc", "senders": 2, "senders_window_s": 86400,
            "warning": None,
        }  # fmt: skip
        assert metric_lines(base, headers) == [
            'stacklens_mode_info{auth="oidc",ingest="proven"} 1.0',
            "stacklens_ingest_senders 2.0",
        ]
        rows = status(pg_url, base, tmp_path, token)
    assert (
        rows["modes"]
        == "ingest proven, auth oidc (the server's); 2 users sent runs in the last 24 h"
    )
    assert "warning" not in rows


def test_status_without_a_server_says_this_nodes_settings(pg_url, tmp_path):
    settings = Settings(http_port=9, state_dir=tmp_path / "state", spool_dir="off",
                        collector="127.0.0.1:9", database_url=pg_url, ingest_auth="trusted",
                        auth_mode="proxy")  # fmt: skip
    _, lines = status_lines(settings)
    rows = {line[:10].strip(): line[12:] for line in lines[1:]}
    assert rows["modes"] == (
        "ingest trusted, auth proxy (this node's settings); 0 users sent runs in the last 24 h"
    )
    assert "warning" not in rows
