"""HTTP routes of the fabric domain: topology, state, link load and errors, series, events.

Every route takes a window `from`/`to` (server.query_params: RFC 3339 or epoch seconds,
half-open; a sample counts when its sweep end lies in [from, to)). Without one, topology,
state and links answer live: from the app's `FabricSnapshots`, computed once per discovery
/ sweep for every viewer, with ETags (a client sending `If-None-Match` with the current one
gets 304 and no body). With one (`to` absent: now; `from` absent:
15 minutes before `to`), they answer for exactly that window. Series and events always
read a window, by default the last 15 minutes.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from server import export, paging
from server.compression import negotiate
from server.deps import SessionDep
from server.errors import error_responses
from server.export import FILE_RESPONSES, FormatParam
from server.fabric import groups as fab_groups
from server.fabric import history, repository
from server.fabric import series as fab_series
from server.fabric.snapshot import Encoded, FabricSnapshots, topology_answer, window_state
from server.jobs import series
from server.paging import CursorParam, PageSizes
from server.query_params import Window, WindowDep, id_query, step_query
from server.traffic import service as traffic_service
from stacklens.api_models import (
    FabricEvents,
    FabricSeries,
    FabricState,
    LinkGroup,
    LinkGroupPage,
    LinkPage,
    Topology,
)

router = APIRouter(prefix="/api/fabric", tags=["fabric"])

#: The window of series and events, and of the other routes given only `to`.
DEFAULT_SPAN_NS = 15 * 60 * 10**9
#: Page sizes of the links list (by default what a page shows; at most the simulator's
#: largest fabric whole) and of the events list.
LINK_LIMITS = PageSizes(default=500, maximum=20_000)
EVENT_LIMITS = PageSizes(default=100, maximum=10_000)
#: Page sizes of the groups of parallel links.
GROUP_LIMITS = PageSizes(default=200, maximum=5_000)

_WINDOWED = error_responses(**{"422": "unknown query parameter, or a bad window"})
_PAGED = error_responses(404, **{"422": "unknown query parameter, or a bad window"})
#: A node GUID as the API writes it.
_GUID = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


def snapshots(request: Request) -> FabricSnapshots:
    """The app's shared fabric answers (made with the app)."""
    shared: FabricSnapshots = request.app.state.fabric_snapshots
    return shared


