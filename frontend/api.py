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

import hashlib
from dataclasses import asdict, dataclass
from typing import TypeVar
from urllib.parse import quote

import flask
import httpx
import pydantic
import pydantic_core

from stacklens.api_models import (
    Comparison,
    Deployment,
    FabricEvents,
    FabricSeries,
    FabricState,
    IncidentDetails,
    IncidentList,
    JobLinks,
    JobList,
    JobPlacement,
    LinkAttribution,
    LinkAttributionSeries,
    LinkGroupPage,
    LinkPage,
    NodeJobs,
    Overview,
    RunHistory,
    Series,
    SlowRanks,
    Topology,
)
from stacklens.constants import VIEWER_PASS_HEADER

_FLASK_EXTENSION = "stacklens_api"
_T = TypeVar("_T")


#: How long the dashboard waits for an answer of the API: a comparison or a job's first
#: page of cards under load takes several seconds (5 s timed out on a busy 2-core node), and
#: a page refreshes only after its last answer, so a slow answer never piles requests up.
ANSWER_TIMEOUT_S = 30.0


class ApiError(Exception):
    """The server could not be reached or did not answer as agreed; str() is user-facing;
    `status` is the HTTP status of an error answer (None: no answer), `detail` what the
    server said was wrong (the message when it said nothing)."""

    def __init__(self, message: str, status: int | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail or message


@dataclass(frozen=True)
class JobListQuery:
    """Which page of which jobs to list (GET /api/jobs): `q` searches the job id, user and
    command; `status`, `user` and the start time [started_from, started_to) (ns) narrow;
    `limit` jobs from `cursor` (a page's next_cursor). None = the server's default."""

    q: str | None = None
    status: str | None = None
    user: str | None = None
    started_from: int | None = None
    started_to: int | None = None
    limit: int | None = None
    cursor: str | None = None


@dataclass(frozen=True)
class WindowQuery:
    """What a job view reads: one run (None: the whole job) and a window, each bound as
    the API reads it (RFC 3339 or epoch seconds; None: open)."""

    run: int | None = None
    start: str | None = None
    end: str | None = None

    def query(self) -> dict[str, object]:
        """The query parameters of this window (absent ones left out by `_query`)."""
        return {"run": self.run, "from": self.start, "to": self.end}


@dataclass(frozen=True)
class IncidentQuery:
    """Which incidents to list (GET /api/incidents): window bounds as the API reads them,
    severity, kind, job (and its owner, needed when the id names jobs of several owners),
    link, open; `limit` from `cursor`. None = the server's default."""

    start: str | None = None
    end: str | None = None
    severity: str | None = None
    kind: str | None = None
    job: str | None = None
    owner: str | None = None
    link: int | None = None
    open: bool | None = None
    limit: int | None = None
    cursor: str | None = None

    def query(self) -> dict[str, object]:
        """The query parameters (absent ones left out by `_query`)."""
        params: dict[str, object] = {"from": self.start, "to": self.end}
        params |= {k: v for k, v in asdict(self).items() if k not in ("start", "end")}
        if self.open is not None:
            params["open"] = "true" if self.open else "false"
        return params


@dataclass(frozen=True)
class RunRef:
    """A run as the compare API names it: job id, run ordinal (None: the job's newest MPI
    run), owner (needed only when the id names jobs of several owners), and the window of
    it compared (`start`, `end`: the API's instants as typed, None: the run's start, end)."""

    job: str
    run: int | None = None
    owner: str | None = None
    start: str | None = None
    end: str | None = None

    def query(self, side: str) -> dict[str, object]:
        """The query parameters naming this run as side `side` (a or b) of a comparison."""
        return {side: self.job, f"{side}_run": self.run, f"{side}_owner": self.owner,
                f"{side}_from": self.start, f"{side}_to": self.end}  # fmt: skip


def _query(params: dict[str, object]) -> str:
    """`?k=v&...` of the parameters that are not None (values quoted), or ""."""
    given = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None)
    return f"?{given}" if given else ""


def _fabric_window(window: WindowQuery | None) -> dict[str, object]:
    """The from/to parameters of a fabric request (the fabric has no runs)."""
    return {} if window is None else {"from": window.start, "to": window.end}


def _job_path(job: str, section: str, params: dict[str, object]) -> str:
    """The API path of a section of a job (its id quoted: ids may hold slashes) with the
    query `params`. Every job method of the client takes the job's `owner` too (the job
    list's `user`): needed when the id names jobs of several owners (the server answers
    409 without it)."""
    return f"/api/jobs/{quote(job, safe='')}/{section}{_query(params)}"


