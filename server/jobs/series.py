"""Queries of a job's values over time (routes call these; they never build SQL themselves).

A series cuts a closed window [from, to) into steps of `step_ns`; an interval belongs to the
step its *end* lies in (server.query_params), so the steps of a series add up exactly to
the window's totals. Every series reads the raw per-interval deltas of its window through
the delta tables' (job_id, t_end_ns) index, and sums in the database: one row per (step,
key) comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, distinct, func, literal, select, union_all
from sqlalchemy.orm import Session

from server.jobs.repository import Scope, op_display_category, op_display_name
from stacklens.constants import IO_LAYERS, OVERFLOW_COMM_ID
from stacklens.mpi_ops import CATEGORIES
from stacklens.schema import CollDelta, IoDelta, OpDelta, OpFrames, P2PDelta, Rank

#: What a series can be keyed by.
BY = ("category", "op", "rank", "file", "peer")

#: The values of each point, per kind of key.
METRICS: dict[str, tuple[str, ...]] = {
    "category": ("calls", "bytes", "time_ns"),
    "op": ("calls", "bytes", "time_ns"),
    "rank": ("mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes", "io_time_ns"),
    "file": ("reads", "writes", "bytes_read", "bytes_written", "time_ns"),
    "peer": ("bytes_sent", "msgs_sent"),
}

#: The key of a file-system layer's I/O among the categories ("fs:POSIX", ...): file I/O of
#: the program (POSIX, stdio, MPI-IO layers), beside the MPI categories.
FS_PREFIX = "fs:"

#: Steps a series is cut into when the caller gives none: the smallest of these that
#: keeps the window within MAX_AUTO_STEPS steps.
NICE_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_AUTO_STEPS = 600

#: The most steps a series may have (a given step over a long window).
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Steps:
    """A window cut into steps: [from_ns, to_ns) by step_ns."""

    from_ns: int
    to_ns: int
    step_ns: int

    def start(self, t_end: Any) -> ColumnElement[int]:
        """SQL: the start of the step an interval ending at `t_end` is in."""
        origin, step = literal(self.from_ns, BigInteger), literal(self.step_ns, BigInteger)
        start: ColumnElement[int] = origin + (t_end - origin) // step * step
        return start


def auto_step_ns(span_ns: int) -> int:
    """The step for a window of `span_ns` when none is given."""
    for step_s in NICE_STEPS_S:
        if span_ns <= step_s * 10**9 * MAX_AUTO_STEPS:
            return step_s * 10**9
    return -(-span_ns // MAX_AUTO_STEPS)


def series(session: Session, scope: Scope, steps: Steps, by: str) -> list[dict[str, Any]]:
    """Points {t_ns, key, values} of the scope's window by step, keyed `by` (one of BY),
    by step then key (ranks and peers numerically); values in METRICS[by] order; keys
    with nothing in a step are left out."""
    points = _READERS[by](session, scope, steps)
    return sorted(points, key=lambda p: (p["t_ns"], p.pop("order")))


def _op_sums(session: Session, scope: Scope, steps: Steps) -> list[Any]:
    """(t, op_id, calls, bytes, time_ns) per step and op with calls."""
    t = steps.start(OpDelta.t_end_ns).label("at")
    query = (
        select(
            t,
            OpDelta.op_id,
            func.sum(OpDelta.calls).label("calls"),
            func.sum(OpDelta.bytes).label("bytes"),
            func.sum(OpDelta.time_ns).label("time_ns"),
        )
        .where(*scope.rows(OpDelta))
        .group_by(t, OpDelta.op_id)
        .having(func.sum(OpDelta.calls) > 0)
    )
    return list(session.execute(query))


def _by_op(session: Session, scope: Scope, steps: Steps) -> list[dict[str, Any]]:
    points = []
    for r in _op_sums(session, scope, steps):
        name = op_display_name(r.op_id)
        points.append(_point(r.at, name, name, r.calls, r.bytes, r.time_ns))
    return points


def _io_sums() -> tuple[ColumnElement[Any], ...]:
    return (
        func.sum(IoDelta.reads).label("reads"),
        func.sum(IoDelta.writes).label("writes"),
        func.sum(IoDelta.bytes_read).label("bytes_read"),
        func.sum(IoDelta.bytes_written).label("bytes_written"),
        func.sum(IoDelta.read_time_ns + IoDelta.write_time_ns + IoDelta.meta_time_ns).label(
            "time_ns"
        ),
    )


def _by_category(session: Session, scope: Scope, steps: Steps) -> list[dict[str, Any]]:
    sums: dict[tuple[int, str], list[int]] = {}
    for r in _op_sums(session, scope, steps):
        total = sums.setdefault((int(r.at), op_display_category(r.op_id)), [0, 0, 0])
        for i, value in enumerate((r.calls, r.bytes, r.time_ns)):
            total[i] += int(value)
    t = steps.start(IoDelta.t_end_ns).label("at")
    io = (
        select(t, IoDelta.layer, *_io_sums())
        .where(*scope.rows(IoDelta), IoDelta.phase == 0)
        .group_by(t, IoDelta.layer)
    )
    for r in session.execute(io):
        layer = f"{FS_PREFIX}{IO_LAYERS.get(r.layer, f'layer {r.layer}')}"
        sums[(int(r.at), layer)] = [int(r.reads + r.writes), int(r.bytes_read + r.bytes_written),
                              int(r.time_ns)]  # fmt: skip
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return [
        {"t_ns": t_ns, "key": key, "values": values, "order": (order.get(key, len(order)), key)}
        for (t_ns, key), values in sums.items()
    ]


def _by_rank(session: Session, scope: Scope, steps: Steps) -> list[dict[str, Any]]:
    values: dict[tuple[int, int], list[int]] = {}

    def add(t_ns: int, rank: int, first: int, *parts: int) -> None:
        row = values.setdefault((t_ns, rank), [0] * len(METRICS["rank"]))
        for i, part in enumerate(parts):
            row[first + i] += int(part)

    t = steps.start(OpDelta.t_end_ns).label("at")
    ops = (
        select(t, OpDelta.world_rank, func.sum(OpDelta.calls), func.sum(OpDelta.time_ns))
        .where(*scope.rows(OpDelta))
        .group_by(t, OpDelta.world_rank)
    )
    for op_row in session.execute(ops):
        add(int(op_row[0]), op_row[1], 0, op_row[2], op_row[3])
    t = steps.start(P2PDelta.t_end_ns).label("at")
    p2p = (
        select(t, P2PDelta.world_rank, func.sum(P2PDelta.bytes_sent))
        .where(*scope.rows(P2PDelta))
        .group_by(t, P2PDelta.world_rank)
    )
    for p2p_row in session.execute(p2p):
        add(int(p2p_row[0]), p2p_row[1], 2, p2p_row[2])
    t = steps.start(IoDelta.t_end_ns).label("at")
    io = (
        select(t, IoDelta.world_rank, *_io_sums())
        .where(*scope.rows(IoDelta), IoDelta.phase == 0)
        .group_by(t, IoDelta.world_rank)
    )
    for r in session.execute(io):
        add(int(r.at), r.world_rank, 3, r.bytes_read + r.bytes_written, r.time_ns)
    return [
        {"t_ns": t_ns, "key": str(rank), "values": row, "order": rank}
        for (t_ns, rank), row in values.items()
    ]


def _by_file(session: Session, scope: Scope, steps: Steps) -> list[dict[str, Any]]:
    t = steps.start(IoDelta.t_end_ns).label("at")
    query = (
        select(t, IoDelta.layer, IoDelta.path, *_io_sums())
        .where(*scope.rows(IoDelta), IoDelta.phase == 0)
        .group_by(t, IoDelta.layer, IoDelta.path)
    )
    points = []
    for r in session.execute(query):
        key = f"{IO_LAYERS.get(r.layer, f'layer {r.layer}')}:{r.path}"
        values = [int(r.reads), int(r.writes), int(r.bytes_read), int(r.bytes_written),
                  int(r.time_ns)]  # fmt: skip
        points.append({"t_ns": int(r.at), "key": key, "values": values, "order": key})
    return points


def _by_peer(session: Session, scope: Scope, steps: Steps) -> list[dict[str, Any]]:
    t = steps.start(P2PDelta.t_end_ns).label("at")
    query = (
        select(t, P2PDelta.peer, func.sum(P2PDelta.bytes_sent), func.sum(P2PDelta.msgs_sent))
        .where(*scope.rows(P2PDelta))
        .group_by(t, P2PDelta.peer)
        .having(func.sum(P2PDelta.msgs_sent) > 0)
    )
    return [
        {"t_ns": int(r[0]), "key": str(r[1]), "values": [int(r[2]), int(r[3])], "order": r[1]}
        for r in session.execute(query)
    ]


@dataclass(frozen=True)
class ProfileRows:
    """What server.jobs.profile needs of a scope's window, as plain tuples."""

    ranks: list[int]  # the ranks seen during the window
    elapsed: list[tuple[int, int, int]]  # (step, rank, ns covered by its intervals)
    ops: list[tuple[int, int, str, str, int]]  # (step, rank, op, category, time_ns)
    io: list[tuple[int, int, int]]  # (step, rank, POSIX + stdio time_ns)
    coll: list[tuple[int, int, str, int, int]]  # (comm_id, comm_size, op, rank, time_ns)


