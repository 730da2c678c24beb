"""The alert webhook (server/incidents/webhook.py) against a local HTTP receiver started
here: messages arrive in order, a failing receiver is retried with backoff until it
accepts, one that never accepts costs the message after the last attempt (counted), and
posting never waits for the network."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from server.incidents.webhook import Webhook


class Receiver:
    """A local HTTP server: answers 500 to the first `fail` POSTs, then 204; keeps bodies
    and the time of every POST."""

    def __init__(self, fail: int):
        self.fail = fail
        self.bodies: list[dict] = []
        self.times: list[float] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.times.append(time.monotonic())
                if len(receiver.times) <= receiver.fail:
                    self.send_response(500)
                else:
                    receiver.bodies.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail=2)
    yield r
    r.close()


async def _deliver(hook: Webhook, messages: list[dict], until) -> None:
    await hook.start()
    try:
        started = time.monotonic()
        for m in messages:
            hook.post(m)  # from the loop's thread here; the service posts from a worker
        assert time.monotonic() - started < 0.05  # posting never waits for the network
        deadline = time.monotonic() + 20
        while not until() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await hook.stop()


def test_retried_with_backoff_until_delivered(receiver):
    hook = Webhook(receiver.url, attempts=4, backoff_s=0.2)
    messages = [{"event": "opened", "incident": {"id": 1}},
                {"event": "closed", "incident": {"id": 1}}]  # fmt: skip
    asyncio.run(_deliver(hook, messages, lambda: hook.stats.delivered == 2))
    assert receiver.bodies == messages
    assert (hook.stats.delivered, hook.stats.failed_attempts) == (2, 2)
    assert hook.stats.dropped == {"retries": 0, "queue_full": 0}
    gaps = [b - a for a, b in zip(receiver.times, receiver.times[1:], strict=False)]
    assert 0.2 <= gaps[0] < 0.35 and 0.4 <= gaps[1] < 0.6  # 0.2 s, then twice that


def test_dropped_after_the_last_attempt_and_counted():
    never = Receiver(fail=10**6)
    try:
        hook = Webhook(never.url, attempts=3, backoff_s=0.05)
        asyncio.run(_deliver(hook, [{"event": "opened", "incident": {"id": 7}}],
                             lambda: hook.stats.dropped["retries"] == 1))  # fmt: skip
        assert len(never.times) == 3 and never.bodies == []
        assert (hook.stats.delivered, hook.stats.failed_attempts) == (0, 3)
        assert hook.stats.dropped == {"retries": 1, "queue_full": 0}
    finally:
        never.close()
    # nobody listening at all: connection errors count the same way
    gone = Webhook(never.url, attempts=2, backoff_s=0.05)
    asyncio.run(_deliver(gone, [{"event": "opened"}], lambda: gone.stats.dropped["retries"]))
    assert (gone.stats.failed_attempts, gone.stats.dropped["retries"]) == (2, 1)


def test_failures_are_on_metrics():
    from prometheus_client import CollectorRegistry, generate_latest

    from server.incidents.detect import Thresholds
    from server.incidents.service import IncidentService
    from server.metrics.routes import IncidentMetrics

    never = Receiver(fail=10**6)
    try:
        hook = Webhook(never.url, attempts=2, backoff_s=0.05)
        asyncio.run(_deliver(hook, [{"event": "opened"}], lambda: hook.stats.dropped["retries"]))
    finally:
        never.close()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IncidentMetrics(IncidentService(None, Thresholds(), webhook=hook)))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    assert "stacklens_webhook_failed_attempts_total 2.0" in text
    assert 'stacklens_webhook_dropped_total{reason="retries"} 1.0' in text
    assert 'stacklens_webhook_dropped_total{reason="queue_full"} 0.0' in text
    assert "stacklens_webhook_delivered_total 0.0" in text
    assert "stacklens_incidents_opened_total 0.0" in text
    assert "stacklens_incidents_silenced_total 0.0" in text
