"""Queries of a job's values over time (routes call these; they never build SQL themselves).

A series cuts a half-open window [from, to) into steps of `step_ns`; an interval belongs
to the step its *end* lies in (server.query_params), so the steps of a series add up
exactly to the window's totals. Steps of whole seconds from a whole second read the
per-second op rollups, steps of whole minutes from a whole minute the per-rank minute
rollups (collector/store/rollups.py), for the minutes rolled up; the rest (other steps,
minutes not rolled up yet, a window's partial last second or minute) comes from the raw
per-interval deltas through the delta tables' (job_id, t_end_ns) index. Sums are made in
the database: one row per (step, key) comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, func, literal, or_, select, union_all
from sqlalchemy.orm import Session

from collector.store.rollups import MINUTE_NS, SECOND_NS
from server.jobs.repository import Scope, op_display_category, op_display_name
from stacklens.constants import IO_LAYERS, OVERFLOW_COMM_ID
from stacklens.mpi_ops import CATEGORIES
from stacklens.schema import (
    CollDelta,
    CollMinute,
    IoDelta,
    OpDelta,
    OpFrames,
    OpSecond,
    P2PDelta,
    P2PMinute,
    Rank,
    RankMinute,
    RankOpMinute,
    RollupDirty,
)

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

#: The most rank x step cells of a profile whose step is chosen (a heat map's worth).
MAX_PROFILE_CELLS = 65_536

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


def auto_step_ns(span_ns: int, max_steps: int = MAX_AUTO_STEPS) -> int:
    """The step for a window of `span_ns` when none is given: the smallest of NICE_STEPS_S
    that keeps it within `max_steps` steps."""
    for step_s in NICE_STEPS_S:
        if span_ns <= step_s * 10**9 * max_steps:
            return step_s * 10**9
    return -(-span_ns // max_steps)


def profile_max_steps(ranks: int) -> int:
    """The most steps a profile's chosen step gives a job of `ranks` ranks: its rank x step
    cells within MAX_PROFILE_CELLS (and at most MAX_AUTO_STEPS steps)."""
    return max(1, min(MAX_AUTO_STEPS, MAX_PROFILE_CELLS // max(ranks, 1)))


def series(session: Session, scope: Scope, steps: Steps, by: str) -> list[dict[str, Any]]:
    """Points {t_ns, key, values} of the scope's window by step, keyed `by` (one of BY),
    by step then key (ranks and peers numerically); values in METRICS[by] order; keys
    with nothing in a step are left out."""
    points = _READERS[by](session, scope, steps)
    return sorted(points, key=lambda p: (p["t_ns"], p.pop("order")))


def _op_sums(session: Session, scope: Scope, steps: Steps) -> list[Any]:
    """(at, op_id, calls, bytes, time_ns) per step and op with calls: from the per-second
    rollups (`op_seconds`) where the steps are whole seconds from a whole second, from the
    raw deltas otherwise and for the minutes not rolled up yet."""
    t = steps.start(OpDelta.t_end_ns).label("at")
    sums = (_sum(OpDelta.calls, "calls"), _sum(OpDelta.bytes, "bytes"),
            _sum(OpDelta.time_ns, "time_ns"))  # fmt: skip
    raw = select(t, OpDelta.op_id, *sums).where(*scope.rows(OpDelta))
    if steps.from_ns % SECOND_NS or steps.step_ns % SECOND_NS:
        query = raw.group_by(t, OpDelta.op_id).having(func.sum(OpDelta.calls) > 0)
        return list(session.execute(query))
    dirty = _dirty_minutes(session, scope, steps)
    both = union_all(*_op_parts(scope, steps, raw, t, dirty)).subquery()
    query = (
        select(both.c.at, both.c.op_id, _sum(both.c.calls, "calls"),
               _sum(both.c.bytes, "bytes"), _sum(both.c.time_ns, "time_ns"))
        .group_by(both.c.at, both.c.op_id)
        .having(func.sum(both.c.calls) > 0)
    )  # fmt: skip
    return list(session.execute(query))


def _sum(column: Any, name: str) -> Any:
    """SQL: the sum of a bigint column as a bigint (PostgreSQL sums bigints as numeric,
    which the driver reads as Decimal, slowly; the sums here stay far below 2^63)."""
    return func.sum(column).cast(BigInteger).label(name)


def _op_parts(scope: Scope, steps: Steps, raw: Any, t: Any, dirty: list[int]) -> list[Any]:
    """The rolled-up and the raw parts of whole-second steps: the window's whole seconds
    from `op_seconds` unless their minute is among the `dirty` ones, and the intervals of
    dirty minutes and of the window's last, partial second from the raw deltas (`raw`, a
    select of the scope's op deltas by their step `t`)."""
    lo, hi = steps.from_ns, steps.to_ns
    last = hi // SECOND_NS * SECOND_NS
    o = OpSecond
    runs = [] if scope.run_id is None else [o.run_id == scope.run_id]
    at = steps.start(o.second_ns).label("at")
    rolled = (
        select(at, o.op_id, func.sum(o.calls).label("calls"), func.sum(o.bytes).label("bytes"),
               func.sum(o.time_ns).label("time_ns"))
        .where(o.job_id == scope.job_id, o.second_ns >= lo, o.second_ns < last, *runs)
        .where(*_outside(o.second_ns, dirty))
        .group_by(at, o.op_id)
    )  # fmt: skip
    parts = [rolled, raw.where(OpDelta.t_end_ns >= last).group_by(t, OpDelta.op_id)]
    if dirty:
        in_dirty = raw.where(_inside(OpDelta.t_end_ns, dirty), OpDelta.t_end_ns < last)
        parts.append(in_dirty.group_by(t, OpDelta.op_id))
    return parts