def _answer(request: Request, encoded: Encoded) -> Response:
    """200 with the encoded body and its ETag, or 304 if the client has it already; the body
    in the coding the request accepts for its size (server/compression.py), compressed once
    for every viewer (the app's compression passes an encoded answer through)."""
    headers = {"ETag": encoded.etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    if request.headers.get("if-none-match") == encoded.etag:
        return Response(status_code=304, headers=headers)
    coding = negotiate(request.headers.get("accept-encoding")).for_size(len(encoded.body))
    if coding != "identity":
        headers["Content-Encoding"] = coding
    return Response(encoded.coded(coding), media_type="application/json", headers=headers)


async def _shared(request: Request, what: str) -> Response:
    """The shared answer from memory while recently checked (no thread, no database), else
    checked and refreshed in a worker thread."""
    shared = snapshots(request)
    encoded = shared.recent(what)
    if encoded is None:
        encoded = await run_in_threadpool(shared.checked, request.app.state.engine, what)
    return _answer(request, encoded)


def _live(window: Window) -> bool:
    return window.from_ns is None and window.to_ns is None


def span(window: Window) -> tuple[int, int]:
    """The bounds of a fabric window: `to` absent = now, `from` absent = 15 minutes
    before `to` (not before the epoch); 422 for a window with nothing in it (`to=0`
    without `from`: nothing is before the epoch)."""
    hi = time.time_ns() if window.to_ns is None else window.to_ns
    lo = max(hi - DEFAULT_SPAN_NS, 0) if window.from_ns is None else window.from_ns
    if hi <= lo:
        raise HTTPException(status_code=422, detail="the window is empty or inverted: to <= from")
    return lo, hi


def _with_session(request: Request, read: Any) -> Any:
    """`read(session)` in a session of the app's engine (for the async routes' threads)."""
    with Session(request.app.state.engine) as session:
        return read(session)


@router.get(
    "/topology",
    response_model=Topology,
    responses={304: {"description": "unchanged"}, **_WINDOWED},
)
async def fabric_topology(request: Request, window: WindowDep) -> Response:
    """Every node and link of the current fabric the sampler has discovered, gone and down
    ones included (switches first, then by name; links by id). ETag: changes only when a
    discovery is stored. Over a window: the nodes and links first seen before its end,
    gone or down as they were at its end (no ETag)."""
    if _live(window):
        return await _shared(request, "topology")
    lo, hi = span(window)

    def read(session: Session) -> dict[str, Any]:
        shared = snapshots(request)
        nodes, links = repository.topology_at(
            session, shared.nodes(session), shared.current(session)[0], hi
        )
        return topology_answer(nodes, links)

    return export.plain_json(await run_in_threadpool(_with_session, request, read))


@router.get(
    "/state",
    response_model=FabricState,
    responses={304: {"description": "unchanged"}, **_WINDOWED},
)
async def fabric_state(request: Request, window: WindowDep) -> Response:
    """Every link's utilisation, busier-direction rate, errors and flags, the fabric's
    counts and how fresh the data is. Live: in the newest sweep, computed once per sweep
    for every viewer (ETag: changes with every sweep and when the data turns stale). Over a
    window (a playback frame): the links' loads over it, as /links over a window."""
    if _live(window):
        return await _shared(request, "state")
    lo, hi = span(window)

    def read(session: Session) -> dict[str, Any]:
        shared = snapshots(request)
        _, fresh, etag = shared.current(session)
        links, loads = shared.window_loads(session, lo, hi)
        return window_state(links, shared.nodes(session), loads, etag, fresh, (lo, hi))

    return export.plain_json(await run_in_threadpool(_with_session, request, read))


#: What a cursor of each order of the links list holds: its sort key, floats as their repr.
_LINK_CURSOR_TYPES: dict[str, tuple[type, ...]] = {
    "utilisation": (int, str, int, int),
    "errors": (int, int, str, int),
}


def _link_key(sort: str, cursor: str | None) -> tuple[Any, ...] | None:
    """The sort key a links cursor holds (None: none); 404 if it is not one of ours."""
    parts = paging.decode(f"{sort} link", cursor, _LINK_CURSOR_TYPES[sort])
    if parts is None:
        return None
    try:
        return tuple(float(p) if isinstance(p, str) else p for p in parts)
    except ValueError:
        raise HTTPException(
            status_code=404, detail="no such page: not a cursor of this list"
        ) from None


def _link_cursor(sort: str, key: tuple[Any, ...]) -> str:
    return paging.encode(f"{sort} link", tuple(repr(p) if isinstance(p, float) else p
                                                 for p in key))  # fmt: skip


def _live_start(sort: str, cursor: str | None) -> int:
    """The position a live links cursor holds (0: none); 404 if it is not one of ours."""
    parts = paging.decode(f"{sort} live link", cursor, (int,))
    return 0 if parts is None else max(int(parts[0]), 0)


def _live_cursor(sort: str, start: int) -> str:
    return paging.encode(f"{sort} live link", (start,))


@router.get("/links", response_model=LinkPage, responses=_PAGED)
def fabric_links(
    session: SessionDep,
    request: Request,
    window: WindowDep,
    sort: Annotated[
        Literal["utilisation", "errors"],
        Query(description="utilisation: busiest first; errors: most error deltas first"),
    ] = "utilisation",
    limit: Annotated[
        int, Query(ge=1, le=LINK_LIMITS.maximum, description=LINK_LIMITS.help("links"))
    ] = LINK_LIMITS.default,
    cursor: CursorParam = None,
    samples: Annotated[
        bool,
        Query(description="live: include each end's raw sample (a_sample, b_sample)"),
    ] = True,
) -> Response:
    """A page of the links by load or errors; unknown utilisation last, ties by link id.
    Live (no window): from the latest sample of each of its two ports: bytes and bytes/s
    and packets/s in each direction, utilisation of the capacity, error-counter deltas of
    the last sweep (null = unknown or saturated), PortXmitWait; a down link, or a port that
    stopped answering, has no load (null); the order is computed once per sweep, and each
    page once per sweep for every viewer (ETag: changes with every sweep). A live page is
    a position in the newest order: the next page holds the next links of the newest
    sweep's order, however it changed. Over a window: the same summed over the samples of
    its ends whose sweep ended in it (rates: the bytes over the sampled time), without the
    per-end samples. `samples=false` leaves out the per-end samples."""
    shared = snapshots(request)
    if _live(window):
        start = _live_start(sort, cursor)

        def build(session: Session) -> dict[str, Any]:
            loads, total, more = shared.link_page(session, sort, start, limit)
            if not samples:
                loads = [{k: v for k, v in x.items() if k not in ("a_sample", "b_sample")}
                         for x in loads]  # fmt: skip
            next_cursor = _live_cursor(sort, start + len(loads)) if more else None
            return _links_answer(loads, total, limit, next_cursor, sort, None, None,
                                 shared.current(session)[1])  # fmt: skip

        return _answer(request, shared.per_sweep(session, ("links", sort, start, limit, samples),
                                                 build))  # fmt: skip
    after = _link_key(sort, cursor)
    lo, hi = span(window)
    fresh = shared.current(session)[1]
    links, loads = shared.window_loads(session, lo, hi)
    ordered = sorted(loads, key=lambda x: repository.rank_key(x, sort))
    if after is not None:
        ordered = [x for x in ordered if repository.rank_key(x, sort) > after]
    total, more, loads = len(links), len(ordered) > limit, ordered[:limit]
    next_cursor = _link_cursor(sort, repository.rank_key(loads[-1], sort)) if more else None
    return export.plain_json(_links_answer(loads, total, limit, next_cursor, sort, lo, hi, fresh))


def _links_answer(loads: list[dict[str, Any]], total: int, limit: int, next_cursor: str | None,
                  sort: str, lo: int | None, hi: int | None, fresh: dict[str, Any]
                  ) -> dict[str, Any]:  # fmt: skip
    """A LinkPage (plain data) of these links' loads."""
    return {
        "links": loads, "page": {"total": total, "limit": limit, "next_cursor": next_cursor},
        "sort": sort, "from_ns": lo, "to_ns": hi, "freshness": fresh,
    }  # fmt: skip


@router.get("/events", response_model=FabricEvents, responses=_PAGED)
def fabric_events(
    session: SessionDep,
    window: WindowDep,
    kind: Annotated[
        Literal["link_down", "node_gone", "error_burst", "link_up", "node_new"] | None,
        Query(description="only events of this kind"),
    ] = None,
    link: Annotated[
        int | None,
        id_query("only the events of this link (by id): its downs and ups, and its ends' "
                 "error bursts"),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=EVENT_LIMITS.maximum, description=EVENT_LIMITS.help("events"))
    ] = EVENT_LIMITS.default,
    cursor: CursorParam = None,
) -> FabricEvents:  # fmt: skip
    """A page of the fabric events overlapping the window (default: the last 15 minutes),
    newest start first: each with its start and end (null while open; open ones overlap
    every window after their start). link_down lasts until the link is back, node_gone
    until the node is back, error_burst over consecutive sweeps with error deltas at a port
    (details: counts per counter, sweeps, last_ns); link_up and node_new (first seen) are
    points."""
    lo, hi = span(window)
    after = paging.decode("event", cursor, (int, int))
    rows, total = history.events(session, lo, hi, kind, link, limit,
                                 None if after is None else (after[0], after[1]))  # fmt: skip
    kept, page = paging.page("event", rows, limit, total, lambda r: (r["start_ns"], r["id"]))
    return FabricEvents.model_validate(
        {"events": kept, "page": page.model_dump(), "from_ns": lo, "to_ns": hi}
    )


