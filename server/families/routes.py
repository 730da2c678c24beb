"""HTTP routes of the families domain: a job's communicator families with their traffic,
time and reach (GET /api/jobs/{job}/families) and its bytes per link by family
(GET /api/jobs/{job}/families/links). Window, run, owner, paging, files; no SQL here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from server import paging
from server.deps import SessionDep
from server.errors import error_responses
from server.export import FILE_RESPONSES, FormatParam, table
from server.families import service
from server.jobs.sections import FAMILY_LIMITS
from server.jobs.target import find_target
from server.paging import CursorParam, PageSizes
from server.query_params import OwnerParam, RunParam, WindowDep
from server.traffic.service import AttributionCache
from stacklens.api_models import CommFamily, JobFamilies, JobFamilyLinks

router = APIRouter(tags=["families"])

#: Page sizes of a job's link directions (its families': the card's, server/jobs/sections).
LINK_LIMITS = PageSizes(default=1000, maximum=10_000)
_ANSWERS = error_responses(404, 409, **{"422": "unknown query parameter, or a bad window"})


def _cache(request: Request) -> tuple[AttributionCache, str]:
    """The app's fabric cache and how its fabric forwards (STACKLENS_FABRIC_PATHS)."""
    return request.app.state.attributions, request.app.state.traffic.paths


@router.get(
    "/api/jobs/{job:path}/families",
    response_model=JobFamilies,
    responses={**_ANSWERS, **FILE_RESPONSES},
)
def job_families(
    job: str,
    session: SessionDep,
    request: Request,
    window: WindowDep,
    run: RunParam = None,
    owner: OwnerParam = None,
    limit: Annotated[
        int, Query(ge=1, le=FAMILY_LIMITS.maximum, description=FAMILY_LIMITS.help("families"))
    ] = FAMILY_LIMITS.default,
    cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> JobFamilies | Response:
    """A job's communicator families (the communicators one creating call made, or of one
    MPI_Comm_set_name name; the world): how each was made, its members in world ranks, and
    over the window its calls, bytes and time by op (collectives and point-to-point on its
    communicators) and how many of its bytes stay in a host, cross one leaf switch or the
    spine (from the hosts' placement and the forwarding tables; point-to-point `routed`,
    collectives `modelled`). Heaviest time first, paged (files: the page's families)."""
    target = find_target(session, job, owner, run, window)
    cache, paths = _cache(request)
    kept, page = service.families_page(session, cache, paths, target.scope, limit, cursor)
    if fmt != "json":  # plain rows: nested groups, ops and reach become JSON cells
        return table(kept, list(CommFamily.model_fields), fmt, "families")
    families = [CommFamily(**r) for r in kept]
    window = target.scope.window
    return JobFamilies(job=target.job, from_ns=window.from_ns, to_ns=window.to_ns,
                       families=families, page=page, run=run)  # fmt: skip


@router.get("/api/jobs/{job:path}/families/links", response_model=JobFamilyLinks,
            responses=_ANSWERS)  # fmt: skip
def job_family_links(
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
) -> JobFamilyLinks:
    """The link directions a job's inter-host traffic crossed over the window, with its
    bytes on each by communicator family, provenance (routed, modelled) and path (fixed by
    the forwarding tables, or a group split by measured bytes); by link id then direction,
    paged; and the bytes on no link by reason (intra_host, off_fabric, no_route)."""
    target = find_target(session, job, owner, run, window)
    cache, paths = _cache(request)
    scope = target.scope
    # once for every viewer of the job while nothing it reads changed
    answer = cache.per_job(session, ("family links", paths, scope), scope.job_id,
                           lambda: service.job_family_links(session, cache, paths, scope,
                                                            scope.job_id))  # fmt: skip
    rows = answer["links"]
    total = len(rows)
    after = paging.decode("familylink", cursor, (int, str))
    if after is not None:
        rows = [r for r in rows if (r["id"], r["direction"]) > after]
    kept, page = paging.page("familylink", rows[: limit + 1], limit, total,
                             lambda r: (r["id"], r["direction"]))  # fmt: skip
    w = target.scope.window
    return JobFamilyLinks(job=target.job, from_ns=w.from_ns, to_ns=w.to_ns, paths=paths,
                          links=kept, page=page, left_out=answer["left_out"], run=run)  # fmt: skip
