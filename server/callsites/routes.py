# server/callsites/routes.py — GET /api/jobs/{job}/callsites (no SQL here).
"""HTTP route of the call-sites domain: a job's call sites over the window with their time,
share, calls, bytes, sizes, the rank with the most time and imbalance, each frame resolved
to function, file and line (or the documented fallback). Window, run, owner, paging, files."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from server.deps import SessionDep
from server.errors import error_responses
from server.export import FILE_RESPONSES, FormatParam, model_table
from server.jobs import sections
from server.jobs.sections import SITE_LIMITS
from server.jobs.target import find_target
from server.paging import CursorParam
from server.query_params import OwnerParam, RunParam, WindowDep
from stacklens.api_models import Callsite, JobCallsites

router = APIRouter(tags=["callsites"])

_ANSWERS = error_responses(404, 409, **{"422": "unknown query parameter, or a bad window"})


@router.get(
    "/api/jobs/{job:path}/callsites",
    response_model=JobCallsites,
    responses={**_ANSWERS, **FILE_RESPONSES},
)
def job_callsites(
    job: str,
    session: SessionDep,
    window: WindowDep,
    run: RunParam = None,
    owner: OwnerParam = None,
    limit: Annotated[
        int, Query(ge=1, le=SITE_LIMITS.maximum, description=SITE_LIMITS.help("call sites"))
    ] = SITE_LIMITS.default,
    cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> JobCallsites | Response:
    """A job's call sites over the window: the calls of one MPI or I/O operation made from
    one place in the program, summed over the ranks (joined by the frames' build-id and
    offset): time, share of the job's MPI (or file I/O) time, calls, bytes, mean and size
    range, the rank with the most time there and the imbalance (its time over the mean of
    the ranks calling from there); each frame as function, file and line, else function+offset, else
    module+offset, with the reason (docs/callsites.md). Heaviest time first, paged (files:
    the page's sites, frames as JSON)."""
    target = find_target(session, job, owner, run, window)
    answer = sections.callsites(session, target, limit, cursor)
    if fmt != "json":
        return model_table(answer.sites, Callsite, fmt, "callsites")
    return answer
