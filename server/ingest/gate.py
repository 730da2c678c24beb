"""The door of the HTTP ingest: who may send, and how much, decided before the body is read.

FastAPI reads a request body before a route or its dependencies run, so the token and the
size cap are checked here, in an ASGI middleware in front of `POST /api/ingest/frames`,
against what the collector says of itself over its control channel (collector/control.py):
no collector for this server, or none answering → 503; a collector in proven mode
(STACKLENS_INGEST_AUTH=proven: a bearer token proves no Unix user) → 403; no token
configured and a client not on loopback → 403; a missing or wrong `Authorization: Bearer
<token>` (the scheme in any case) → 401; a declared `Content-Length` over the cap → 413;
then the body is read up to the cap (413 as soon as it goes over) and handed to the route.
Every refusal is a JSON `{"detail": reason}`, counted among the collector's rejected
frames' reasons, and never repeats what the client sent as a token.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from collector.control import CollectorUnavailable
from collector.ingest.server import accepted_without_token
from stacklens.settings import TOKEN_MAX_BYTES

#: The path the gate guards.
INGEST_PATH = "/api/ingest/frames"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value (scheme case-insensitive),
    None if the header is absent or of another form."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 4 * TOKEN_MAX_BYTES:
        return None
    return token


class IngestGate:
    """ASGI middleware: refuses unauthorised or oversized ingest requests unread."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != INGEST_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        collector = scope["app"].state.collector
        refusal = await self._refusal(scope)
        if refusal is None:
            body, refusal = await self._read_body(receive)
        if refusal is not None:
            status, label, reason = refusal
            if collector is not None and label != "unavailable":
                await collector.count_rejected(label)
            await _answer(send, status, reason)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # then only a disconnect can come
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """(status, metrics label, reason) if the request's head already refuses it."""
        collector = scope["app"].state.collector
        if collector is None:
            return 503, "unavailable", "this server runs no collector"
        try:
            ingest = await collector.status()
        except CollectorUnavailable:
            return 503, "unavailable", "the collector is not answering: resend later"
        if ingest.proven:
            reason = ("the HTTP ingest proves no Unix user: it takes frames only in trusted mode "
                      "(STACKLENS_INGEST_AUTH=trusted)")  # fmt: skip
            return 403, "unproven", reason
        client = scope.get("client")
        if not ingest.token and not accepted_without_token(client[0] if client else None):
            reason = "no ingest token configured: only loopback senders are accepted"
            return 403, "bad_token", reason
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        token = bearer_token(headers.get("authorization")) or ""
        if not hmac.compare_digest(token.encode(), ingest.token.encode()):
            return 401, "bad_token", "missing or wrong ingest token (Authorization: Bearer ...)"
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body_bytes:
            return 413, "too_large", self._too_large()
        return None

    async def _read_body(self, receive: Receive) -> tuple[bytes, tuple[int, str, str] | None]:
        """The body, read up to the cap; or a refusal once it goes over."""
        parts, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"", (400, "bad_length", "the client left before the body was whole")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return b"", (413, "too_large", self._too_large())
            parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts), None

    def _too_large(self) -> str:
        return f"request body over {self.max_body_bytes} bytes (STACKLENS_HTTP_MAX_BODY_MB)"


async def _answer(send: Send, status: int, reason: str) -> None:
    """A JSON error response that closes the connection (the unread body stays unread)."""
    body = json.dumps({"detail": reason}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
