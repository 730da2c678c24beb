"""Queries of the jobs domain (routes call these; they never build SQL themselves).

Every query of a job's data takes a `Scope`: the job, and one of its runs or None for the
whole job (all its runs summed).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, distinct, func, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from stacklens.mpi_ops import CATEGORIES, op_categories, op_names
from stacklens.schema import (
    IO_COUNTERS,
    CollDelta,
    IoDelta,
    Job,
    OpDelta,
    OpHistDelta,
    P2PDelta,
    Rank,
    RmaDelta,
    Run,
)

#: Names of the I/O layers stored in `io_deltas.layer`.
IO_LAYERS = {1: "POSIX", 2: "stdio", 3: "MPI-IO"}


@dataclass(frozen=True)
class Scope:
    """What a query reads: one job (jobs.id), and one of its runs (runs.id) or all."""

    job_id: int
    run_id: int | None = None

    def rows(self, table) -> list[ColumnElement[bool]]:
        """The conditions that select this scope's rows of `table` (a per-rank table or
        view, or `ranks`)."""
        if self.run_id is None:
            return [table.job_id == self.job_id]
        return [table.job_id == self.job_id, table.run_id == self.run_id]


def list_jobs(session: Session) -> list[dict]:
    """Every job, newest first, with ranks seen, total point-to-point traffic sent and its
    runs (job_runs)."""
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
    jobs = [dict(row._mapping) for row in session.execute(query)]
    runs: dict[str, list[dict]] = {}
    for run in _runs(session, None):
        runs.setdefault(run.pop("job"), []).append(run)
    return [{**job, "runs": runs.get(job["job"], [])} for job in jobs]


def get_job(session: Session, job_key: str) -> Job | None:
    """The job with this key, or None."""
    return session.scalars(select(Job).where(Job.job_key == job_key)).one_or_none()


def get_run(session: Session, job_id: int, ordinal: int) -> Run | None:
    """Run number `ordinal` (1, 2, ...) of a job, or None."""
    query = select(Run).where(Run.job_id == job_id, Run.ordinal == ordinal)
    return session.scalars(query).one_or_none()


def job_runs(session: Session, job_id: int) -> list[dict]:
    """The runs of a job by ordinal: kind, label, size, status, times, ranks (or processes)
    seen, command and user."""
    return [{k: v for k, v in run.items() if k != "job"} for run in _runs(session, job_id)]


def _runs(session: Session, job_id: int | None) -> list[dict]:
    """Runs of one job (or of every job, None) by job and ordinal, with their job key."""
    ranks = select(Rank.run_id, func.count().label("ranks_seen")).group_by(Rank.run_id).subquery()
    query = (
        select(
            Job.job_key.label("job"),
            Run.ordinal.label("run"),
            Run.kind,
            Run.label,
            Run.world_size,
            func.coalesce(Run.command, "").label("command"),
            func.coalesce(Run.user, "").label("user"),
            Run.status,
            Run.started_ns,
            Run.last_seen_ns,
            Run.finished_ns,
            func.coalesce(ranks.c.ranks_seen, 0).label("ranks_seen"),
        )
        .join(Job, Job.id == Run.job_id)
        .outerjoin(ranks, ranks.c.run_id == Run.id)
        .order_by(Run.job_id, Run.ordinal)
    )
    if job_id is not None:
        query = query.where(Run.job_id == job_id)
    return [dict(row._mapping) for row in session.execute(query)]


def p2p_matrix(session: Session, scope: Scope) -> list[dict]:
    """Bytes and messages sent per (source rank, destination rank) over the scope."""
    query = (
        select(
            P2PDelta.world_rank.label("src"),
            P2PDelta.peer.label("dst"),
            func.sum(P2PDelta.bytes_sent).label("bytes"),
            func.sum(P2PDelta.msgs_sent).label("messages"),
        )
        .where(*scope.rows(P2PDelta))
        .group_by(P2PDelta.world_rank, P2PDelta.peer)
        .having(func.sum(P2PDelta.msgs_sent) > 0)
        .order_by(P2PDelta.world_rank, P2PDelta.peer)
    )
    return [dict(row._mapping) for row in session.execute(query)]


def job_ops(session: Session, scope: Scope) -> list[dict]:
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
        .where(*scope.rows(OpDelta))
        .group_by(OpDelta.op_id)
        .having(calls > 0)
    )
    rows = [
        {
            "op": _op_name(row.op_id),
            "category": _op_category(row.op_id),
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


def job_io(session: Session, scope: Scope) -> list[dict]:
    """File-system I/O per (layer, path) over all ranks and intervals of the job, most bytes
    (read + written) first. Mount and file-system type are those the ranks reported; should
    ranks disagree (a node-local path on different hosts), the distinct values are joined
    with ", "."""
    sums = {name: func.sum(getattr(IoDelta, name)) for name in IO_COUNTERS}

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
        .where(*scope.rows(IoDelta))
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


#: comm_id of the collectives' overflow key (communicators beyond STACKLENS_MAX_KEYS).
OVERFLOW_COMM_ID = 0xFFFFFFFF


def _op_name(op_id: int) -> str:
    # The collector accepts only op ids of its spec; an older server may not know a newer
    # spec's appended ids: they are still listed (by id, category "other").
    names = op_names()
    return names[op_id] if op_id < len(names) else f"op {op_id}"


def _op_category(op_id: int) -> str:
    categories = op_categories()
    return categories[op_id] if op_id < len(categories) else "other"


def job_collectives(session: Session, scope: Scope) -> list[dict]:
    """Collective calls, bytes and time per (communicator, op, root) over all ranks and
    intervals of the job, with the number of ranks that called it; only rows with calls,
    heaviest time first (then op name, communicator id, root)."""
    calls = func.sum(CollDelta.calls)
    query = (
        select(
            CollDelta.op_id,
            CollDelta.comm_id,
            CollDelta.comm_size,
            CollDelta.root,
            func.count(distinct(CollDelta.world_rank)).filter(CollDelta.calls > 0).label("ranks"),
            calls.label("calls"),
            func.sum(CollDelta.bytes).label("bytes"),
            func.sum(CollDelta.time_ns).label("time_ns"),
        )
        .where(*scope.rows(CollDelta))
        .group_by(CollDelta.op_id, CollDelta.comm_id, CollDelta.comm_size, CollDelta.root)
        .having(calls > 0)
    )
    rows = [
        {
            "op": _op_name(row.op_id),
            "comm_id": int(row.comm_id),
            "comm_size": int(row.comm_size),
            "root": int(row.root),
            **{k: int(row._mapping[k]) for k in ("ranks", "calls", "bytes", "time_ns")},
        }
        for row in session.execute(query)
    ]
    return sorted(rows, key=lambda r: (-r["time_ns"], r["op"], r["comm_id"], r["root"]))


def communicator_totals(session: Session, scope: Scope) -> list[dict]:
    """Collective calls, bytes and time per communicator (id and size) of the job, with the
    ranks that called any collective on it and its distinct (op, root) pairs; heaviest time
    first (then by id)."""
    calls = func.sum(CollDelta.calls)
    with_calls = CollDelta.calls > 0
    query = (
        select(
            CollDelta.comm_id,
            CollDelta.comm_size,
            func.count(distinct(CollDelta.world_rank)).filter(with_calls).label("ranks"),
            func.count(distinct(func.row(CollDelta.op_id, CollDelta.root)))
            .filter(with_calls)
            .label("ops"),
            calls.label("calls"),
            func.sum(CollDelta.bytes).label("bytes"),
            func.sum(CollDelta.time_ns).label("time_ns"),
        )
        .where(*scope.rows(CollDelta))
        .group_by(CollDelta.comm_id, CollDelta.comm_size)
        .having(calls > 0)
        .order_by(func.sum(CollDelta.time_ns).desc(), CollDelta.comm_id, CollDelta.comm_size)
    )
    return [
        {
            "comm_id": int(row.comm_id),
            "comm_size": int(row.comm_size),
            "overflow": row.comm_id == OVERFLOW_COMM_ID,
            **{k: int(row._mapping[k]) for k in ("ranks", "ops", "calls", "bytes", "time_ns")},
        }
        for row in session.execute(query)
    ]


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """Byte range [lower, upper) of a log2 size bucket: 0 holds empty messages, b holds
    [2^(b-1), 2^b)."""
    return (0, 1) if bucket == 0 else (1 << (bucket - 1), 1 << bucket)


def job_sizes(session: Session, scope: Scope) -> list[dict]:
    """Message-size histogram per op over all ranks and intervals of the job: only buckets
    with messages, smallest first; ops with the most messages first (then by name)."""
    count = func.sum(OpHistDelta.count)
    query = (
        select(OpHistDelta.op_id, OpHistDelta.bucket, count.label("count"))
        .where(*scope.rows(OpHistDelta))
        .group_by(OpHistDelta.op_id, OpHistDelta.bucket)
        .having(count > 0)
        .order_by(OpHistDelta.op_id, OpHistDelta.bucket)
    )
    ops: dict[int, dict] = {}
    for row in session.execute(query):
        op = ops.setdefault(
            row.op_id,
            {
                "op": _op_name(row.op_id),
                "category": _op_category(row.op_id),
                "messages": 0,
                "buckets": [],
            },
        )
        lower, upper = bucket_bounds(row.bucket)
        op["messages"] += int(row.count)
        bucket = {"bucket": row.bucket, "lower_bytes": lower, "upper_bytes": upper}
        op["buckets"].append({**bucket, "count": int(row.count)})
    return sorted(ops.values(), key=lambda o: (-o["messages"], o["op"]))


def job_rma(session: Session, scope: Scope) -> tuple[list[dict], list[dict]]:
    """One-sided traffic of the job: (per op, most bytes first then by name; per (origin,
    target) pair with calls, by origin then target, each with its ops by name)."""
    calls = func.sum(RmaDelta.calls)
    query = (
        select(
            RmaDelta.world_rank,
            RmaDelta.target,
            RmaDelta.op_id,
            calls.label("calls"),
            func.sum(RmaDelta.bytes).label("bytes"),
        )
        .where(*scope.rows(RmaDelta))
        .group_by(RmaDelta.world_rank, RmaDelta.target, RmaDelta.op_id)
        .having(calls > 0)
    )
    cells: dict[tuple[int, int], dict] = {}
    ops: dict[str, dict] = {}
    for row in session.execute(query):
        name, n, nbytes = _op_name(row.op_id), int(row.calls), int(row.bytes)
        cell = cells.setdefault(
            (row.world_rank, row.target),
            {"origin": row.world_rank, "target": row.target, "calls": 0, "bytes": 0, "ops": []},
        )
        cell["calls"] += n
        cell["bytes"] += nbytes
        cell["ops"].append({"op": name, "calls": n, "bytes": nbytes})
        total = ops.setdefault(name, {"op": name, "calls": 0, "bytes": 0})
        total["calls"] += n
        total["bytes"] += nbytes
    for cell in cells.values():
        cell["ops"].sort(key=lambda o: o["op"])
    return (
        sorted(ops.values(), key=lambda o: (-o["bytes"], o["op"])),
        [cells[key] for key in sorted(cells)],
    )


def job_ranks(session: Session, scope: Scope) -> list[dict]:
    """Every rank (or non-MPI process) of the scope that reported, by run and world rank (a
    process's number): its run's ordinal, host, pid, first and last interval, status and
    the health counters (summed over its frames)."""
    query = (
        select(Rank, Run.ordinal)
        .join(Run, Run.id == Rank.run_id)
        .where(*scope.rows(Rank))
        .order_by(Run.ordinal, Rank.world_rank)
    )
    return [
        {
            "run": ordinal,
            "rank": r.world_rank,
            "host": r.host,
            "pid": r.pid,
            "first_seen_ns": r.first_seen_ns,
            "last_seen_ns": r.last_seen_ns,
            "finished": r.finished,
            "killed": r.killed,
            "status": "killed" if r.killed else "finished" if r.finished else "running",
            "keys_dropped": r.keys_dropped,
            "frames_dropped": r.frames_dropped,
            "frames_spooled": r.frames_spooled,
        }
        for r, ordinal in session.execute(query)
    ]