@router.get("/series", response_model=FabricSeries, responses={
    **error_responses(404, **{"422": "unknown query parameter, a bad window or step, or not "
                              "exactly one subject"}), **FILE_RESPONSES})  # fmt: skip
def fabric_series(
    session: SessionDep,
    request: Request,
    window: WindowDep,
    link: Annotated[int | None, id_query("a link, by id")] = None,
    guid: Annotated[
        str | None,
        Query(max_length=18, description="a node GUID (0x...): the node, its cabled ports "
              "summed; with `port`, that port"),
    ] = None,
    port: Annotated[int | None, Query(ge=0, le=255, description="a port number of `guid`")] = None,
    step: Annotated[
        float | None,
        step_query("seconds per step; default: chosen from the window (1, 2, 5, 10, 15, 30 s, "
                   "1, 2, 5, 10, 15, 30 min, 1, 2, 6, 24 h: the smallest that keeps it within "
                   f"{series.MAX_AUTO_STEPS} steps)"),
    ] = None,
    fmt: FormatParam = "json",
) -> Response:  # fmt: skip
    """Values per step of a link (`link`), a port (`guid` and `port`) or a node (`guid`:
    its cabled ports summed) over the window (default: the last 15 minutes; without
    `from`, the first step starts at a multiple of the step): samples, bytes and bytes/s
    each way, utilisation, PortXmitWait and its rate, each error counter's deltas; only
    steps with a sample are listed. Steps of whole minutes from a whole minute read the
    exact per-minute rollups, other steps the raw samples. Files: one row per step (t_ns,
    then the metrics)."""
    if (link is None) == (guid is None) or (port is not None and guid is None):
        raise HTTPException(
            status_code=422, detail="give exactly one of: link=<id>, guid=<node>, guid and port"
        )
    steps = _steps(window, step)
    answer: dict[str, Any] = {"link_id": None, "guid": None, "port": None}
    if link is not None:
        found = next((lk for lk in snapshots(request).current(session)[0] if lk["id"] == link),
                     None)  # fmt: skip
        if found is None:
            raise HTTPException(status_code=404, detail=f"no link {link} in the current fabric")
        times, columns = fab_series.link_series(session, found, steps)
        answer |= {"subject": "link", "link_id": link, "metrics": fab_series.LINK_METRICS,
                   "capacity_bytes_per_s": found["capacity_bytes_per_s"],
                   "name": f"{found['a']['name']}[{found['a']['port']}] - "
                           f"{found['b']['name']}[{found['b']['port']}]"}  # fmt: skip
    else:
        assert guid is not None
        stored = _guid(guid)
        answer["guid"] = repository.guid_text(stored)
        if port is not None:
            one = fab_series.port_of(session, stored, port)
            if one is None:
                raise HTTPException(status_code=404, detail=f"no port {port} of node {guid}")
            ports, name = [(one["id"], one["capacity"])], one["name"]
            answer |= {"subject": "port", "port": port}
        else:
            node = fab_series.node_ports(session, stored)
            if node is None:
                raise HTTPException(status_code=404, detail=f"no node {guid}")
            name, ports = node
            answer["subject"] = "node"
        times, columns = fab_series.ports_series(session, ports, steps)
        caps = [c for _, c in ports if c]
        answer |= {"name": name, "metrics": fab_series.PORT_METRICS,
                   "capacity_bytes_per_s": sum(caps) if caps else None}  # fmt: skip
    if fmt != "json":
        metrics = list(answer["metrics"])
        rows = [{"t_ns": t, **{m: columns[m][i] for m in metrics}} for i, t in enumerate(times)]
        return export.table(rows, ["t_ns", *metrics], fmt, f"fabric-{answer['subject']}-series")
    return export.plain_json({
        **answer, "metrics": list(answer["metrics"]), "from_ns": steps.from_ns,
        "to_ns": steps.to_ns, "step_ns": steps.step_ns, "t_ns": times, "columns": columns,
        "resolution": history.resolution(steps),
    })  # fmt: skip


