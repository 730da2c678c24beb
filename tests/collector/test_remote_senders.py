"""Senders on another host: a network namespace of the test's own, joined to this one by a
veth pair, is the remote host (what `ip netns` gives root on one machine).

* Without an ingest token, the TCP ingest and the HTTP ingest accept senders on the
  loopback interface only: a remote sender gets status bad_token (TCP) or 403 (HTTP) and
  nothing is stored; the same frame from loopback is stored.
* With a token, a remote sender with the right token is stored, one with a wrong token is
  not.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from collector.service import BackgroundCollector
from server.access.viewer import Access
from server.app import create_app
from stacklens.db import make_engine
from stacklens.paths import SOURCE_ROOT
from stacklens.wire import Status
from tests.collector.test_ingest import exchange, frame
from tests.conftest import query, serving
from tests.server.test_ingest_and_metrics import json_frame


@dataclass(frozen=True)
class RemoteHost:
    """A network namespace at `ip`, reaching this host at `local_ip`."""

    netns: str
    local_ip: str
    ip: str

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess:
        """Runs Python code in the namespace (the project importable), output as text."""
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, sys.executable, "-c", code, *args],
            cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip


def ip(*args: str) -> None:
    """One `ip` command; fails the test with its message if it fails."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert result.returncode == 0, f"ip {' '.join(args)}: {result.stderr}"


@pytest.fixture
def remote_host() -> Iterator[RemoteHost]:
    """A namespace with one veth end at 10.231.N.2/30; this host's end is 10.231.N.1."""
    tag = uuid.uuid4().hex[:6]
    netns, here, there = f"slns{tag}", f"slh{tag}", f"slr{tag}"
    subnet = f"10.231.{int(tag[:2], 16)}"
    try:
        ip("netns", "add", netns)
        ip("link", "add", here, "type", "veth", "peer", "name", there)
        ip("link", "set", there, "netns", netns)
        ip("addr", "add", f"{subnet}.1/30", "dev", here)
        ip("link", "set", here, "up")
        ip("-n", netns, "addr", "add", f"{subnet}.2/30", "dev", there)
        ip("-n", netns, "link", "set", there, "up")
        ip("-n", netns, "link", "set", "lo", "up")
        yield RemoteHost(netns, f"{subnet}.1", f"{subnet}.2")
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        subprocess.run(["ip", "link", "del", here], capture_output=True)


#: Sends one frame (token argv[3]) to argv[1]:argv[2] and prints the acks as JSON.
SEND_FRAME = """
import json, sys
from tests.collector.test_ingest import exchange, frame
print(json.dumps(exchange((sys.argv[1], int(sys.argv[2])), frame(0, token=sys.argv[3]), 1)))
"""


def remote_acks(host: RemoteHost, port: int, token: str) -> list[list[int]]:
    """The acks a frame sent from `host` to this host's `port` gets."""
    result = host.python(SEND_FRAME, host.local_ip, str(port), token)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def stored_frames(pg_url: str) -> int:
    return query(pg_url, "SELECT count(*) FROM received_frames")[0][0]


def test_tcp_ingest_without_token_accepts_loopback_only(pg_url, remote_host):
    with BackgroundCollector(pg_url, token="", listen="0.0.0.0:0") as collector:
        port = collector.service.port
        assert remote_acks(remote_host, port, "") == [[Status.BAD_TOKEN, 0]]
        assert stored_frames(pg_url) == 0
        assert exchange(("127.0.0.1", port), frame(0, token=""), 1) == [(Status.COMMITTED, 0)]
        assert stored_frames(pg_url) == 1


def test_tcp_ingest_with_token_accepts_remote_senders_that_have_it(pg_url, remote_host):
    with BackgroundCollector(pg_url, token="secret", listen="0.0.0.0:0") as collector:
        port = collector.service.port
        assert remote_acks(remote_host, port, "wrong") == [[Status.BAD_TOKEN, 0]]
        assert stored_frames(pg_url) == 0
        assert remote_acks(remote_host, port, "secret") == [[Status.COMMITTED, 0]]
        assert stored_frames(pg_url) == 1


@contextlib.contextmanager
def http_server(pg_url: str, token: str, name: str) -> Iterator[int]:
    """The web app with a collector (ingest token `token`) on 0.0.0.0, answering to the
    host name (or address) `name` too; yields its port."""
    engine = make_engine(pg_url)
    control = Path(tempfile.mkdtemp(prefix="stacklens-control-", dir="/tmp")) / "control.sock"
    try:
        with BackgroundCollector(pg_url, token=token, control_socket=control) as running:
            app = create_app(
                engine,
                collector=running.link,
                access=Access(hosts=frozenset({"127.0.0.1", name})),
            )
            with serving(app, host="0.0.0.0") as port:
                yield port
    finally:
        engine.dispose()
        shutil.rmtree(control.parent, ignore_errors=True)


#: POSTs argv[3] (a JSON batch) to http://argv[1]:argv[2]/api/ingest/frames; prints the
#: status code and body as JSON.
POST_BATCH = """
import json, sys, urllib.error, urllib.request
request = urllib.request.Request(
    f"http://{sys.argv[1]}:{sys.argv[2]}/api/ingest/frames", data=sys.argv[3].encode(),
    headers={"Content-Type": "application/json"}, method="POST")
try:
    with urllib.request.urlopen(request, timeout=20) as response:
        print(json.dumps([response.status, json.loads(response.read())]))
except urllib.error.HTTPError as error:
    print(json.dumps([error.code, json.loads(error.read())]))
"""


def test_http_ingest_without_token_accepts_loopback_only(pg_url, remote_host):
    batch = json.dumps({"frames": [json_frame(0)]})
    with http_server(pg_url, token="", name=remote_host.local_ip) as port:
        result = remote_host.python(POST_BATCH, remote_host.local_ip, str(port), batch)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == [
            403, {"detail": "no ingest token configured: only loopback senders are accepted"}
        ]  # fmt: skip
        assert stored_frames(pg_url) == 0
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/ingest/frames", data=batch.encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=20) as response:
            assert (response.status, json.loads(response.read())) == (200, {"stored": 1})
        assert stored_frames(pg_url) == 1
