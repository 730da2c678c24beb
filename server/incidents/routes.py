"""HTTP routes of the incidents domain: the list (paged, filtered) and one incident. Jobs of
other users are shown as "another job" (their incident_jobs rows are hidden by the owner
filter, only the member's role is public)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy.orm import Session

from server import paging
from server.deps import SessionDep
from server.errors import error_responses
from server.incidents import repository
from server.jobs.routes import OwnerParam
from server.jobs.target import filter_jobs
from server.paging import CURSOR_HELP, CURSOR_PATTERN, MAX_CURSOR_CHARS, PageSizes
from server.query_params import WindowDep, id_query
from stacklens.api_models import (
    IncidentDetails,
    IncidentJob,
    IncidentKind,
    IncidentLink,
    IncidentList,
    IncidentSummary,
    Severity,
)
from stacklens.schema import Incident

router = APIRouter(prefix="/api/incidents", tags=["incidents"])

#: Page sizes of the list.
INCIDENT_LIMITS = PageSizes(default=100, maximum=1000)


def _one_snapshot(session: Session) -> None:
    """Read an answer's incidents and their jobs from one snapshot: the detector rewrites
    both in one transaction, which a read between the two could straddle."""
    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def _members(incident: Incident, seen: dict[int, dict[str, Any]], detail: bool
             ) -> list[IncidentJob]:  # fmt: skip
    out = []
    for slot, member in enumerate(incident.members):
        job = seen.get(slot)
        if job is None:
            out.append(IncidentJob(role=member["role"], visible=False, job=None, user=None,
                                   label="another job", signals=[], ranks=[], files=[],
                                   link_bytes=None, evidence={}))  # fmt: skip
            continue
        out.append(IncidentJob(
            role=job["role"], visible=True, job=job["job"], user=job["user"],
            label=f"job {job['job']}", signals=job["signals"], ranks=job["ranks"],
            files=job["files"], link_bytes=job["link_bytes"],
            evidence=job["evidence"] if detail else {},
        ))  # fmt: skip
    return out


def _summary_line(incident: Incident, members: list[IncidentJob]) -> str:
    """The title and the jobs by role, as this viewer may see them."""
    parts = [incident.title]
    aggressors = [m.label for m in members if m.role == "aggressor"]
    victims = [m.label for m in members if m.role == "victim"]
    if aggressors:
        parts.append(f"likely aggressor: {', '.join(aggressors)}")
    if victims:
        parts.append(f"victim{'s' if len(victims) > 1 else ''}: {', '.join(victims)}")
    return "; ".join(parts)


def _summary(incident: Incident, members: list[IncidentJob]) -> dict[str, Any]:
    return {
        "id": incident.id, "kind": incident.kind, "severity": incident.severity,
        "title": incident.title, "summary": _summary_line(incident, members),
        "open": incident.end_ns is None, "start_ns": incident.start_ns,
        "end_ns": incident.end_ns, "detected_ns": incident.detected_ns,
        "updated_ns": incident.updated_ns, "unobserved_ns": incident.unobserved_ns,
        "lost_ns": incident.lost_ns, "hit": incident.hit, "signals": list(incident.signals),
        "link_ids": list(incident.link_ids), "jobs": len(incident.members),
    }  # fmt: skip


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
            pattern=r"^[^\x00-\x1f\x7f]*$",
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
    cursor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_CURSOR_CHARS,
            pattern=CURSOR_PATTERN,
            description=CURSOR_HELP,
        ),
    ] = None,  # fmt: skip
) -> IncidentList:
    """Incidents overlapping the window (`from`/`to`: started before `to`, open or ended at
    or after `from`), newest start first; filters: severity, kind, job (by id, and
    `owner` as on the job routes: only jobs you may read match; an id of several owners'
    jobs without `owner` is a 409 naming them), link (fabric link id), open. `owner`
    without `job` is a 422."""
    _one_snapshot(session)
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
    summaries = [_summary(i, _members(i, seen.get(i.id, {}), False)) for i in rows]
    kept, info = paging.page("incidents", summaries, limit, total,
                             lambda r: (r["start_ns"], r["id"]))  # fmt: skip
    return IncidentList(incidents=[IncidentSummary(**r) for r in kept], page=info)


@router.get("/{incident_id}", response_model=IncidentDetails, responses=error_responses(404))
def get_incident(incident_id: int, session: SessionDep) -> IncidentDetails:
    """One incident: its links with their evidence series, its jobs with their roles,
    ranks, files, bytes on the links and evidence (another user's job: only its role)."""
    _one_snapshot(session)
    incident = repository.get(session, incident_id) if 0 < incident_id < 2**63 else None
    if incident is None:
        raise HTTPException(status_code=404, detail=f"unknown incident {incident_id}")
    seen = repository.visible_jobs(session, [incident.id]).get(incident.id, {})
    members = _members(incident, seen, True)
    return IncidentDetails(
        **_summary(incident, members),
        links=[IncidentLink(**lk) for lk in incident.links],
        members=members,
    )
