# server/incidents/answers.py — an incident as the API answers it to one viewer.
"""The incidents domain's answers as the session's viewer sees them: the list's summaries
and one incident's details (its links, its jobs by role; another user's job is "another
job"), read from one snapshot. The routes (server/incidents/routes.py) and the reports
(server/reports/build.py) both read them here."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from sqlalchemy.orm import Session

from server.incidents import repository
from stacklens.api_models import IncidentCallsite, IncidentDetails, IncidentJob, IncidentLink
from stacklens.schema import Incident


def one_snapshot(session: Session) -> None:
    """Read an answer's incidents and their jobs from one snapshot: the detector rewrites
    both in one transaction, which a read between the two could straddle."""
    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def shown_members(
    incident: Incident, seen: dict[int, dict[str, Any]], detail: bool
) -> list[IncidentJob]:
    """The incident's jobs as the session's viewer may see them (from `seen`, its visible
    incident_jobs rows by slot; another user's job: only its role), with each job's
    evidence series when `detail` (its call sites whose time rose always)."""
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
            callsites=[IncidentCallsite(signal=kind, **site) for kind, site in risen(job)],
        ))  # fmt: skip
    return out


def risen(job: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(signal kind, site) of the call sites whose time rose during a member's signals, as
    its stored evidence keeps them, the largest rise first."""
    found = [(kind, site) for kind, e in (job.get("evidence") or {}).items()
             for site in e.get("callsites") or []]  # fmt: skip
    return sorted(found, key=lambda x: -x[1]["rise_ns_per_s"])


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


def summary(incident: Incident, members: list[IncidentJob]) -> dict[str, Any]:
    """The fields of the incident's IncidentSummary, its jobs named as in `members`."""
    return {
        "id": incident.id, "kind": incident.kind, "severity": incident.severity,
        "title": incident.title, "summary": _summary_line(incident, members),
        "open": incident.end_ns is None, "start_ns": incident.start_ns,
        "end_ns": incident.end_ns, "detected_ns": incident.detected_ns,
        "updated_ns": incident.updated_ns, "unobserved_ns": incident.unobserved_ns,
        "lost_ns": incident.lost_ns, "hit": incident.hit, "signals": list(incident.signals),
        "link_ids": list(incident.link_ids), "jobs": len(incident.members),
    }  # fmt: skip


def details(session: Session, incident_id: int) -> IncidentDetails:
    """GET /api/incidents/{id}'s answer: 404 for an id no incident has."""
    one_snapshot(session)
    incident = repository.get(session, incident_id) if 0 < incident_id < 2**63 else None
    if incident is None:
        raise HTTPException(status_code=404, detail=f"unknown incident {incident_id}")
    seen = repository.visible_jobs(session, [incident.id]).get(incident.id, {})
    shown = shown_members(incident, seen, True)
    return IncidentDetails(
        **summary(incident, shown),
        links=[IncidentLink(**lk) for lk in incident.links],
        members=shown,
    )
