"""On-wire traffic as the MPI measured it (Open MPI's monitoring component, read by the
hooks; wire table 11, stored in `wire_frames` / `wire_deltas`).

What a rank sent to each peer on the wire, collective internals included: the figures are
`measured`. A run whose MPI did not measure (MPICH, no monitoring component,
STACKLENS_MEASURE_WIRE=off) has no rows at all and reads as None here, never as zeros; its
collective traffic must be modelled instead.
"""

from __future__ import annotations

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from stacklens.schema import WireDelta, WireFrames


def measured_wire_bytes(
    session: Session, job_id: int, run_id: int, from_ns: int, to_ns: int
) -> dict[tuple[int, int], int] | None:
    """Measured on-wire bytes per (src_rank, dst_rank) of run `run_id` (runs.id) of job
    `job_id` (jobs.id) over the intervals that ended in [from_ns, to_ns) (the window rule
    of server/query_params.py), pairs with no bytes left out; None when no rank of the run
    measured its on-wire traffic. World ranks; a rank's traffic to itself is included (it
    never leaves the host). Reads through the session's owner filter."""
    measured = session.execute(
        select(exists().where(WireFrames.job_id == job_id, WireFrames.run_id == run_id))
    ).scalar_one()
    if not measured:
        return None
    rows = session.execute(
        select(WireDelta.world_rank, WireDelta.peer, func.sum(WireDelta.bytes))
        .where(
            WireDelta.job_id == job_id,
            WireDelta.run_id == run_id,
            WireDelta.t_end_ns >= from_ns,
            WireDelta.t_end_ns < to_ns,
        )
        .group_by(WireDelta.world_rank, WireDelta.peer)
    ).all()
    return {(int(src), int(dst)): int(total) for src, dst, total in rows if total}