def _guid(text: str) -> int:
    """A GUID text as the stored signed bigint; 422 if it is not one."""
    if not _GUID.match(text):
        raise HTTPException(status_code=422, detail=f"guid={text!r}: not 0x + 1..16 hex digits")
    value = int(text, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def _steps(window: Window, step_s: float | None) -> series.Steps:
    """The series' window cut into steps (chosen from the window unless given); without
    `from`, the first step starts at a multiple of the step at or before `to` - 15 min
    (whole minutes: the steps the rollups serve). 422 for over MAX_STEPS steps."""
    lo, hi = span(window)
    step_ns = series.auto_step_ns(hi - lo) if step_s is None else round(step_s * 10**9)
    if window.from_ns is None:
        lo = lo // step_ns * step_ns
    if -(-(hi - lo) // step_ns) > series.MAX_STEPS:
        raise HTTPException(
            status_code=422,
            detail=f"step={step_s} s cuts the window into more than {series.MAX_STEPS} steps",
        )
    return series.Steps(lo, hi, step_ns)


_GROUP_STEP_HELP = (
    "seconds per step of the skew series; default: chosen from the window "
    f"(the smallest that keeps it within {series.MAX_AUTO_STEPS} steps)"
)


#: Pages of one list of groups kept encoded (by size and cursor).
MAX_GROUP_PAGES = 16


@dataclass
class _GroupList:
    """The groups of the current fabric over a window (LinkGroup's plain data, `jobs` null,
    highest skew first) and its pages encoded so far (their groups and page info, by size
    and cursor: each request adds its window)."""

    answers: list[dict[str, Any]]
    pages: dict[tuple[Any, ...], export.SplicedJson] = field(default_factory=dict)

    def page(self, key: tuple[Any, ...], head: dict[str, Any]) -> export.SplicedJson:
        """The page `key` encoded (`head`: its groups and page info), kept (all forgotten
        beyond MAX_GROUP_PAGES)."""
        found = self.pages.get(key)
        if found is None:
            if len(self.pages) >= MAX_GROUP_PAGES:
                self.pages = {}
            found = self.pages[key] = export.SplicedJson(head)
        return found


def _groups(session: Session, request: Request, steps: series.Steps, kind: str | None
            ) -> _GroupList:  # fmt: skip
    """Every group of the current fabric (of `kind` if given) summarised over the steps:
    computed once for every viewer while the window's samples stay as they are
    (FabricSnapshots.per_window)."""
    shared = snapshots(request)

    def build(session: Session) -> _GroupList:
        links = shared.current(session)[0]
        found = [g for g in fab_groups.groups(shared.nodes(session), links)
                 if kind is None or g.kind == kind]  # fmt: skip
        by_id = {lk["id"]: lk for lk in links}
        members = sorted({m for g in found for m in g.members})
        loads = fab_groups.read_loads(session, [by_id[m] for m in members], steps)
        answers = [LinkGroup.model_validate(fab_groups.summarise(g, by_id, loads))
                   .model_dump(mode="json") for g in found]  # fmt: skip
        return _GroupList(sorted(answers, key=fab_groups.sort_key))

    # the step and its grid make the answer; a window's start moved by whole steps (a live
    # window's) keeps the grid
    key = ("groups", kind, steps.step_ns, steps.from_ns % steps.step_ns)
    return shared.per_window(session, key, steps.from_ns, steps.to_ns, build)


def _group_key(answer: dict[str, Any]) -> tuple[Any, ...]:
    """A group's place in the list as a cursor keeps it (floats as their repr)."""
    return tuple(repr(p) if isinstance(p, float) else p for p in fab_groups.sort_key(answer))


@router.get("/groups", response_model=LinkGroupPage, responses=_PAGED)
def fabric_groups(
    session: SessionDep,
    request: Request,
    window: WindowDep,
    kind: Annotated[
        Literal["parallel", "uplinks", "rails"] | None,
        Query(description="only groups of this kind"),
    ] = None,
    step: Annotated[float | None, step_query(_GROUP_STEP_HELP)] = None,
    limit: Annotated[
        int, Query(ge=1, le=GROUP_LIMITS.maximum, description=GROUP_LIMITS.help("groups"))
    ] = GROUP_LIMITS.default,
    cursor: CursorParam = None,
) -> Response:  # fmt: skip
    """A page of the groups of parallel links of the current fabric (links between the
    same two switches; the uplinks of a leaf; the rails of a multi-HCA host), highest skew
    over the window first (default window: the last 15 minutes): each member's bytes each
    way and utilisation over the window (the links list's rules), the group's skew (max /
    mean and the coefficient of variation of its members' utilisations), the skew per
    step and its peak, and its busiest member. Unknown skew (fewer than two members with a
    known load, or none loaded) last."""
    steps = _steps(window, step)
    found = _groups(session, request, steps, kind)
    answers = found.answers
    total = len(answers)
    after = paging.decode("group", cursor, (bool, str, int, str, int))
    if after is not None:
        answers = [a for a in answers if _cmp_key(_group_key(a)) > _cmp_key(after)]
    kept, more = answers[:limit], len(answers) > limit
    next_cursor = paging.encode("group", _group_key(kept[-1])) if more else None
    page = found.page((limit, after), {
        "groups": kept, "page": {"total": total, "limit": limit, "next_cursor": next_cursor},
    })  # fmt: skip
    return page.response(request.headers.get("accept-encoding"), {
        "from_ns": steps.from_ns, "to_ns": steps.to_ns, "step_ns": steps.step_ns,
        "resolution": history.resolution(steps),
    })  # fmt: skip


def _cmp_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A group's cursor key made comparable again (its float back from its repr); 404 if
    it is not one of ours."""
    try:
        return (key[0], float(key[1]), *key[2:])
    except (ValueError, TypeError):
        raise HTTPException(status_code=404, detail="no such page: not a cursor of this list"
                            ) from None  # fmt: skip


@router.get("/groups/{group}", response_model=LinkGroup, responses=_PAGED)
def fabric_group(
    group: Annotated[int, Path(ge=0, le=0x7FFF_FFFF, description="group id")],
    session: SessionDep,
    request: Request,
    window: WindowDep,
    step: Annotated[float | None, step_query(_GROUP_STEP_HELP)] = None,
) -> LinkGroup:
    """One group of parallel links over the window (default: the last 15 minutes), as the
    list shows it, with the jobs that load its busiest member most (the link attribution
    of that member over the window, both directions, every category; jobs the viewer may
    not read summed as "another job"), most bytes first. 404 if the current fabric has no
    such group."""
    steps = _steps(window, step)
    answers = _groups(session, request, steps, None).answers
    found = next((a for a in answers if a["id"] == group), None)
    if found is None:
        raise HTTPException(status_code=404, detail=f"the current fabric has no group {group}")
    jobs: list[dict[str, Any]] = []
    if found["busiest_link_id"] is not None:
        cache = request.app.state.attributions
        answer = traffic_service.link_attribution(
            session, request.app.state.traffic, found["busiest_link_id"],
            Window(steps.from_ns, steps.to_ns), cache)  # fmt: skip
        jobs = fab_groups.jobs_on(answer)
    return LinkGroup.model_validate({**found, "jobs": jobs})