class StacklensApi:
    """Client of one stacklens server, e.g. `StacklensApi("http://127.0.0.1:7450")`."""

    def __init__(self, base_url: str, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        """Connect lazily to `base_url` (the server root; endpoints live under /api); an
        answer not begun within `timeout_s` is an error."""
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def jobs(self, query: JobListQuery = JobListQuery()) -> JobList:
        """A page of the jobs `query` selects, newest first, with the number of them."""
        return self._get(f"/api/jobs{_query(asdict(query))}", JobList, "job list")

    def overview(
        self,
        job: str | None,
        window: WindowQuery | None = None,
        owner: str | None = None,
        listing: JobListQuery = JobListQuery(limit=1),
    ) -> Overview:
        """In one request: the page of the job list `listing` selects (default: one job)
        and every card's data of `job` (absent: the list's first job) over `window`
        (default: the whole job) (`shown` null: the job is unknown)."""
        query = {**asdict(listing), "job": job, **(window or WindowQuery()).query(), "owner": owner}
        return self._get(f"/api/overview{_query(query)}", Overview, "overview")

    def profile(
        self, job: str, window: WindowQuery, step_s: float | None = None, owner: str | None = None
    ) -> SlowRanks:
        """Where each rank's time went per step of `window`, the outliers and the
        collective imbalance of `job`."""
        query = {**window.query(), "step": step_s, "owner": owner}
        return self._get(_job_path(job, "profile", query), SlowRanks, "profile")

    def series(
        self,
        job: str,
        by: str,
        window: WindowQuery,
        step_s: float | None = None,
        owner: str | None = None,
    ) -> Series:
        """Values per step of `job` over `window`, keyed `by` (category, op, rank, file,
        peer)."""
        query = {"by": by, **window.query(), "step": step_s, "owner": owner}
        return self._get(_job_path(job, "series", query), Series, by)

    def placement(self, job: str, window: WindowQuery, owner: str | None = None) -> JobPlacement:
        """Where `job` runs on the fabric: its hosts (with their ranks, HCA ports and how
        each was matched) and the links they sit on or can cross, with their load over
        `window`."""
        query = {**window.query(), "owner": owner}
        return self._get(_job_path(job, "placement", query), JobPlacement, "placement")

    def link_attribution_series(self, link: int, start: str, end: str, step_s: float
                                ) -> LinkAttributionSeries:  # fmt: skip
        """A link's attribution per step of `step_s` seconds over the window [start, end)."""
        query = _query({"from": start, "to": end, "step": step_s})
        path = f"/api/fabric/links/{int(link)}/attribution/series{query}"
        return self._get(path, LinkAttributionSeries, "link attribution series")

    def job_links(self, job: str, window: WindowQuery, limit: int | None = None,
                  cursor: str | None = None, owner: str | None = None) -> JobLinks:  # fmt: skip
        """The link directions `job` crossed over `window`, its bytes on each by category (one
        page: `limit` rows from `cursor`)."""
        query = {**window.query(), "limit": limit, "cursor": cursor, "owner": owner}
        return self._get(_job_path(job, "links", query), JobLinks, "job links")

    def fabric_topology(self) -> Topology:
        """Every fabric node and link the sampler discovered (gone and down ones included)."""
        return self._get("/api/fabric/topology", Topology, "fabric topology")

    def fabric_topology_since(self, etag: str | None) -> tuple[Topology, str] | None:
        """`fabric_topology()` and its ETag (it changes only at a re-discovery), or None
        if its ETag is still `etag` (the server then sends no body)."""
        path = "/api/fabric/topology"
        response = self._send(path, {"If-None-Match": etag} if etag else {})
        if response.status_code == 304:
            return None
        topology = self._parse(response, path, Topology, "fabric topology")
        return topology, str(response.headers.get("etag", ""))

    def fabric_state(self, window: WindowQuery | None = None) -> FabricState:
        """Every link's load, errors and flags, the fabric's counts and freshness: live (no
        window; one answer per sweep, shared by every viewer) or over `window`'s from/to."""
        query = _query(_fabric_window(window))
        return self._get(f"/api/fabric/state{query}", FabricState, "fabric state")

    def fabric_links(
        self,
        sort: str = "utilisation",
        limit: int | None = None,
        window: WindowQuery | None = None,
        cursor: str | None = None,
    ) -> LinkPage:
        """A page of the fabric's links by load or errors (`sort` "utilisation" or
        "errors"), live or over `window`'s from/to (without the per-end raw samples, which
        the pages do not show)."""
        query = {"sort": sort, "samples": "false", "limit": limit, **_fabric_window(window),
                 "cursor": cursor}  # fmt: skip
        return self._get(f"/api/fabric/links{_query(query)}", LinkPage, "fabric links")

    def fabric_events(
        self,
        limit: int = 20,
        window: WindowQuery | None = None,
        kind: str | None = None,
        link: int | None = None,
        cursor: str | None = None,
    ) -> FabricEvents:
        """A page of the fabric events overlapping `window`'s from/to (default: the last 15
        minutes), newest first; of one `kind` or `link` if given."""
        query = {"limit": limit, **_fabric_window(window), "kind": kind, "link": link,
                 "cursor": cursor}  # fmt: skip
        return self._get(f"/api/fabric/events{_query(query)}", FabricEvents, "events")

    def fabric_series(
        self,
        window: WindowQuery | None = None,
        link: int | None = None,
        guid: str | None = None,
        port: int | None = None,
        step_s: float | None = None,
    ) -> FabricSeries:
        """Values per step of a link (`link`), a port (`guid`, `port`) or a node (`guid`)
        over `window`'s from/to (default: the last 15 minutes)."""
        query = {"link": link, "guid": guid, "port": port, **_fabric_window(window),
                 "step": step_s}  # fmt: skip
        return self._get(f"/api/fabric/series{_query(query)}", FabricSeries, "fabric series")

    def fabric_groups(
        self,
        window: WindowQuery | None = None,
        kind: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> LinkGroupPage:
        """A page of the groups of parallel links (same two switches, a leaf's uplinks, a
        host's rails) over `window`'s from/to (default: the last 15 minutes), highest skew
        first; of one `kind` if given."""
        query = {**_fabric_window(window), "kind": kind, "limit": limit, "cursor": cursor}
        return self._get(f"/api/fabric/groups{_query(query)}", LinkGroupPage, "link groups")

    def incidents(self, query: IncidentQuery = IncidentQuery()) -> IncidentList:
        """A page of the incidents `query` selects, newest first, with the number of them."""
        return self._get(f"/api/incidents{_query(query.query())}", IncidentList, "incidents")

    def incident(self, incident_id: int) -> IncidentDetails:
        """One incident with its links, jobs and evidence."""
        return self._get(f"/api/incidents/{int(incident_id)}", IncidentDetails, "incident")

    def compare(self, b: RunRef, a: RunRef | None = None, last: int | None = None) -> Comparison:
        """Run b against run a, or against the median of the `last` runs of b's program
        before it when `a` is None: the parts of the elapsed time that differ, ranked."""
        query: dict[str, object] = {**b.query("b"), **({} if a is None else a.query("a"))}
        query["last"] = last
        return self._get(f"/api/compare{_query(query)}", Comparison, "comparison")

    def run_history(self, run: RunRef, last: int | None = None) -> RunHistory:
        """The run and the `last` runs of the same program before it, newest first."""
        query: dict[str, object] = {"job": run.job, "run": run.run, "owner": run.owner}
        query["last"] = last
        return self._get(f"/api/compare/history{_query(query)}", RunHistory, "run history")

    def link_attribution(self, link: int, window: WindowQuery | None = None) -> LinkAttribution:
        """A link's measured bytes each way over `window`'s from/to, split into the jobs
        (and categories) whose traffic is routed over it, and `other`."""
        query = _query(_fabric_window(window))
        path = f"/api/fabric/links/{int(link)}/attribution{query}"
        return self._get(path, LinkAttribution, "link attribution")

    def node_jobs(self, guid: str, window: WindowQuery | None = None) -> NodeJobs:
        """The jobs on node `guid` over `window`'s from/to: their bytes over its links each
        way and, for an HCA, their hosts on it."""
        query = _query(_fabric_window(window))
        return self._get(f"/api/fabric/nodes/{quote(guid, safe='')}/jobs{query}", NodeJobs,
                         "node jobs")  # fmt: skip

    def deployment(self) -> Deployment:
        """The deployment's ingest and auth modes, the users sending lately and the warning
        of trusted ingest with several of them (the footer of every page)."""
        return self._get("/api/deployment", Deployment, "deployment modes")

    def _get(self, path: str, model: type[_T], what: str) -> _T:
        """GET `path` and parse its JSON body into `model` (a response model or a list of
        them); `what` names the data in error messages."""
        return self._parse(self._send(path), path, model, what)

    def _send(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        """GET `path` (with these extra `headers`) as the viewer of the dashboard request;
        an error answer or none at all raised as ApiError."""
        try:
            response = self._http.get(path, headers={**_viewer_headers(), **(headers or {})})
        except httpx.ReadTimeout as exc:  # reached, but busy: not "unreachable"
            raise ApiError(f"stacklens server did not answer GET {path} within "
                           f"{self.timeout_s:g} s (busy?)") from exc  # fmt: skip
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            url = f"{self.base_url}{path}"
            raise ApiError(f"stacklens server unreachable: {url}: {reason}") from exc
        if response.is_error:
            detail = _detail(response)
            raise ApiError(
                f"stacklens server error: GET {path} returned HTTP {response.status_code}: "
                f"{detail}",
                response.status_code,
                detail,
            )
        return response

    def _parse(self, response: httpx.Response, path: str, model: type[_T], what: str) -> _T:
        """The JSON body of `response` (to GET `path`) parsed into `model`."""
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