#: The I/O layers whose time is the program's file I/O in a profile (MPI-IO's time is that
#: of the MPI_File calls, counted from the op table; its own POSIX calls are not counted
#: by the hooks, being inside MPI).
PROFILE_IO_LAYERS = tuple(k for k, name in IO_LAYERS.items() if name in ("POSIX", "stdio"))


def profile_rows(session: Session, scope: Scope, steps: Steps) -> ProfileRows:
    """The ranks seen during the window; per step and rank: the time its intervals cover,
    time inside each MPI op and in POSIX/stdio I/O; time per rank inside each collective per
    communicator over the window."""
    ranks = select(distinct(Rank.world_rank)).where(*scope.rows(Rank)).order_by(Rank.world_rank)
    seen = [int(r) for r in session.scalars(ranks)]
    elapsed = [(int(r[0]), int(r[1]), int(r[2])) for r in session.execute(_elapsed(scope, steps))]
    t = steps.start(OpDelta.t_end_ns).label("at")
    op_query = (
        select(t, OpDelta.world_rank, OpDelta.op_id, func.sum(OpDelta.time_ns))
        .where(*scope.rows(OpDelta))
        .group_by(t, OpDelta.world_rank, OpDelta.op_id)
    )
    ops = [
        (int(r[0]), int(r[1]), op_display_name(r[2]), op_display_category(r[2]), int(r[3]))
        for r in session.execute(op_query)
    ]
    t = steps.start(IoDelta.t_end_ns).label("at")
    io_time = IoDelta.read_time_ns + IoDelta.write_time_ns + IoDelta.meta_time_ns
    io_query = (
        select(t, IoDelta.world_rank, func.sum(io_time))
        .where(*scope.rows(IoDelta), IoDelta.phase == 0, IoDelta.layer.in_(PROFILE_IO_LAYERS))
        .group_by(t, IoDelta.world_rank)
    )
    io = [(int(r[0]), int(r[1]), int(r[2])) for r in session.execute(io_query)]
    c = CollDelta
    coll_query = (
        select(c.comm_id, c.comm_size, c.op_id, c.world_rank, func.sum(c.time_ns))
        .where(*scope.rows(c), c.comm_id != OVERFLOW_COMM_ID)
        .group_by(c.comm_id, c.comm_size, c.op_id, c.world_rank)
        .having(func.sum(c.calls) > 0)
    )
    coll = [
        (int(r[0]), int(r[1]), op_display_name(r[2]), int(r[3]), int(r[4]))
        for r in session.execute(coll_query)
    ]
    return ProfileRows(seen, elapsed, ops, io, coll)


