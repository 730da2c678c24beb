"""Queries of the jobs domain (routes call these; they never build SQL themselves)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from stacklens.schema import Job, P2PDelta, Rank


def list_jobs(session: Session) -> list[dict]:
    """Every job, newest first, with ranks seen and total point-to-point traffic sent."""
    ranks = select(Rank.job_id, func.count().label("ranks_seen")).group_by(Rank.job_id).subquery()
    traffic = (
        select(
            P2PDelta.job_id,
            func.sum(P2PDelta.bytes_sent).label("bytes_sent"),
            func.sum(P2PDelta.msgs_sent).label("messages_sent"),
        )
        .group_by(P2PDelta.job_id)
        .subquery()
    )
    query = (
        select(
            Job.job_key.label("job"),
            Job.world_size,
            func.coalesce(Job.command, "").label("command"),
            func.coalesce(Job.user, "").label("user"),
            Job.status,
            Job.started_ns,
            Job.last_seen_ns,
            func.coalesce(ranks.c.ranks_seen, 0).label("ranks_seen"),
            func.coalesce(traffic.c.bytes_sent, 0).label("bytes_sent"),
            func.coalesce(traffic.c.messages_sent, 0).label("messages_sent"),
        )
        .outerjoin(ranks, ranks.c.job_id == Job.id)
        .outerjoin(traffic, traffic.c.job_id == Job.id)
        .order_by(Job.started_ns.desc(), Job.id.desc())
    )
    return [dict(row._mapping) for row in session.execute(query)]


def get_job(session: Session, job_key: str) -> Job | None:
    """The job with this key, or None."""
    return session.scalars(select(Job).where(Job.job_key == job_key)).one_or_none()


def p2p_matrix(session: Session, job_id: int) -> list[dict]:
    """Bytes and messages sent per (source rank, destination rank) over the whole job."""
    query = (
        select(
            P2PDelta.world_rank.label("src"),
            P2PDelta.peer.label("dst"),
            func.sum(P2PDelta.bytes_sent).label("bytes"),
            func.sum(P2PDelta.msgs_sent).label("messages"),
        )
        .where(P2PDelta.job_id == job_id)
        .group_by(P2PDelta.world_rank, P2PDelta.peer)
        .having(func.sum(P2PDelta.msgs_sent) > 0)
        .order_by(P2PDelta.world_rank, P2PDelta.peer)
    )
    return [dict(row._mapping) for row in session.execute(query)]
