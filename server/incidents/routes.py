"""HTTP routes of the incidents domain: the list (paged, filtered) and one incident, made
by server/incidents/answers.py (which the reports read too). Jobs of other users are shown
as "another job" (their incident_jobs rows are hidden by the owner filter, only the
member's role is public)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from server import paging
from server.deps import SessionDep
from server.errors import error_responses
from server.incidents import answers, repository
from server.jobs.target import filter_jobs
from server.paging import CursorParam, PageSizes
from server.query_params import TEXT_PATTERN, OwnerParam, WindowDep, id_query
from stacklens.api_models import (
    IncidentDetails,
    IncidentKind,
    IncidentList,
    IncidentSummary,
    Severity,
)

router = APIRouter(prefix="/api/incidents", tags=["incidents"])

#: Page sizes of the list.
INCIDENT_LIMITS = PageSizes(default=100, maximum=1000)


@router.get("", response_model=IncidentList, responses=error_responses(404, 409))
def list_incidents(
    session: SessionDep,
    window: WindowDep,
    severity: Annotated[Severity | None, Query(description="only this severity")] = None,
    kind: Annotated[
        IncidentKind | None, Query(description="opened by or joining this detector kind")
    ] = None,  # fmt: skip
    job: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            pattern=TEXT_PATTERN,
            description="only those involving this job (one you may read; with `owner` "
            "when the id names jobs of several owners, else 409)",
        ),
    ] = None,  # fmt: skip
    owner: OwnerParam = None,
    link: Annotated[int | None, id_query("fabric link id")] = None,
    open: Annotated[bool | None, Query(description="true: open ones; false: ended")] = None,
    limit: Annotated[
        int, Query(ge=1, le=INCIDENT_LIMITS.maximum, description=INCIDENT_LIMITS.help("incidents"))
    ] = INCIDENT_LIMITS.default,  # fmt: skip
    cursor: CursorParam = None,
) -> IncidentList:
    """Incidents overlapping the window (`from`/`to`: started before `to`, open or ended at
    or after `from`), newest start first; filters: severity, kind, job (by id, and
    `owner` as on the job routes: only jobs you may read match; an id of several owners'
    jobs without `owner` is a 409 naming them), link (fabric link id), open. `owner`
    without `job` is a 422."""
    answers.one_snapshot(session)
    if owner is not None and job is None:
        raise HTTPException(status_code=422, detail="'owner' qualifies 'job': name the job too")
    after = paging.decode("incidents", cursor, (int, int))
    job_ids = None if job is None else filter_jobs(session, job, owner)
    rows, total = repository.list_incidents(
        session, limit, None if after is None else (after[0], after[1]),
        from_ns=window.from_ns, to_ns=window.to_ns, severity=severity, kind=kind,
        job_ids=job_ids, link=link, is_open=open,
    )  # fmt: skip
    seen = repository.visible_jobs(session, [i.id for i in rows[:limit]])
    shown = {i.id: answers.shown_members(i, seen.get(i.id, {}), False) for i in rows}
    summaries = [answers.summary(i, shown[i.id]) for i in rows]
    kept, info = paging.page("incidents", summaries, limit, total,
                             lambda r: (r["start_ns"], r["id"]))  # fmt: skip
    return IncidentList(incidents=[IncidentSummary(**r) for r in kept], page=info)


@router.get("/{incident_id}", response_model=IncidentDetails, responses=error_responses(404))
def get_incident(incident_id: int, session: SessionDep) -> IncidentDetails:
    """One incident: its links with their evidence series, its jobs with their roles,
    ranks, files, bytes on the links and evidence (another user's job: only its role)."""
    return answers.details(session, incident_id)