def _elapsed(scope: Scope, steps: Steps) -> Any:
    """Per step and rank, the time its intervals ending in the step cover: for each run,
    the last interval end minus the first interval start among the intervals that stored
    anything (an MPI call or file I/O; a rank's intervals follow one another without gaps,
    so this is exact unless an interval at the very start or end of a step had neither)."""
    frames = union_all(
        *(
            select(f.run_id, f.world_rank, f.t_start_ns, f.t_end_ns).where(*scope.rows(f))
            for f in (OpFrames, IoDelta)
        )
    ).subquery()
    t = steps.start(frames.c.t_end_ns).label("at")
    per_run = (
        select(
            t,
            frames.c.world_rank,
            (func.max(frames.c.t_end_ns) - func.min(frames.c.t_start_ns)).label("ns"),
        )
        .group_by(t, frames.c.run_id, frames.c.world_rank)
        .subquery()
    )
    return select(per_run.c.at, per_run.c.world_rank, func.sum(per_run.c.ns)).group_by(
        per_run.c.at, per_run.c.world_rank
    )


def _point(t_ns: int, key: str, order: Any, *values: int) -> dict[str, Any]:
    return {"t_ns": int(t_ns), "key": key, "values": [int(v) for v in values], "order": order}


_READERS: dict[str, Callable[[Session, Scope, Steps], list[dict[str, Any]]]] = {
    "category": _by_category,
    "op": _by_op,
    "rank": _by_rank,
    "file": _by_file,
    "peer": _by_peer,
}