def _dirty_minutes(session: Session, scope: Scope, steps: Steps) -> list[int]:
    """The minutes of the scope's job in the window of `steps` not rolled up yet (any run):
    read raw. (A minute rolled up after this read is read from its rollup, one made dirty
    after it from its previous rollup: as of this read, never counted twice.)"""
    query = (
        select(RollupDirty.minute_ns)
        .where(RollupDirty.job_id == scope.job_id)
        .where(RollupDirty.minute_ns >= steps.from_ns // MINUTE_NS * MINUTE_NS)
        .where(RollupDirty.minute_ns < steps.to_ns)
        .distinct()
        .order_by(RollupDirty.minute_ns)
    )
    return [int(m) for m in session.scalars(query)]


def _ranges(minutes: list[int]) -> list[tuple[int, int]]:
    """Sorted minute starts as [start, end) ranges of consecutive minutes."""
    ranges: list[tuple[int, int]] = []
    for m in minutes:
        if ranges and ranges[-1][1] == m:
            ranges[-1] = (ranges[-1][0], m + MINUTE_NS)
        else:
            ranges.append((m, m + MINUTE_NS))
    return ranges


def _inside(t_ns: Any, minutes: list[int]) -> ColumnElement[bool]:
    """SQL: `t_ns` lies in one of the minutes."""
    return or_(*((t_ns >= a) & (t_ns < b) for a, b in _ranges(minutes)))


def _outside(t_ns: Any, minutes: list[int]) -> list[ColumnElement[bool]]:
    """SQL conditions: `t_ns` lies in none of the minutes."""
    return [~((t_ns >= a) & (t_ns < b)) for a, b in _ranges(minutes)]


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
    categories: dict[int, str] = {}
    for at, op_id, calls, nbytes, time_ns in _op_sums(session, scope, steps):
        if op_id not in categories:
            categories[op_id] = op_display_category(op_id)
        key = (at, categories[op_id])
        total = sums.get(key)
        if total is None:
            sums[key] = [calls, nbytes, time_ns]
        else:
            total[0], total[1], total[2] = total[0] + calls, total[1] + nbytes, total[2] + time_ns
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

    r, o = RankOpMinute, OpDelta
    op_rows = _rows_of(session, scope, steps, (r, [r.world_rank, r.calls, r.time_ns]),
                       (o, [o.world_rank, o.calls, o.time_ns]))  # fmt: skip
    keys = (op_rows.c.at, op_rows.c.world_rank)
    ops = select(*keys, _sum(op_rows.c.calls, "calls"), _sum(op_rows.c.time_ns, "time_ns"))
    ops = ops.group_by(*keys)
    for op_row in session.execute(ops):
        add(int(op_row[0]), op_row[1], 0, op_row[2], op_row[3])
    m, d = P2PMinute, P2PDelta
    p2p_rows = _rows_of(session, scope, steps, (m, [m.world_rank, m.bytes_sent]),
                        (d, [d.world_rank, d.bytes_sent]))  # fmt: skip
    keys = (p2p_rows.c.at, p2p_rows.c.world_rank)
    p2p = select(*keys, _sum(p2p_rows.c.bytes_sent, "bytes_sent")).group_by(*keys)
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
    ranks = select(Rank.world_rank).where(*scope.rows(Rank)).distinct().order_by(Rank.world_rank)
    seen = [int(r) for r in session.scalars(ranks)]
    elapsed = [
        (int(r[0]), int(r[1]), int(r[2])) for r in session.execute(_elapsed(session, scope, steps))
    ]
    r, o = RankOpMinute, OpDelta
    op_rows = _rows_of(session, scope, steps, (r, [r.world_rank, r.op_id, r.time_ns]),
                       (o, [o.world_rank, o.op_id, o.time_ns]))  # fmt: skip
    keys = (op_rows.c.at, op_rows.c.world_rank, op_rows.c.op_id)
    op_query = select(*keys, _sum(op_rows.c.time_ns, "time_ns")).group_by(*keys)
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
    cm, cd = CollMinute, CollDelta
    coll_rows = _rows_of(
        session, scope, steps,
        (cm, [cm.comm_id, cm.comm_size, cm.op_id, cm.world_rank, cm.calls, cm.time_ns]),
        (cd, [cd.comm_id, cd.comm_size, cd.op_id, cd.world_rank, cd.calls, cd.time_ns]),
    )  # fmt: skip
    c = coll_rows.c
    coll_query = (
        select(c.comm_id, c.comm_size, c.op_id, c.world_rank, _sum(c.time_ns, "time_ns"))
        .where(c.comm_id != OVERFLOW_COMM_ID)
        .group_by(c.comm_id, c.comm_size, c.op_id, c.world_rank)
        .having(func.sum(c.calls) > 0)
    )
    coll = [
        (int(r[0]), int(r[1]), op_display_name(r[2]), int(r[3]), int(r[4]))
        for r in session.execute(coll_query)
    ]
    return ProfileRows(seen, elapsed, ops, io, coll)


def _elapsed(session: Session, scope: Scope, steps: Steps) -> Any:
    """Per step and rank, the time its intervals ending in the step cover: for each run,
    the last interval end minus the first interval start among the intervals that stored
    anything (an MPI call or file I/O; a rank's intervals follow one another without gaps,
    so this is exact unless an interval at the very start or end of a step had neither)."""
    m = RankMinute
    rows = _rows_of(
        session, scope, steps,
        (m, [m.run_id, m.world_rank, m.first_start_ns.label("t_start_ns"),
             m.last_end_ns.label("t_end_ns")]),
        *((f, [f.run_id, f.world_rank, f.t_start_ns, f.t_end_ns]) for f in (OpFrames, IoDelta)),
    )  # fmt: skip
    per_run = (
        select(rows.c.at, rows.c.world_rank,
               (func.max(rows.c.t_end_ns) - func.min(rows.c.t_start_ns)).label("ns"))
        .group_by(rows.c.at, rows.c.run_id, rows.c.world_rank)
        .subquery()
    )  # fmt: skip
    return select(per_run.c.at, per_run.c.world_rank, _sum(per_run.c.ns, "ns")).group_by(
        per_run.c.at, per_run.c.world_rank
    )


def _rows_of(session: Session, scope: Scope, steps: Steps, rolled: tuple[Any, list[Any]],
             *raw: tuple[Any, list[Any]]) -> Any:  # fmt: skip
    """A subquery of the rows (at: the step, then the given columns) of the scope's
    window, to be grouped by the caller: from a per-minute rollup (`rolled`: its table and
    columns) where the steps are whole minutes from a whole minute and the minute is
    rolled up, from the raw deltas (`raw`: tables and the same columns) otherwise, for the
    minutes not rolled up yet (_dirty_minutes) and the window's last, partial minute."""

    def raw_rows(table: Any, columns: list[Any]) -> Any:
        return select(steps.start(table.t_end_ns).label("at"), *columns).where(*scope.rows(table))

    if steps.from_ns % MINUTE_NS or steps.step_ns % MINUTE_NS:
        return union_all(*(raw_rows(t, c) for t, c in raw)).subquery()
    lo, hi = steps.from_ns, steps.to_ns
    last = hi // MINUTE_NS * MINUTE_NS
    dirty = _dirty_minutes(session, scope, steps)
    table, columns = rolled
    runs = [] if scope.run_id is None else [table.run_id == scope.run_id]
    parts = [
        select(steps.start(table.minute_ns).label("at"), *columns)
        .where(table.job_id == scope.job_id, table.minute_ns >= lo, table.minute_ns < last, *runs)
        .where(*_outside(table.minute_ns, dirty))
    ]  # fmt: skip
    for t, c in raw:
        parts.append(raw_rows(t, c).where(t.t_end_ns >= last, t.t_end_ns < hi))
        if dirty:
            parts.append(raw_rows(t, c).where(_inside(t.t_end_ns, dirty), t.t_end_ns < last))
    return union_all(*parts).subquery()


def _point(t_ns: int, key: str, order: Any, *values: int) -> dict[str, Any]:
    return {"t_ns": int(t_ns), "key": key, "values": [int(v) for v in values], "order": order}


_READERS: dict[str, Callable[[Session, Scope, Steps], list[dict[str, Any]]]] = {
    "category": _by_category,
    "op": _by_op,
    "rank": _by_rank,
    "file": _by_file,
    "peer": _by_peer,
}
