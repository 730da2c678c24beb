"""The access gate: an ASGI middleware in front of every HTTP request of the app.

In this order: the Host header must name this server (`Access.hosts`: a page of another
site that a DNS record points here, "DNS rebinding", gets a 400); then the request's
viewer is recognised, from the first of

- a viewer pass (`VIEWER_PASS_HEADER`): the dashboard calling the API for the viewer of
  the page request it is answering (signed here, valid for `PASS_S` seconds);
- `Authorization: Bearer slt_...`: an API token (tokens.py); an unknown, expired or
  revoked one is a 401, whatever else the request carries (another bearer value, like
  the ingest token, is not an API token and is left to the ingest gate);
- auth_mode=proxy: the user header, believed only when the connection's own peer
  address (the socket's, never an `X-Forwarded-For`/`Forwarded` header: the server runs
  with uvicorn's proxy headers off, see server/http_guard.py) is a configured proxy; from
  any other address it is ignored;
- auth_mode=oidc: the signed session cookie set by the login (oidc.py);
- auth_mode=none: the one local viewer, who sees everything (the server only runs so on
  loopback, see Settings.check_exposure).

The viewer goes to `request.state.viewer`, where the owner filter (owner.py) reads it.
A request with no viewer gets a 401 (an OIDC login page: a redirect to it), except on the
open paths: the health probe, the ingest (its own gate: server/ingest/gate.py), the
login itself and the API docs' static files. The dashboard's requests get a fresh viewer
pass in their headers, which its API client sends on (frontend/api.py): the dashboard
reads the API as the viewer, never as anyone else.
"""

from __future__ import annotations

import json

from anyio import to_thread
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import Engine
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from server.access import tokens
from server.access.viewer import Access, Viewer
from server.ingest.gate import bearer_token
from stacklens.constants import VIEWER_PASS_HEADER

#: How long a viewer pass is valid: one dashboard request's API calls.
PASS_S = 60
_PASS = VIEWER_PASS_HEADER.lower().encode()
#: Paths served to anyone who names this server (no viewer needed).
OPEN_PATHS = ("/api/health",)
OPEN_PREFIXES = ("/api/ingest/", "/auth/", "/docs-assets/")


def host_name(host: str) -> str:
    """The name part of a Host header value, lower case: without the port, an IPv6
    address without its brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class AccessGate:
    """ASGI middleware: Host check, viewer recognition, 401 for nobody (see the module)."""

    def __init__(self, app: ASGIApp, access: Access, engine: Engine) -> None:
        self.app = app
        self.access = access
        self.engine = engine
        self.passes = URLSafeTimedSerializer(access.secret, salt="stacklens-viewer-pass")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # none served: no way around the gate either
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = host_name(headers.get("host", ""))
        if host not in self.access.hosts:
            await _answer(send, 400, f"this server does not answer to the host name {host!r} "
                          "(STACKLENS_HTTP_ALLOWED_HOSTS)")  # fmt: skip
            return
        try:
            viewer = await self._viewer(scope, headers)
        except PermissionError as refusal:
            await _answer(send, 401, str(refusal), {"www-authenticate": "Bearer"})
            return
        path: str = scope["path"]
        if viewer is None and not (path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)):
            await self._nobody(scope, send)
            return
        scope.setdefault("state", {})["viewer"] = viewer
        kept = [(k, v) for k, v in scope["headers"] if k != _PASS]
        if viewer is not None and not path.startswith("/api/"):  # a dashboard request
            kept.append((_PASS, self.passes.dumps([viewer.user, viewer.admin, viewer.how])
                         .encode()))  # fmt: skip
        scope["headers"] = kept
        await self.app(scope, receive, send)

    async def _viewer(self, scope: Scope, headers: Headers) -> Viewer | None:
        """The request's viewer (None: nobody); PermissionError for a bad credential."""
        viewer_pass = headers.get(VIEWER_PASS_HEADER)
        if viewer_pass is not None:
            try:
                user, admin, how = self.passes.loads(viewer_pass, max_age=PASS_S)
            except BadSignature:
                raise PermissionError("invalid or expired viewer pass") from None
            return Viewer(user, admin, how)
        token = bearer_token(headers.get("authorization"))
        if token is not None and token.startswith(tokens.PREFIX):
            user = await to_thread.run_sync(tokens.user_of, self.engine, token)
            if user is None:
                raise PermissionError("unknown, expired or revoked API token")
            return self.access.viewer(user, "token")
        mode = self.access.mode
        if mode == "proxy":
            named = headers.get(self.access.proxy_header)
            client = scope.get("client")
            if named and client and self.access.trusted_proxy(client[0]):
                return self.access.viewer(named, "proxy")
        elif mode == "oidc":
            session = scope.get("session") or {}
            if session.get("user"):
                return self.access.viewer(session["user"], "oidc", tuple(session["groups"]))
        else:
            return Viewer("", True, "none")
        return None

    async def _nobody(self, scope: Scope, send: Send) -> None:
        """The answer to a request without a viewer: the OIDC login for a page, else 401."""
        path: str = scope["path"]
        page = not path.startswith(("/api/", "/_dash-", "/metrics", "/openapi.json"))
        if self.access.mode == "oidc" and page and scope["method"] == "GET":
            await _answer(send, 302, "sign in first", {"location": "/auth/login"})
            return
        how = {"none": "", "proxy": " or through the sign-in proxy",
               "oidc": " or sign in at /auth/login"}[self.access.mode]  # fmt: skip
        await _answer(send, 401, f"not signed in: send Authorization: Bearer <API token>{how}",
                      {"www-authenticate": "Bearer"})  # fmt: skip


async def _answer(
    send: Send, status: int, detail: str, extra: dict[str, str] | None = None
) -> None:
    """A JSON `{"detail": ...}` answer with `extra` headers."""
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
