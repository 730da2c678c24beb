"""HTTP routes of the traffic domain: a link's bytes by job and category
(GET /api/fabric/links/{link}/attribution), the jobs on a node
(GET /api/fabric/nodes/{guid}/jobs) and a job's bytes per link (GET /api/jobs/{job}/links).
All over a window (`from`, `to`); no SQL here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request
from sqlalchemy.orm import Session

from server import paging
from server.deps import SessionDep
from server.errors import error_responses
from server.jobs import repository as jobs
from server.jobs.target import find_job
from server.paging import CursorParam, PageSizes
from server.query_params import MAX_DB_INT, OwnerParam, RunParam, Window, WindowDep, step_query
from server.traffic import service
from server.traffic.repository import TrafficConfig
from stacklens.api_models import JobLinks, LinkAttribution, LinkAttributionSeries, NodeJobs

router = APIRouter(tags=["traffic"])

#: The default window's length of a link's attribution: the minute up to the newest sweep.
DEFAULT_SPAN_NS = 60 * 10**9
#: Page sizes of a job's link directions.
LINK_LIMITS = PageSizes(default=1000, maximum=10_000)
_ANSWERS = error_responses(404, **{"422": "unknown query parameter, or a bad window"})


def traffic_config(request: Request) -> TrafficConfig:
    """The app's traffic settings (how the fabric forwards, the storage servers)."""
    config: TrafficConfig = request.app.state.traffic
    return config


@router.get(
    "/api/fabric/links/{link}/attribution", response_model=LinkAttribution, responses=_ANSWERS
)
def link_attribution(
    link: Annotated[int, Path(ge=1, le=MAX_DB_INT, description="link id")],
    session: SessionDep,
    request: Request,
    window: WindowDep,
) -> LinkAttribution:
    """A link's measured bytes in each direction over the window, split into job x category
    (mpi_p2p, mpi_coll, mpi_rma, io) by routing every job's inter-host transfers over the
    forwarding tables, and `other` = measured - attributed as it is (negative allowed). Each
    figure says its provenance (measured, routed, modelled) and whether the tables fixed
    the link or a group of parallel/adaptive links shared the flow. Jobs the viewer may not
    read show as another job (no id, no user). Default window: the minute up to the newest
    sweep (`to` alone: the minute before it; `from` alone: up to the newest sweep)."""
    cache: service.AttributionCache = request.app.state.attributions
    answer = service.link_attribution(session, traffic_config(request), link,
                                      _by_default(session, window), cache)  # fmt: skip
    if answer is None:
        raise HTTPException(status_code=404, detail=f"the current fabric has no link {link}")
    return LinkAttribution(**answer)


def _by_default(session: Session, window: Window) -> Window:
    """The window of a link's or node's attribution: the minute up to the newest sweep
    (`to` alone: the minute before it; `from` alone: up to the newest sweep)."""
    if window.from_ns is not None and window.to_ns is not None:
        return window
    newest = service.newest_sample(session)
    to_ns = window.to_ns if window.to_ns is not None else newest + 1
    return Window(window.from_ns if window.from_ns is not None else to_ns - DEFAULT_SPAN_NS,
                  to_ns)  # fmt: skip


@router.get("/api/fabric/nodes/{guid}/jobs", response_model=NodeJobs, responses=_ANSWERS)
def node_jobs(
    guid: Annotated[str, Path(pattern=r"^0x[0-9a-fA-F]{1,16}$", description="node GUID")],
    session: SessionDep,
    request: Request,
    window: WindowDep,
) -> NodeJobs:
    """The jobs on a node over the window: per job, its bytes over the node's links leaving
    it and into it (attributed as for a link: routed over the forwarding tables) and, for
    an HCA, its hosts placed on the node (a job whose ranks there moved bytes in the
    window is listed even when none crossed a link); busiest first. Jobs the viewer may
    not read are summed as one "another job" row (no id, user or hosts). Default window as
    a link's attribution."""
    cache: service.AttributionCache = request.app.state.attributions
    answer = service.node_jobs(session, traffic_config(request), guid,
                               _by_default(session, window), cache)  # fmt: skip
    if answer is None:
        raise HTTPException(status_code=404, detail=f"the current fabric has no node {guid}")
    return NodeJobs(**answer)


