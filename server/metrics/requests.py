"""How long the web server takes to answer, by kind of request (the API, the dashboard's
callbacks, its pages and assets, /metrics), for /metrics and `stacklens status`."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stacklens.timings import Timings

#: The kinds of request, by path prefix (the first that matches; else `page`).
KINDS = (("/api/", "api"), ("/_dash-update-component", "dashboard_callback"),
         ("/_dash-", "dashboard_asset"), ("/assets/", "dashboard_asset"),
         ("/metrics", "metrics"))  # fmt: skip


def request_kind(path: str) -> str:
    """The kind of a request by its path: api, dashboard_callback, dashboard_asset,
    metrics, or page (a dashboard page, docs)."""
    return next((kind for prefix, kind in KINDS if path.startswith(prefix)), "page")


class RequestTimings(dict[str, Timings]):
    """Timings of the answers by kind (a kind appears with its first request)."""

    def observe(self, kind: str, seconds: float) -> None:
        """Count one answer of this kind that took `seconds`."""
        self.setdefault(kind, Timings()).observe(seconds)


class TimedRequests:
    """ASGI middleware: times every HTTP request from its arrival to the end of its answer
    (the last body part sent, a stream included) into `timings`."""

    def __init__(self, app: ASGIApp, timings: RequestTimings) -> None:
        self.app, self.timings = app, timings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        done = False

        async def timed_send(message: Message) -> None:
            nonlocal done
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done = True
                self.timings.observe(request_kind(scope["path"]), time.monotonic() - started)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            if not done:  # failed or the client left: counted as far as it went
                self.timings.observe(request_kind(scope["path"]), time.monotonic() - started)
