"""Monitored traffic: what each rank sent to each peer as the MPI's monitoring counted it
(Open MPI's monitoring component, read by the hooks; wire table 11 `monitored`, stored in
`monitored_frames` / `monitored_deltas`).

Collective internals included, the figures are `measured`. A run whose MPI did not monitor
(MPICH, no monitoring component, STACKLENS_MONITOR_TRAFFIC=off) has no rows at all and
reads as None here, never as zeros; its collective traffic must be modelled instead.
"""

from __future__ import annotations

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from stacklens.schema import MonitoredDelta, MonitoredFrames


def monitored_bytes(
    session: Session, job_id: int, run_id: int, from_ns: int, to_ns: int
) -> dict[tuple[int, int], int] | None:
    """Monitored bytes per (src_rank, dst_rank) of run `run_id` (runs.id) of job `job_id`
    (jobs.id) over the intervals that ended in [from_ns, to_ns) (the window rule of
    server/query_params.py), pairs with no bytes left out; None when no rank of the run
    monitored its traffic. World ranks; a rank's traffic to itself is included (it
    never leaves the host). Reads through the session's owner filter."""
    monitored = session.execute(
        select(exists().where(MonitoredFrames.job_id == job_id, MonitoredFrames.run_id == run_id))
    ).scalar_one()
    if not monitored:
        return None
    rows = session.execute(
        select(MonitoredDelta.world_rank, MonitoredDelta.peer, func.sum(MonitoredDelta.bytes))
        .where(
            MonitoredDelta.job_id == job_id,
            MonitoredDelta.run_id == run_id,
            MonitoredDelta.t_end_ns >= from_ns,
            MonitoredDelta.t_end_ns < to_ns,
        )
        .group_by(MonitoredDelta.world_rank, MonitoredDelta.peer)
    ).all()
    return {(int(src), int(dst)): int(total) for src, dst, total in rows if total}
