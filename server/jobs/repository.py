"""Queries of the jobs domain (routes call these; they never build SQL themselves)."""

from __future__ import annotations

from sqlalchemy import distinct, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from stacklens.mpi_ops import CATEGORIES, op_categories, op_names
from stacklens.schema import IoDelta, Job, OpDelta, P2PDelta, Rank

#: Names of the I/O layers stored in `io_deltas.layer`.
IO_LAYERS = {1: "POSIX", 2: "stdio", 3: "MPI-IO"}


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


def job_ops(session: Session, job_id: int) -> list[dict]:
    """Calls, bytes and time inside per MPI op over all ranks and intervals of the job, with
    the op's name, traffic category and the number of ranks that called it; only ops with
    calls, heaviest time first (then by name)."""
    calls = func.sum(OpDelta.calls)
    query = (
        select(
            OpDelta.op_id,
            calls.label("calls"),
            func.sum(OpDelta.bytes).label("bytes"),
            func.sum(OpDelta.time_ns).label("time_ns"),
            func.count(distinct(OpDelta.world_rank)).filter(OpDelta.calls > 0).label("ranks"),
        )
        .where(OpDelta.job_id == job_id)
        .group_by(OpDelta.op_id)
        .having(calls > 0)
    )
    names, categories = op_names(), op_categories()
    rows = [
        {
            # The collector accepts only op ids of its spec; an older server may not know
            # a newer spec's appended ids: they are still listed, as "other".
            "op": names[row.op_id] if row.op_id < len(names) else f"op {row.op_id}",
            "category": categories[row.op_id] if row.op_id < len(names) else "other",
            "calls": int(row.calls),
            "bytes": int(row.bytes),
            "time_ns": int(row.time_ns),
            "ranks": int(row.ranks),
        }
        for row in session.execute(query)
    ]
    return sorted(rows, key=lambda r: (-r["time_ns"], r["op"]))


def category_totals(ops: list[dict]) -> list[dict]:
    """Calls, bytes and time summed per traffic category over `job_ops` rows: every category
    of `stacklens.mpi_ops.CATEGORIES`, in that order, zeros included."""
    totals = {c: {"category": c, "calls": 0, "bytes": 0, "time_ns": 0} for c in CATEGORIES}
    for op in ops:
        total = totals[op["category"]]
        for key in ("calls", "bytes", "time_ns"):
            total[key] += op[key]
    return list(totals.values())


def job_io(session: Session, job_id: int) -> list[dict]:
    """File-system I/O per (layer, path) over all ranks and intervals of the job, most bytes
    (read + written) first. Mount and file-system type are those the ranks reported; should
    ranks disagree (a node-local path on different hosts), the distinct values are joined
    with ", "."""
    sums = {
        name: func.sum(getattr(IoDelta, name))
        for name in (
            "opens",
            "reads",
            "writes",
            "bytes_read",
            "bytes_written",
            "read_time_ns",
            "write_time_ns",
            "meta_time_ns",
        )
    }

    def distinct_values(column):
        return func.array_to_string(
            func.array_agg(aggregate_order_by(distinct(column), column)), ", "
        )

    moved = sums["bytes_read"] + sums["bytes_written"]
    query = (
        select(
            IoDelta.layer,
            IoDelta.path,
            distinct_values(IoDelta.mount).label("mount"),
            distinct_values(IoDelta.fstype).label("fstype"),
            func.count(distinct(IoDelta.world_rank)).label("ranks"),
            *(total.label(name) for name, total in sums.items()),
        )
        .where(IoDelta.job_id == job_id)
        .group_by(IoDelta.layer, IoDelta.path)
        .order_by(moved.desc(), IoDelta.layer, IoDelta.path)
    )
    return [
        {
            **row._mapping,
            "layer": IO_LAYERS.get(row.layer, f"layer {row.layer}"),
            **{name: int(row._mapping[name]) for name in sums},
        }
        for row in session.execute(query)
    ]
