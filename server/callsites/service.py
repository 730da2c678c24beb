# server/callsites/service.py — a job's call sites: stored rows, resolved, across ranks.
"""The answer of GET /api/jobs/{job}/callsites and of the job's "Call sites" card: the
scope's per-rank call-site rows (server/callsites/repository.py), their frames resolved
(server/callsites/resolution.py: the stored answers of the node, of the collector's
resolver, its fallbacks, else labelled not resolved yet) and summed across ranks into
sites (the pure server/callsites/summary.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from server.callsites import repository, resolution, summary
from server.jobs.repository import Scope


def job_callsites(session: Session, scope: Scope) -> dict[str, Any]:
    """The scope's sites (dicts of `Callsite` fields, heaviest time first) and its time
    inside MPI and in file I/O at every site."""
    rows = repository.callsite_rows(session, scope)
    resolved = resolution.resolve(session, scope.job_id, (f for r in rows for f in r["frames"]))
    return summary.summarize(rows, resolved)


#: Finds the call site of an MPI op where some ranks spent the most time (summary.site_of).
SiteFinder = Callable[[str, list[int]], dict[str, Any] | None]


def site_finder(session: Session, scope: Scope) -> SiteFinder:
    """A SiteFinder over the scope that reads its call sites on first use only (the
    slow-rank profile asks only when it names a rank)."""
    read: dict[str, Any] = {}

    def find(op: str, ranks: list[int]) -> dict[str, Any] | None:
        if not read:
            read["rows"] = repository.callsite_rows(session, scope)
            read["resolved"] = resolution.resolve(
                session, scope.job_id, (f for r in read["rows"] for f in r["frames"])
            )
        return summary.site_of(read["rows"], read["resolved"], op, ranks)

    return find
