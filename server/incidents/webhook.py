"""The optional alert webhook (STACKLENS_ALERT_WEBHOOK): a JSON POST when an incident opens
or closes. The detectors only put a message on a bounded queue (never waiting); one task
sends them in order, retrying a failed POST (a connection error, a timeout or a non-2xx
answer) with exponential backoff; a message that still fails after every attempt, or that
finds the queue full, is dropped and counted. Counters are shown on /metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

log = logging.getLogger(__name__)

#: Messages waiting to be sent at most; more are dropped (counted).
QUEUE_MAX = 1000


@dataclass
class WebhookStats:
    """What the webhook did: messages delivered, failed attempts (each retry that failed),
    messages dropped after their last attempt or because the queue was full."""

    delivered: int = 0
    failed_attempts: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {"retries": 0, "queue_full": 0})


class Webhook:
    """Sends incident messages to `url`: `attempts` tries each, waiting `backoff_s`, then
    twice that, ... (capped at `max_backoff_s`) between them, each POST bounded by
    `timeout_s`."""

    def __init__(self, url: str, attempts: int = 5, backoff_s: float = 0.5,
                 max_backoff_s: float = 30.0, timeout_s: float = 5.0):  # fmt: skip
        self.url = url
        self.attempts, self.backoff_s, self.max_backoff_s = attempts, backoff_s, max_backoff_s
        self.timeout_s = timeout_s
        self.stats = WebhookStats()
        self._queue: asyncio.Queue[dict[str, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the sending task on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue(QUEUE_MAX)
        self._task = asyncio.create_task(self._send_all(), name="webhook")

    async def stop(self) -> None:
        """Stop sending (messages still queued are dropped, not counted as failures)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def post(self, message: dict[str, Any]) -> None:
        """Queue a message from any thread; never waits (a full queue drops it, counted)."""
        if self._loop is None or self._loop.is_closed():
            self.stats.dropped["queue_full"] += 1
            return
        self._loop.call_soon_threadsafe(self._put, message)

    def _put(self, message: dict[str, Any]) -> None:
        assert self._queue is not None
        try:
            self._queue.put_nowait(message)
        except asyncio.QueueFull:
            self.stats.dropped["queue_full"] += 1

    async def _send_all(self) -> None:
        assert self._queue is not None
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            while True:
                message = await self._queue.get()
                await self._send(client, message)

    async def _send(self, client: httpx.AsyncClient, message: dict[str, Any]) -> None:
        wait = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                answer = await client.post(self.url, json=message)
                if 200 <= answer.status_code < 300:
                    self.stats.delivered += 1
                    return
                why = f"HTTP {answer.status_code}"
            except httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {exc}"
            self.stats.failed_attempts += 1
            if attempt == self.attempts:
                break
            log.warning("alert webhook: attempt %d failed (%s); retrying in %.1f s",
                        attempt, why, wait)  # fmt: skip
            await asyncio.sleep(wait)
            wait = min(wait * 2, self.max_backoff_s)
        self.stats.dropped["retries"] += 1
        log.warning("alert webhook: message about incident %s dropped after %d attempts",
                    message.get("incident", {}).get("id"), self.attempts)  # fmt: skip