@router.get(
    "/api/fabric/links/{link}/attribution/series",
    response_model=LinkAttributionSeries,
    responses=_ANSWERS,
)
def link_attribution_series(
    link: Annotated[int, Path(ge=1, le=MAX_DB_INT, description="link id")],
    session: SessionDep,
    request: Request,
    window: WindowDep,
    step: Annotated[float, step_query("seconds per step")],
) -> LinkAttributionSeries:
    """A link's attribution (as `/attribution` answers it for a window) per step of the
    window, which must be closed (`from` and `to`) and hold at most MAX_SERIES_STEPS
    steps: per step and direction the measured bytes, the bytes by job and category, and
    `other`."""
    if window.from_ns is None or window.to_ns is None:
        raise HTTPException(status_code=422, detail="a series needs both `from` and `to`")
    step_ns = max(1, int(step * 1e9))
    steps = -(-(window.to_ns - window.from_ns) // step_ns)
    if steps > service.MAX_SERIES_STEPS:
        raise HTTPException(
            status_code=422,
            detail=f"{steps} steps; at most {service.MAX_SERIES_STEPS}: a longer step or a "
            "shorter window",
        )
    answer = service.link_series(session, traffic_config(request), link, window, step_ns)
    if answer is None:
        raise HTTPException(status_code=404, detail=f"the current fabric has no link {link}")
    return LinkAttributionSeries(**answer)


@router.get(
    "/api/jobs/{job:path}/links",
    response_model=JobLinks,
    responses=error_responses(404, 409, **{"422": "unknown query parameter, or a bad window"}),
)
def job_links(
    job: str,
    session: SessionDep,
    request: Request,
    window: WindowDep,
    run: RunParam = None,
    owner: OwnerParam = None,
    limit: Annotated[
        int, Query(ge=1, le=LINK_LIMITS.maximum, description=LINK_LIMITS.help("link directions"))
    ] = LINK_LIMITS.default,
    cursor: CursorParam = None,
) -> JobLinks:
    """The link directions a job's inter-host traffic crossed over the window, with the
    job's bytes on each by category and provenance (by link id, then direction; paged), where
    its collective bytes come from (measured or modelled) and its bytes on no link. Default
    window: the job's (or run's), from its first interval start to its last interval end."""
    found = find_job(session, job, owner)
    run_id = None
    first, last = found.started_ns, found.last_seen_ns
    if run is not None:
        chosen = jobs.get_run(session, found.id, run)
        if chosen is None:
            raise HTTPException(status_code=404, detail=f"job {job!r} has no run {run}")
        run_id, first, last = chosen.id, chosen.started_ns, chosen.last_seen_ns
    window = Window(first if window.from_ns is None else window.from_ns,
                    last + 1 if window.to_ns is None else window.to_ns)  # fmt: skip
    about = {"id": found.id, "job": found.job_key, "user": found.user}
    config, cache = traffic_config(request), request.app.state.attributions
    # once for every viewer of the job while nothing it reads changed (the answer is shared:
    # read, never changed)
    key = ("links", config.paths, repr(config.storage), config.placement, window, run_id,
           found.job_key, found.user)  # fmt: skip
    answer = cache.per_job(session, key, found.id,
                           lambda: service.job_links(session, config, about, window, run_id,
                                                     cache))  # fmt: skip
    after = paging.decode("link", cursor, (int, str))
    rows = answer["links"]
    total = len(rows)
    if after is not None:
        rows = [r for r in rows if (r["id"], r["direction"]) > after]
    kept, page = paging.page("link", rows[: limit + 1], limit, total,
                             lambda r: (r["id"], r["direction"]))  # fmt: skip
    rest = {k: v for k, v in answer.items() if k != "links"}
    return JobLinks(**rest, links=kept, page=page, run=run)
