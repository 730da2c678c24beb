"""The Host header check of the HTTP server: requests must name this server.

A browser lets any web page send requests to a server on the user's own machine or
network under another name (DNS rebinding: the page's own name resolves to 127.0.0.1);
only the Host header tells. `HostCheck`, an ASGI middleware in front of everything (API,
/metrics, ingest, dashboard), answers a request whose Host is not one of the configured
names (stacklens.settings.Settings.allowed_hosts: STACKLENS_HTTP_ALLOWED_HOSTS, or the
names of the bound address) with 400 and a JSON `{"detail": reason}`, closes the
connection, and counts it among the HTTP server's refused connections (`refused_host`
on /metrics).
"""

from __future__ import annotations

import json
from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

from stacklens.connguard import ConnectionGuard


def host_name(header: str) -> str:
    """The name of a Host header value, without its port: lower case, no trailing dot,
    an IPv6 address without its brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0].rstrip(".") if value.count(":") <= 1 else value


class HostCheck:
    """Refuse requests whose Host header is missing or not one of `allowed` (names as
    host_name gives them)."""

    def __init__(self, app: ASGIApp, allowed: Collection[str], guard: ConnectionGuard):
        self.app = app
        self.allowed = frozenset(allowed)
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        raw = headers.get(b"host", b"").decode("latin-1")
        if host_name(raw) in self.allowed:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        self.guard.count("refused_host", client[0] if client else "?")
        shown = raw[:100] if raw.isprintable() else repr(raw[:100])
        reason = (f"Host {shown!r} is not a name of this server (allowed: "
                  f"{', '.join(sorted(self.allowed))}; STACKLENS_HTTP_ALLOWED_HOSTS)")  # fmt: skip
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"detail": reason}).encode()
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
