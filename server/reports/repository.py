"""Queries of the reports domain (the report builders call these; they never build SQL
themselves): what the jobs and fabric repositories do not answer already — the error
counters and the load over time of a set of fabric ports in a window, and the jobs that ran
in a window (on some hosts).

Fabric samples are taken as server.jobs.placement takes them: a sample belongs to a window
when its sweep interval (ts_ns - dt_ns, ts_ns] overlaps it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Integer, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from server.jobs.placement import MAX_SWEEP_NS
from stacklens.constants import ERROR_COUNTERS
from stacklens.schema import FabricPortSample, Job, Rank, Run


def _overlapping(from_ns: int, to_ns: int) -> list[Any]:
    s = FabricPortSample.__table__.c
    return [
        s.ts_ns > from_ns,
        s.ts_ns < to_ns + MAX_SWEEP_NS,
        s.ts_ns - func.coalesce(s.dt_ns, 0) < to_ns,
    ]


def _ids(port_ids: list[int]) -> Any:
    return literal(sorted(set(port_ids)), type_=ARRAY(Integer))


def port_errors(
    session: Session, port_ids: list[int], from_ns: int, to_ns: int
) -> dict[int, dict[str, int | None]]:
    """Per port id, each error counter's deltas summed over its samples overlapping the
    window (None: a sample of the window did not know the delta, e.g. after a reset)."""
    if not port_ids:
        return {}
    s = FabricPortSample.__table__.c
    sums = [func.sum(s[f"d_{c}"]) for c in ERROR_COUNTERS]
    unknown = [
        func.count().filter(s[f"d_{c}"].is_(None), s.dt_ns.is_not(None)) for c in ERROR_COUNTERS
    ]
    query = (
        select(s.port_id, *sums, *unknown)
        .where(s.port_id == func.any(_ids(port_ids)), *_overlapping(from_ns, to_ns))
        .group_by(s.port_id)
    )
    n = len(ERROR_COUNTERS)
    out: dict[int, dict[str, int | None]] = {}
    for row in session.execute(query):
        out[row[0]] = {
            c: None if row[1 + n + i] else int(row[1 + i] or 0)
            for i, c in enumerate(ERROR_COUNTERS)
        }
    return out


def port_series(
    session: Session, port_ids: list[int], from_ns: int, to_ns: int, step_ns: int
) -> list[tuple[int, int, int, int, int]]:
    """Per port and step of the window (the step its sample's end lies in): (port id, step
    start, xmit bytes, ns covered by samples with a known xmit delta, PortXmitWait ticks),
    by port then step; steps without a sample are absent."""
    if not port_ids:
        return []
    s = FabricPortSample.__table__.c
    origin, step = literal(from_ns, BigInteger), literal(step_ns, BigInteger)
    at = (origin + (s.ts_ns - origin) / step * step).label("at")
    query = (
        select(
            s.port_id,
            at,
            func.coalesce(func.sum(s.d_xmit_bytes), 0).cast(BigInteger),
            func.coalesce(func.sum(s.dt_ns).filter(s.d_xmit_bytes.is_not(None)), 0).cast(
                BigInteger
            ),
            func.coalesce(func.sum(s.d_xmit_wait), 0).cast(BigInteger),
        )
        .where(s.port_id == func.any(_ids(port_ids)), s.ts_ns >= from_ns, s.ts_ns < to_ns)
        .where(s.dt_ns > 0)
        .group_by(s.port_id, at)
        .order_by(s.port_id, at)
    )
    return [(int(p), int(t), int(b), int(dt), int(w)) for p, t, b, dt, w in session.execute(query)]


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


def run_ordinals(session: Session, job_id: int) -> list[int]:
    """The ordinals of a job's runs."""
    return list(
        session.scalars(select(Run.ordinal).where(Run.job_id == job_id).order_by(Run.ordinal))
    )
