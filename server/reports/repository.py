"""Queries of the reports domain (the report builders call these; they never build SQL
themselves): what the jobs and fabric repositories do not answer already — the jobs that
ran in a window (on some hosts)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stacklens.schema import Job, Rank


def window_jobs(
    session: Session, from_ns: int, to_ns: int, hosts: list[str] | None
) -> list[dict[str, Any]]:
    """The jobs the session may read with a run seen in [from_ns, to_ns) (started before its
    end, last seen at or after its start), on one of `hosts` if given: job id, user,
    command, status, times, world size, and the hosts of its ranks in the window; by start."""
    ranks = select(Rank.job_id, Rank.host).where(
        Rank.first_seen_ns < to_ns, Rank.last_seen_ns >= from_ns
    )
    if hosts:
        ranks = ranks.where(Rank.host.in_(hosts))
    placed = ranks.distinct().subquery()
    query = (
        select(
            Job.job_key,
            func.coalesce(Job.user, ""),
            func.coalesce(Job.command, ""),
            Job.status,
            Job.started_ns,
            Job.last_seen_ns,
            Job.world_size,
            func.array_agg(func.distinct(placed.c.host)),
        )
        .join(placed, placed.c.job_id == Job.id)
        .where(Job.started_ns < to_ns, Job.last_seen_ns >= from_ns)
        .group_by(Job.id)
        .order_by(Job.started_ns, Job.id)
    )
    keys = ("job", "user", "command", "status", "started_ns", "last_seen_ns", "world_size")
    return [
        {**dict(zip(keys, row[:7], strict=True)), "hosts": sorted(row[7])}
        for row in session.execute(query)
    ]


def window_job_count(session: Session, from_ns: int, to_ns: int, hosts: list[str] | None) -> int:
    """How many jobs had a run seen in the window (on `hosts` if given), whoever owns them:
    `session` must be unrestricted (the count names nobody)."""
    query = select(func.count(func.distinct(Rank.job_id))).where(
        Rank.first_seen_ns < to_ns, Rank.last_seen_ns >= from_ns
    )
    if hosts:
        query = query.where(Rank.host.in_(hosts))
    return int(session.scalar(query) or 0)
