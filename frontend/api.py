# frontend/api.py — HTTP client (httpx) of the stacklens server API, the frontend's only source.
"""Typed, synchronous client for the server's `/api` endpoints used by the Dash pages.

Every answer is parsed into the response models the server's routes declare
(`stacklens.api_models`, the one API contract), so a route and this client cannot disagree
about a field. Every failure (server unreachable, HTTP error, a body that does not match
the contract) is raised as `ApiError` with a message meant to be shown to the user as-is.
Inside a dashboard request, every call carries that request's viewer pass, so the API
answers with what this viewer may read (server/access/gate.py), never more.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import TypeVar
from urllib.parse import quote

import flask
import httpx
import pydantic
import pydantic_core

from stacklens.api_models import (
    FabricEvent,
    FabricState,
    JobPlacement,
    JobSummary,
    LinkLoad,
    Overview,
    Series,
    SlowRanks,
    Topology,
)
from stacklens.constants import VIEWER_PASS_HEADER

_FLASK_EXTENSION = "stacklens_api"
_T = TypeVar("_T")


class ApiError(Exception):
    """The server could not be reached or did not answer as agreed; str() is user-facing."""


class StacklensApi:
    """Client of one stacklens server, e.g. `StacklensApi("http://127.0.0.1:7450")`."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        """Connect lazily to `base_url` (the server root; endpoints live under /api)."""
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def jobs(self) -> list[JobSummary]:
        """All known jobs, newest first."""
        return self._get("/api/jobs", list[JobSummary], "job list")

    def overview(
        self, job: str | None = None, limit: int | None = None, window: Window | None = None
    ) -> Overview:
        """What the Jobs page shows in one request: the newest `limit` jobs (server default
        20; and `job`, if older), the number of jobs, and the details of `job` (default, or
        if gone: the newest job), over `window` (default: the whole job)."""
        query = {"job": job, "limit": limit, **(window or Window()).query()}
        return self._get(f"/api/overview{_query(query)}", Overview, "overview")

    def profile(self, job: str, window: Window, step_s: float | None = None) -> SlowRanks:
        """Where each rank's time went per step of `window`, the outliers and the
        collective imbalance of `job`."""
        query = {**window.query(), "step": step_s}
        path = f"/api/jobs/{quote(job, safe='')}/profile{_query(query)}"
        return self._get(path, SlowRanks, "profile")

    def series(self, job: str, by: str, window: Window, step_s: float | None = None) -> Series:
        """Values per step of `job` over `window`, keyed `by` (category, op, rank, file,
        peer)."""
        query = {"by": by, **window.query(), "step": step_s}
        return self._get(f"/api/jobs/{quote(job, safe='')}/series{_query(query)}", Series, by)

    def placement(self, job: str, window: Window) -> JobPlacement:
        """Where `job` runs on the fabric: its hosts (with their ranks, HCA ports and how
        each was matched) and the links they sit on or can cross, with their load over
        `window`."""
        path = f"/api/jobs/{quote(job, safe='')}/placement{_query(window.query())}"
        return self._get(path, JobPlacement, "placement")

    def fabric_topology(self) -> Topology:
        """Every fabric node and link the sampler discovered (gone and down ones included)."""
        return self._get("/api/fabric/topology", Topology, "fabric topology")

    def fabric_state(self) -> FabricState:
        """Every link's load, errors and flags in the newest sweep, and the fabric's counts
        (one answer per sweep, shared by every viewer)."""
        return self._get("/api/fabric/state", FabricState, "fabric state")

    def fabric_links(self, sort: str = "utilisation", limit: int | None = None) -> list[LinkLoad]:
        """Load and errors of the fabric's links; `sort` "utilisation" or "errors" (without
        the per-end raw samples, which the pages do not show)."""
        query = f"?sort={quote(sort)}&samples=false"
        query += f"&limit={int(limit)}" if limit is not None else ""
        return self._get(f"/api/fabric/links{query}", list[LinkLoad], "fabric links")

    def fabric_events(self, limit: int = 20) -> list[FabricEvent]:
        """The newest `limit` fabric events, newest first."""
        return self._get(f"/api/fabric/events?limit={int(limit)}", list[FabricEvent], "events")

    def _get(self, path: str, model: type[_T], what: str) -> _T:
        """GET `path` and parse its JSON body into `model` (a response model or a list of
        them); `what` names the data in error messages."""
        try:
            response = self._http.get(path, headers=_viewer_headers())
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            url = f"{self.base_url}{path}"
            raise ApiError(f"stacklens server unreachable: {url}: {reason}") from exc
        if response.is_error:
            raise ApiError(
                f"stacklens server error: GET {path} returned HTTP {response.status_code}: "
                f"{_detail(response)}"
            )
        try:
            return _adapter(model).validate_json(response.content)
        except pydantic.ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                raise ApiError(f"stacklens server sent invalid JSON for GET {path}") from exc
            raise ApiError(f"stacklens server sent an unexpected {what}: {exc}") from exc


def _viewer_headers() -> dict[str, str]:
    """The viewer pass of the dashboard request being answered (none outside one)."""
    if not flask.has_request_context():
        return {}
    viewer_pass = flask.request.headers.get(VIEWER_PASS_HEADER)
    return {} if viewer_pass is None else {VIEWER_PASS_HEADER: viewer_pass}


@dataclasses.dataclass(frozen=True)
class Window:
    """What a job view reads: one run (None: the whole job) and a window, each bound as
    the API reads it (RFC 3339 or epoch seconds; None: open)."""

    run: int | None = None
    start: str | None = None
    end: str | None = None

    def query(self) -> dict[str, object]:
        """The query parameters of this window (absent ones left out by `_query`)."""
        return {"run": self.run, "from": self.start, "to": self.end}


def _query(params: dict[str, object]) -> str:
    """`?k=v&...` of the parameters that are not None (values quoted), or ""."""
    given = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None)
    return f"?{given}" if given else ""


def attach_client(server: flask.Flask, client: StacklensApi) -> None:
    """Make `client` the API client of the Dash app whose Flask server is `server`."""
    server.extensions[_FLASK_EXTENSION] = client


def current_client() -> StacklensApi:
    """The API client of the Dash app handling the current request (for callbacks)."""
    return flask.current_app.extensions[_FLASK_EXTENSION]


def digest(value: object) -> str:
    """A JS-safe hex digest of API data (models, lists, tuples of them): equal data, equal
    digest; the pages compare it to skip redrawing what is already on screen."""
    return hashlib.blake2b(pydantic_core.to_json(value), digest_size=8).hexdigest()


_ADAPTERS: dict[object, pydantic.TypeAdapter] = {}


def _adapter(model: type[_T]) -> pydantic.TypeAdapter[_T]:
    """One TypeAdapter per response type (building one costs far more than using it)."""
    if model not in _ADAPTERS:
        _ADAPTERS[model] = pydantic.TypeAdapter(model)
    return _ADAPTERS[model]


def _detail(response: httpx.Response) -> str:
    """FastAPI's {"detail": ...} if present, else the start of the body."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail is not None else response.text[:200] or response.reason_phrase
