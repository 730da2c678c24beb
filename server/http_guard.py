"""Connection limits and timeouts of the HTTP server (API, dashboard, /metrics, ingest).

uvicorn's h11 protocol arms no timer until a first response is sent, so a connection that
sends nothing, or a request head one byte at a time, would hold a descriptor for ever.
`guarded_protocol` makes a subclass of it that registers every connection with a
ConnectionGuard (stacklens/connguard.py: total and per-address limits, the oldest
connection between requests evicted for a new one) and keeps one deadline: a request head
must arrive within the handshake timeout (from the connection, or from the previous
response), a request body within the read timeout once its head has arrived. Between
requests uvicorn's own keep-alive timeout (5 s) applies.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from stacklens.connguard import ConnectionGuard, Deadline


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """An h11 protocol class whose connections `guard` admits and times out."""

    class GuardedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol with the guard's limits and deadlines."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deadline = Deadline(self._expired)
            self._peer = self.client[0] if self.client else "?"
            if not guard.admit(self, self._peer):
                transport.abort()
                return
            self._deadline.set(guard.limits.handshake_timeout_s, "handshake_timeout")

        def evictable(self) -> bool:
            """Between requests (nothing of a request received, no response pending)."""
            busy = self.cycle is not None and not self.cycle.response_complete
            return not busy and self.conn.their_state is h11.IDLE

        def drop(self, reason: str) -> None:
            """Close now (evicted or timed out)."""
            self._deadline.clear()
            if not self.transport.is_closing():
                self.transport.abort()

        def _expired(self, reason: str) -> None:
            guard.count(reason, self._peer)
            guard.release(self)
            self.drop(reason)

        def handle_events(self) -> None:
            super().handle_events()
            state = self.conn.their_state
            if state is h11.SEND_BODY and self._deadline.reason != "read_timeout":
                self._deadline.set(guard.limits.read_timeout_s, "read_timeout")
            elif state is not h11.IDLE and state is not h11.SEND_BODY:
                self._deadline.clear()  # the request is whole: the app has it

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                # the next request head, if any, in time
                self._deadline.set(guard.limits.handshake_timeout_s, "handshake_timeout")

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            self._deadline.clear()
            guard.release(self)

    return GuardedH11Protocol


def uvicorn_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """A uvicorn configuration serving `app` (made by server.app.create_app) with its
    connection guard. uvicorn's proxy headers are off: by default it rewrites the client
    address from a loopback sender's `X-Forwarded-For`, which would let any local user
    pose as the sign-in proxy; the access gate (server/access/gate.py) judges the socket's
    own peer address instead."""
    return uvicorn.Config(
        app, host=host, port=port, http=guarded_protocol(app.state.http_guard),
        proxy_headers=False, **options,
    )  # fmt: skip
