"""Queries of a job's values over time (routes call these; they never build SQL themselves).

A series cuts a half-open window [from, to) into steps of `step_ns`; an interval belongs
to the step its *end* lies in (server.query_params), so the steps of a series add up
exactly to the window's totals. Whole-second steps from a whole second read the
per-second rollups (`op_seconds`, `io_seconds`), whole-minute steps from a whole minute the
per-minute ones (`rank_value_minutes`, `peer_minutes`, and for the profile `rank_minutes`,
`rank_op_minutes`, `coll_minutes`) and whole-five-minute steps from a whole five minutes
the per-five-minute ones of these (`*_fives`: 5x fewer rows) for the five minutes none of
whose minutes is dirty (collector/store/rollups.py), for the minutes rolled up;
the rest (other steps, minutes not rolled up yet, a window's partial last second or minute)
comes from the raw per-interval deltas through the delta tables' (job_id, t_end_ns) index.

Sums, keys, order and the JSON text of the points are made in the database (one text
comes back, not one row per point). An answer holds at most MAX_POINTS points (steps x
keys with values): a longer one is refused (`TooLarge`, the route's 422 says which step
fits), never cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Integer,
    Text,
    distinct,
    false,
    func,
    literal,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy import text as text_sql
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import Grouping

from server import export
from server.jobs import profile
from server.jobs.repository import Scope, mpi_runs, op_display_name
from stacklens.constants import (
    CATEGORIES,
    FILE_IO_LAYERS,
    FIVE_NS,
    IO_LAYERS,
    MINUTE_NS,
    MPI_CATEGORIES,
    OVERFLOW_COMM_ID,
    SECOND_NS,
)
from stacklens.mpi_ops import (
    SHUTDOWN_CLASS,
    STARTUP_CLASS,
    op_categories,
    op_classes,
    op_names,
)
from stacklens.schema import (
    SHARE_CLASSES,
    CollDelta,
    CollFive,
    CollMinute,
    IoDelta,
    IoSecond,
    OpDelta,
    OpFrames,
    OpSecond,
    P2PDelta,
    PeerFive,
    PeerMinute,
    Rank,
    RankFive,
    RankMinute,
    RankOpFive,
    RankOpMinute,
    RankShareFive,
    RankValueFive,
    RankValueMinute,
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
#: keeps the window within MAX_AUTO_STEPS steps (and its points within MAX_POINTS).
NICE_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
MAX_AUTO_STEPS = 600

#: The most points (step x key with values) of a series answer (its cost grows with them:
#: ~80 bytes each; 300 ms on the loaded bench VM, bench/RESULTS.md): a 1,024-rank series has
#: at most 16 steps (a 1-hour window: 5-minute steps); 1-second steps of 1 hour fit 4 keys.
MAX_POINTS = 16_384

#: The most rank x step cells of a profile (a heat map's worth; ~240 bytes each).
MAX_PROFILE_CELLS = 16_384

#: The most steps a series may have (a given step over a long window).
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Steps:
    """A window cut into steps: [from_ns, to_ns) by step_ns."""

    from_ns: int
    to_ns: int
    step_ns: int

    @property
    def count(self) -> int:
        """How many steps the window has (the last one may be partial)."""
        return -(-(self.to_ns - self.from_ns) // self.step_ns)

    def start(self, t_end: Any) -> ColumnElement[int]:
        """SQL: the start of the step an interval ending at `t_end` is in."""
        origin, step = literal(self.from_ns, BigInteger), literal(self.step_ns, BigInteger)
        start: ColumnElement[int] = origin + (t_end - origin) // step * step
        return start


class TooLarge(Exception):
    """A series would hold more than MAX_POINTS points: `points`, of `keys` keys over the
    steps; `fits_ns`, the smallest step (of NICE_STEPS_S) that keeps `keys` keys within it,
    `chosen_ns` the step chosen for them when none is given. `counted`: the keys are
    those found with values (not the job's ranks, an upper bound): more than MAX_POINTS
    of them fit no step (one step holds a point per key), and the message says so and
    offers no step."""

    def __init__(self, by: str, steps: Steps, points: int, keys: int, counted: bool = True) -> None:
        self.points, self.keys = points, keys
        span = steps.to_ns - steps.from_ns
        self.fits_ns = auto_step_ns(span, max(1, MAX_POINTS // max(keys, 1)))
        self.chosen_ns = auto_step_ns(span, series_max_steps(keys))
        if counted and keys > MAX_POINTS:
            message = (
                f"by={by} has {keys:,} keys with values in the window, more than the "
                f"{MAX_POINTS:,} points an answer holds at any step: ask for a shorter window "
                "or one run"
            )
        else:
            message = (
                f"by={by} at step={steps.step_ns / 1e9:g} s over {span / 1e9:g} s is "
                f"{points:,} points ({keys:,} keys x {steps.count:,} steps), more than "
                f"{MAX_POINTS:,}: ask for step >= {self.fits_ns / 1e9:g} s or a shorter "
                "window, or leave step out (chosen to fit)"
            )
        super().__init__(message)


def auto_step_ns(span_ns: int, max_steps: int = MAX_AUTO_STEPS) -> int:
    """The step for a window of `span_ns` when none is given: the smallest of NICE_STEPS_S
    that keeps it within `max_steps` steps."""
    for step_s in NICE_STEPS_S:
        if span_ns <= step_s * 10**9 * max_steps:
            return step_s * 10**9
    return -(-span_ns // max_steps)


#: The most rank-seconds (ranks x window) a per-rank reading (series by rank or peer, the
#: profile) reads from the raw deltas at a chosen step under a minute (the per-rank rollups
#: are per minute): beyond it the chosen step is at least a minute. (A 1,024-rank job's last
#: 5 minutes at 30-second steps read 0.3 M raw frames, several seconds; at 1-minute steps
#: the rollups, 0.1 s.)
MAX_RAW_RANK_SECONDS = 65_536


def minute_steps(ranks: int, span_ns: int) -> bool:
    """Whether a per-rank reading of `ranks` ranks over `span_ns` takes whole-minute steps
    when its step is chosen (MAX_RAW_RANK_SECONDS)."""
    return max(ranks, 1) * span_ns > MAX_RAW_RANK_SECONDS * SECOND_NS


def series_max_steps(keys: int) -> int:
    """The most steps a chosen step gives a series of `keys` keys: its points within
    MAX_POINTS (and at most MAX_AUTO_STEPS steps)."""
    return max(1, min(MAX_AUTO_STEPS, MAX_POINTS // max(keys, 1)))


def profile_max_steps(ranks: int) -> int:
    """The most steps a profile's chosen step gives a job of `ranks` ranks: its rank x step
    cells within MAX_PROFILE_CELLS (and at most MAX_AUTO_STEPS steps)."""
    return max(1, min(MAX_AUTO_STEPS, MAX_PROFILE_CELLS // max(ranks, 1)))


def series_json(session: Session, scope: Scope, steps: Steps, by: str) -> str:
    """The points of the scope's window by step, keyed `by` (one of BY), as the text of a
    JSON array of {t_ns, key, values} (values in METRICS[by] order), by step then key
    (ranks and peers numerically, names by code point); keys with nothing in a step are
    left out. Raises TooLarge beyond MAX_POINTS points."""

    def piece(c: Any) -> Any:
        return func.concat(
            '{"t_ns":', c.at, ',"key":', func.to_json(c.key).cast(Text), ',"values":[',
            func.concat_ws(",", *(c[m] for m in METRICS[by])), "]}",
        )  # fmt: skip

    return f"[{_joined(session, scope, steps, by, piece, ',')}]"


def series_csv(session: Session, scope: Scope, steps: Steps, by: str) -> str:
    """The points of `series_json` as CSV text: a header line (t_ns, key, METRICS[by]),
    then one line per point, CRLF line ends, the key as server.export writes a text cell
    (`csv_field_sql`: never read as a formula, RFC 4180 quoting as Python's csv writer
    does). Made in the database like the JSON; TooLarge as there."""

    def piece(c: Any) -> Any:
        key = export.csv_field_sql(c.key)
        return func.concat_ws(",", c.at, key, *(c[m] for m in METRICS[by]))

    head = ",".join(["t_ns", "key", *METRICS[by]])
    body = _joined(session, scope, steps, by, piece, "\r\n")
    return f"{head}\r\n{body}\r\n" if body else f"{head}\r\n"


def _joined(
    session: Session, scope: Scope, steps: Steps, by: str, piece: Callable[[Any], Any], sep: str
) -> str:
    """The text of each point of the series (`piece` of its row: at, key, ord, METRICS[by])
    joined by `sep` in the series' order, made in the database; TooLarge beyond MAX_POINTS
    points."""
    # at most MAX_POINTS + 1 points are taken: one more says the answer is too large (a
    # CTE counting them all before building the text cost more than the sums themselves)
    c = _points(session, scope, steps, by).limit(MAX_POINTS + 1).subquery().c
    query = select(
        func.count(), func.string_agg(piece(c), aggregate_order_by(literal(sep), *_order(c)))
    )
    _roomy(session)
    n, body = session.execute(query).one()
    if n > MAX_POINTS:
        raise _too_large(session, scope, steps, by)
    return str(body or "")


def series_rows(session: Session, scope: Scope, steps: Steps, by: str) -> list[tuple[Any, ...]]:
    """The points of `series_json` as rows (t_ns, key, *values); TooLarge as there."""
    points = _points(session, scope, steps, by).subquery()
    c = points.c
    query = select(c.at, c.key, *(c[m] for m in METRICS[by])).order_by(*_order(c))
    _roomy(session)
    rows = [tuple(r) for r in session.execute(query.limit(MAX_POINTS + 1))]
    if len(rows) > MAX_POINTS:
        raise _too_large(session, scope, steps, by)
    return rows


def _too_large(session: Session, scope: Scope, steps: Steps, by: str) -> TooLarge:
    """The TooLarge error of a series found over MAX_POINTS points: how many, of how many
    keys (counted apart: only a refused answer needs them)."""
    c = _points(session, scope, steps, by).subquery().c
    n, keys = session.execute(select(func.count(), func.count(distinct(c.key)))).one()
    return TooLarge(by, steps, n, keys)


#: Memory for a read's sums and sorts (a series of MAX_POINTS points groups and sorts ~5 MB;
#: spilled to disk at the default 4 MB, it took twice as long).
READ_WORK_MEM = "64MB"


def _roomy(session: Session) -> None:
    """Gives the session's transaction READ_WORK_MEM."""
    session.execute(text_sql(f"SET LOCAL work_mem = '{READ_WORK_MEM}'"))


def _order(c: Any) -> list[Any]:
    return [c.at, c.ord, c.key.collate("C")]


def _points(session: Session, scope: Scope, steps: Steps, by: str) -> Any:
    """SQL: one row per step and key with values: at (the step's start), key (text), ord
    (the key's rank before its text: a category's place, a rank's number), then the
    METRICS[by] sums as bigints."""
    return _READERS[by](session, scope, steps)


@dataclass(frozen=True)
class _Source:
    """Rows of a table for a series: `columns` (same order and types in every source of
    one series) of the rows meeting `where`; `time` is a rollup's time column (the
    start of its second or minute), None for raw deltas (their t_end_ns)."""

    table: Any
    columns: Sequence[Any]
    where: Sequence[ColumnElement[bool]] = ()
    time: Any = None


def _rows(session: Session, scope: Scope, steps: Steps, grain: int,
          rolled: _Source | None, *raw: _Source, fives: _Source | None = None,
          skip: list[int] | None = None) -> Any:  # fmt: skip
    """A subquery of the rows (at: the step, then the sources' columns) of the scope's
    window, to be grouped by the caller: from a rollup (`rolled`, per second or minute:
    `grain`) where the steps are whole grains from a whole grain and the minute is rolled
    up; from the raw deltas (`raw`) otherwise, for the minutes not rolled up yet
    (_dirty_minutes) and the window's last, partial grain. With `fives` (the five-minute
    rollup of a minute rollup) and steps of whole five minutes from a whole five minutes,
    the five minutes of the window none of whose minutes is dirty are read from it, and
    only the others (and the window's last, partial five minutes) from `rolled`. The five
    minutes starting at `skip` are left out of every source (the caller reads them
    elsewhere)."""

    def kept(t_ns: Any) -> list[ColumnElement[bool]]:
        """The condition that `t_ns` lies outside the five minutes `skip` (as ranges of the
        window that an index can scan)."""
        if not skip:
            return []
        gaps, at = [], steps.from_ns
        for a, b in _ranges(skip, FIVE_NS):
            gaps.append((at, a))
            at = b
        gaps.append((at, steps.to_ns))
        return [or_(false(), *((t_ns >= a) & (t_ns < b) for a, b in gaps if a < b))]

    def raw_rows(s: _Source) -> Any:
        at = steps.start(s.table.t_end_ns).label("at")
        return select(at, *s.columns).where(*scope.rows(s.table), *s.where, *kept(s.table.t_end_ns))

    def rolled_rows(source: _Source, lo: int, hi: int) -> Any:
        table, time = source.table, source.time
        return (
            select(steps.start(time).label("at"), *source.columns)
            .where(table.job_id == scope.job_id, time >= lo, time < hi, *scope.of_runs(table),
                   *source.where, *kept(time))
        )  # fmt: skip

    if rolled is None or steps.from_ns % grain or steps.step_ns % grain:
        return union_all(*(raw_rows(s) for s in raw)).subquery()
    lo, hi = steps.from_ns, steps.to_ns
    last = hi // grain * grain
    dirty = _dirty_minutes(session, scope, steps)
    time = rolled.time
    if fives is None or steps.from_ns % FIVE_NS or steps.step_ns % FIVE_NS:
        parts = [rolled_rows(rolled, lo, last).where(*_outside(time, dirty))]
    else:
        last_five = hi // FIVE_NS * FIVE_NS
        dirty_fives = sorted({m // FIVE_NS * FIVE_NS for m in dirty})
        parts = [
            rolled_rows(fives, lo, last_five).where(*_outside(fives.time, dirty_fives, FIVE_NS)),
            rolled_rows(rolled, lo, last).where(
                *_outside(time, dirty),
                or_(time >= last_five, _inside(time, dirty_fives, FIVE_NS)),
            ),
        ]
    for s in raw:
        parts.append(raw_rows(s).where(s.table.t_end_ns >= last, s.table.t_end_ns < hi))
        if dirty:
            parts.append(raw_rows(s).where(_inside(s.table.t_end_ns, dirty),
                                           s.table.t_end_ns < last))  # fmt: skip
    return union_all(*parts).subquery()


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


def _ranges(starts: list[int], width: int) -> list[tuple[int, int]]:
    """Sorted starts of buckets `width` long as [start, end) ranges of consecutive ones."""
    ranges: list[tuple[int, int]] = []
    for m in starts:
        if ranges and ranges[-1][1] == m:
            ranges[-1] = (ranges[-1][0], m + width)
        else:
            ranges.append((m, m + width))
    return ranges


def _inside(t_ns: Any, starts: list[int], width: int = MINUTE_NS) -> ColumnElement[bool]:
    """SQL: `t_ns` lies in one of the buckets (minutes, or `width` long) starting at `starts`
    (false if there are none)."""
    return or_(false(), *((t_ns >= a) & (t_ns < b) for a, b in _ranges(starts, width)))


def _outside(t_ns: Any, starts: list[int], width: int = MINUTE_NS) -> list[ColumnElement[bool]]:
    """SQL conditions: `t_ns` lies in none of the buckets (as _inside)."""
    return [~((t_ns >= a) & (t_ns < b)) for a, b in _ranges(starts, width)]


def _sum(column: Any, name: str) -> Any:
    """SQL: the sum of a bigint column as a bigint (PostgreSQL sums bigints as numeric;
    the sums here stay far below 2^63)."""
    return func.sum(column).cast(BigInteger).label(name)


def _zero(name: str) -> Any:
    return literal(0, BigInteger).label(name)


def _by_id(items: Sequence[Any], kind: Any, op_id: Any) -> Any:
    """SQL: `items[op_id]` (NULL past its end), the list passed as one array parameter."""
    return Grouping(literal(list(items), ARRAY(kind)))[op_id + 1]


def _layer_name(layer: Any) -> Any:
    """SQL: the name of an I/O layer ("layer <n>" for one this server does not know)."""
    names = [IO_LAYERS.get(i, f"layer {i}") for i in range(max(IO_LAYERS) + 1)]
    return func.coalesce(_by_id(names, Text, layer), func.concat("layer ", layer))


#: The end of an open window read as one step (year 2116: past any interval).
_OPEN_END_NS = 2**62


def op_totals(session: Session, scope: Scope) -> list[tuple[int, int, int, int, int]]:
    """(op_id, calls, bytes, time_ns, ranks that called it) per op with calls over the
    scope's window, from the rollups where they serve it (`op_seconds`, and
    `rank_op_minutes`/`rank_op_fives` for the ranks; the raw deltas for what is not rolled
    up yet and for a window's partial end; the raw deltas alone for a window that starts
    within a minute): the same sums as the raw deltas, without reading a row per rank and
    interval where the rollups serve."""
    lo = 0 if scope.window.from_ns is None else scope.window.from_ns
    hi = _OPEN_END_NS if scope.window.to_ns is None else max(scope.window.to_ns, lo + 1)
    o = OpDelta
    if lo % MINUTE_NS:  # no rollup serves a window from within a minute: one raw pass
        calls = func.sum(o.calls)
        raw = (
            select(o.op_id, calls, func.sum(o.bytes), func.sum(o.time_ns),
                   func.count(distinct(o.world_rank)).filter(o.calls > 0))
            .where(*scope.rows(o)).group_by(o.op_id).having(calls > 0)
        )  # fmt: skip
        return [(int(a), int(b), int(c), int(d), int(e)) for a, b, c, d, e in session.execute(raw)]
    whole = Steps(lo, hi, -(-(hi - lo) // FIVE_NS) * FIVE_NS)
    totals = _per_op(session, scope, whole)

    def ranks(r: Any) -> _Source:
        return _Source(r, [r.op_id, r.world_rank], where=[r.calls > 0], time=r.minute_ns)

    rows = _rows(session, scope, whole, MINUTE_NS, ranks(RankOpMinute),
                 _Source(o, [o.op_id, o.world_rank], where=[o.calls > 0]),
                 fives=ranks(RankOpFive))  # fmt: skip
    callers = (
        select(rows.c.op_id, func.count(distinct(rows.c.world_rank)).label("ranks"))
        .group_by(rows.c.op_id)
        .subquery()
    )
    query = select(totals.c.op_id, totals.c.calls, totals.c.bytes, totals.c.time_ns,
                   func.coalesce(callers.c.ranks, 0)).outerjoin(
        callers, callers.c.op_id == totals.c.op_id)  # fmt: skip
    return [(int(a), int(b), int(c), int(d), int(e)) for a, b, c, d, e in session.execute(query)]


def _per_op(session: Session, scope: Scope, steps: Steps) -> Any:
    """SQL: (at, op_id, calls, bytes, time_ns) per step and op with calls."""
    o, s = OpDelta, OpSecond
    rows = _rows(
        session, scope, steps, SECOND_NS,
        _Source(s, [s.op_id, s.calls, s.bytes, s.time_ns], time=s.second_ns),
        _Source(o, [o.op_id, o.calls, o.bytes, o.time_ns]),
    )  # fmt: skip
    return (
        select(rows.c.at, rows.c.op_id, *(_sum(rows.c[m], m) for m in METRICS["op"]))
        .group_by(rows.c.at, rows.c.op_id)
        .having(func.sum(rows.c.calls) > 0)
        .subquery()
    )


def _by_op(session: Session, scope: Scope, steps: Steps) -> Any:
    ops = _per_op(session, scope, steps)
    name = func.coalesce(_by_id(op_names(), Text, ops.c.op_id), func.concat("op ", ops.c.op_id))
    return select(ops.c.at, name.label("key"), literal(0).label("ord"),
                  *(ops.c[m] for m in METRICS["op"]))  # fmt: skip


def _io_time(d: Any) -> Any:
    return d.read_time_ns + d.write_time_ns + d.meta_time_ns


def _by_category(session: Session, scope: Scope, steps: Steps) -> Any:
    # summed per category's place (an int array's item; a text array is walked to its
    # item), named after the sums: one row per step and category
    ops, places = _per_op(session, scope, steps), {c: i for i, c in enumerate(CATEGORIES)}
    place = func.coalesce(_by_id([places[c] for c in op_categories()], Integer, ops.c.op_id),
                          places["other"]).label("ord")  # fmt: skip
    per_place = (
        select(ops.c.at, place, *(_sum(ops.c[m], m) for m in METRICS["category"]))
        .group_by(ops.c.at, place)
        .subquery()
    )
    op_rows = select(per_place.c.at, _by_id(CATEGORIES, Text, per_place.c.ord).label("key"),
                     per_place.c.ord, *(per_place.c[m] for m in METRICS["category"]))  # fmt: skip
    d, s = IoDelta, IoSecond
    io = _rows(
        session, scope, steps, SECOND_NS,
        _Source(s, [s.layer, s.reads + s.writes, s.bytes_read + s.bytes_written, s.time_ns],
                [s.phase == 0], s.second_ns),
        _Source(d, [d.layer, d.reads + d.writes, d.bytes_read + d.bytes_written, _io_time(d)],
                [d.phase == 0]),
    )  # fmt: skip
    calls, nbytes, ns = (io.c[k] for k in list(io.c.keys())[2:])
    io_rows = (
        select(io.c.at, func.concat(FS_PREFIX, _layer_name(io.c.layer)).label("key"),
               literal(len(CATEGORIES)).label("ord"), _sum(calls, "calls"),
               _sum(nbytes, "bytes"), _sum(ns, "time_ns"))
        .group_by(io.c.at, io.c.layer)
    )  # fmt: skip
    return union_all(op_rows, io_rows)  # keys apart: categories, fs:<layer>


def _by_rank(session: Session, scope: Scope, steps: Steps) -> Any:
    """The ranks' series: of a whole job, its MPI runs' ranks (mpi_runs: a batch script's
    shell is not rank 0)."""
    scope = mpi_runs(session, scope)
    o, p, d = OpDelta, P2PDelta, IoDelta
    z = _zero

    def values(v: Any) -> _Source:
        return _Source(
            v, [v.world_rank, *(v.__table__.c[m] for m in METRICS["rank"])], time=v.minute_ns
        )

    rows = _rows(
        session, scope, steps, MINUTE_NS, values(RankValueMinute),
        _Source(o, [o.world_rank, o.calls, o.time_ns, z("b"), z("c"), z("d")]),
        _Source(p, [p.world_rank, z("a"), z("b"), p.bytes_sent, z("c"), z("d")]),
        _Source(d, [d.world_rank, z("a"), z("b"), z("c"), d.bytes_read + d.bytes_written,
                    _io_time(d)], [d.phase == 0]),
        fives=values(RankValueFive),
    )  # fmt: skip
    rank, sums = list(rows.c)[1], list(rows.c)[2:]
    return select(rows.c.at, rank.cast(Text).label("key"), rank.label("ord"),
                  *(_sum(c, m) for c, m in zip(sums, METRICS["rank"], strict=True))).group_by(
        rows.c.at, rank)  # fmt: skip


def _by_file(session: Session, scope: Scope, steps: Steps) -> Any:
    d, s = IoDelta, IoSecond
    rows = _rows(
        session, scope, steps, SECOND_NS,
        _Source(s, [s.layer, s.path, s.reads, s.writes, s.bytes_read, s.bytes_written,
                    s.time_ns], [s.phase == 0], s.second_ns),
        _Source(d, [d.layer, d.path, d.reads, d.writes, d.bytes_read, d.bytes_written,
                    _io_time(d)], [d.phase == 0]),
    )  # fmt: skip
    sums = list(rows.c)[3:]
    return (
        select(rows.c.at, func.concat(_layer_name(rows.c.layer), ":", rows.c.path).label("key"),
               literal(0).label("ord"),
               *(_sum(c, m) for c, m in zip(sums, METRICS["file"], strict=True)))
        .group_by(rows.c.at, rows.c.layer, rows.c.path)
    )  # fmt: skip


def _by_peer(session: Session, scope: Scope, steps: Steps) -> Any:
    d = P2PDelta

    def peers(m: Any) -> _Source:
        return _Source(m, [m.peer, m.bytes_sent, m.msgs_sent], time=m.minute_ns)

    rows = _rows(session, scope, steps, MINUTE_NS, peers(PeerMinute),
                 _Source(d, [d.peer, d.bytes_sent, d.msgs_sent]),
                 fives=peers(PeerFive))  # fmt: skip
    return (
        select(rows.c.at, rows.c.peer.cast(Text).label("key"), rows.c.peer.label("ord"),
               _sum(rows.c.bytes_sent, "bytes_sent"), _sum(rows.c.msgs_sent, "msgs_sent"))
        .group_by(rows.c.at, rows.c.peer)
        .having(func.sum(rows.c.msgs_sent) > 0)
    )  # fmt: skip


@dataclass(frozen=True)
class ProfileRows:
    """What server.jobs.profile needs of a scope's window."""

    ranks: list[int]  # the ranks seen during the window
    cells: int  # how many (step, rank) shares
    shares: str  # the shares as the text of a JSON array, by step then rank
    places: dict[str, dict[int, int]]  # profile.slow_ranks' places -> rank -> ns
    ops: dict[str, dict[int, int]]  # op (start-up and shutdown apart) -> rank -> time inside
    coll: list[tuple[int, int, str, int, int]]  # (comm_id, comm_size, op, rank, time_ns)

    def slow_ranks(
        self, site_of: Callable[[str, list[int]], dict[str, Any] | None] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """The late and waiting ranks and the collective imbalances (profile.slow_ranks)
        of these rows (their shares read only if a rank is named), with the call site of
        each named rank's op when `site_of` is given."""
        return profile.slow_ranks(
            self.ranks,
            self.places,
            self.ops,
            self.coll,
            lambda: profile_steps(self.shares),
            site_of,
        )


#: The columns of a share summed per (step, rank), in order: elapsed, the MPI categories,
#: then file I/O, start-up and shutdown (op_class's order).
_SHARE_PARTS = ("elapsed_ns", *SHARE_CLASSES)


def profile_rows(session: Session, scope: Scope, steps: Steps) -> ProfileRows:
    """The ranks seen during the window; per step and rank (JSON made in the database):
    the time its intervals cover, inside MPI per category, in file I/O (POSIX and stdio,
    and MPI-IO calls), start-up, shutdown and computation (server.jobs.profile); per rank
    over the window, the time its intervals cover (_window_elapsed), inside each MPI
    category, in file I/O and in shutdown, and inside each op; time per rank inside each
    collective per communicator over the window. A whole job's profile reads its MPI runs
    (mpi_runs: not a batch script's shell, numbered as rank 0 is)."""
    _roomy(session)
    scope = mpi_runs(session, scope)
    ranks = select(Rank.world_rank).where(*scope.rows(Rank)).distinct().order_by(Rank.world_rank)
    seen = [int(r) for r in session.scalars(ranks)]
    cells = _cells(session, scope, steps, _clean_fives(session, scope, steps)).cte("cells")
    c = cells.c
    piece = func.concat(
        '{"t_ns":', c.at, ',"rank":', c.world_rank, ',"elapsed_ns":', c.elapsed_ns,
        ',"mpi_ns":{',
        *(x for i, name in enumerate(MPI_CATEGORIES)
          for x in (f'{"," if i else ""}"{name}":', c[name])),
        '},"io_ns":', c.io_ns, ',"startup_ns":', c.startup_ns, ',"shutdown_ns":',
        c.shutdown_ns, ',"compute_ns":', c.compute_ns, "}",
    )  # fmt: skip
    summed = [*MPI_CATEGORIES, "io_ns", "shutdown_ns"]
    rank_totals = select(c.world_rank, *(func.sum(c[p]) for p in summed)).group_by(c.world_rank)
    per_op = _profile_ops(session, scope, steps).subquery("per_op")
    start_end = [i for i, k in enumerate(op_classes()) if k in (STARTUP_CLASS, SHUTDOWN_CLASS)]
    op_totals = (
        select(per_op.c.op_id, per_op.c.world_rank, func.sum(per_op.c.ns))
        .where(per_op.c.op_id.not_in(start_end))
        .group_by(per_op.c.op_id, per_op.c.world_rank)
    )

    def as_json(rows: Any) -> Any:
        t = rows.subquery()
        return select(func.json_agg(func.json_build_array(*t.c))).scalar_subquery()

    query = select(
        select(func.count()).select_from(cells).scalar_subquery(),
        select(func.string_agg(piece, aggregate_order_by(literal(","), c.at, c.world_rank)))
        .scalar_subquery(),
        as_json(rank_totals), as_json(op_totals),
        as_json(_window_elapsed(scope, steps)),
    )  # fmt: skip
    n, shares, by_rank, by_op, spans = session.execute(query).one()
    ops: dict[str, dict[int, int]] = {}
    for op_id, rank, ns in by_op or []:
        ops.setdefault(op_display_name(op_id), {})[rank] = int(ns)
    names = [*MPI_CATEGORIES, profile.FILE_IO, profile.SHUTDOWN]
    places: dict[str, dict[int, int]] = {name: {} for name in [profile.ELAPSED, *names]}
    for rank, *sums in by_rank or []:
        for name, ns in zip(names, sums, strict=True):
            places[name][rank] = int(ns)
    for rank, ns in spans or []:
        places[profile.ELAPSED][rank] = int(ns)
    coll = _profile_coll(session, scope, steps)
    return ProfileRows(seen, n, f"[{shares or ''}]", places, ops, coll)


def profile_steps(shares: str) -> dict[int, dict[int, int]]:
    """Each rank's time inside MPI (every MPI category) per step, from profile_rows'
    `shares` (every rank with intervals in a step has one there): step -> rank -> ns."""
    found: dict[int, dict[int, int]] = {}
    for share in json.loads(shares):
        found.setdefault(share["t_ns"], {})[share["rank"]] = sum(share["mpi_ns"].values())
    return found


def _op_classes(op_id: Any) -> Any:
    """SQL: op_class of an op id."""
    other = MPI_CATEGORIES.index("other")
    return func.coalesce(_by_id(op_classes(), Integer, op_id), other)


def _profile_ops(
    session: Session, scope: Scope, steps: Steps, skip: list[int] | None = None
) -> Any:
    """SQL: rows (at, world_rank, op_id, ns): time inside an op of a rank in a step (the
    five minutes starting at `skip` left out); a (step, rank, op) may have several rows
    (raw intervals, rollup rows of several minutes): sum them."""
    o = OpDelta

    def ops(r: Any) -> _Source:
        return _Source(r, [r.world_rank, r.op_id, r.time_ns], time=r.minute_ns)

    rows = _rows(session, scope, steps, MINUTE_NS, ops(RankOpMinute),
                 _Source(o, [o.world_rank, o.op_id, o.time_ns]), fives=ops(RankOpFive),
                 skip=skip)  # fmt: skip
    c = rows.c
    return select(c.at, c.world_rank, c.op_id, c.time_ns.label("ns"))


def _clean_fives(session: Session, scope: Scope, steps: Steps) -> list[int]:
    """The five minutes of the window whose shares are read from `rank_share_fives`: for a
    job's profile (all its runs) with steps of five minutes from a whole five minutes, each
    whole five minutes of the window none of whose minutes is dirty (none otherwise)."""
    whole = scope.run_id is None and scope.runs is None  # the fives sum every run
    if not whole or steps.step_ns != FIVE_NS or steps.from_ns % FIVE_NS:
        return []
    dirty = {m // FIVE_NS * FIVE_NS for m in _dirty_minutes(session, scope, steps)}
    return [f for f in range(steps.from_ns, steps.to_ns // FIVE_NS * FIVE_NS, FIVE_NS)
            if f not in dirty]  # fmt: skip


def _busy_compute(elapsed: Any, parts: dict[str, Any]) -> Any:
    """SQL: compute_ns of a share: elapsed - MPI - file I/O - shutdown, at least 0."""
    busy = sum((v for p, v in parts.items() if p != "startup_ns"), start=literal(0, BigInteger))
    return func.greatest(0, elapsed - busy).label("compute_ns")


def _cells(session: Session, scope: Scope, steps: Steps, clean: list[int]) -> Any:
    """SQL: the shares per (at, world_rank): _SHARE_PARTS, then compute_ns (_busy_compute).
    The five minutes `clean` (_clean_fives) are read from `rank_share_fives`; the rest is
    made from the per-op rows (_profile_ops, each op's class found once per row: a
    materialized CTE), the elapsed time and the file I/O: every step and rank with ops or
    file I/O has an elapsed time (its intervals are among those that stored anything), ops
    and I/O are joined to it."""
    elapsed = _elapsed(session, scope, steps, clean).subquery()
    ops = _profile_ops(session, scope, steps, clean).subquery()
    per_op = (
        select(ops.c.at, ops.c.world_rank, _op_classes(ops.c.op_id).label("cls"), ops.c.ns)
        .cte("per_op")
        .prefix_with("MATERIALIZED")
    )
    by_class = (
        select(per_op.c.at, per_op.c.world_rank,
               *(func.sum(per_op.c.ns).filter(per_op.c.cls == k).cast(BigInteger).label(name)
                 for k, name in enumerate(_SHARE_PARTS[1:])))
        .group_by(per_op.c.at, per_op.c.world_rank)
        .subquery()
    )  # fmt: skip
    d = IoDelta

    def file_io(v: Any) -> _Source:
        return _Source(v, [v.world_rank, v.file_io_ns], time=v.minute_ns)

    io_rows = _rows(session, scope, steps, MINUTE_NS, file_io(RankValueMinute),
                    _Source(d, [d.world_rank, _io_time(d).label("file_io_ns")],
                            [d.phase == 0, d.layer.in_(FILE_IO_LAYERS)]),
                    fives=file_io(RankValueFive), skip=clean)  # fmt: skip
    io = (
        select(io_rows.c.at, io_rows.c.world_rank, _sum(io_rows.c.file_io_ns, "ns"))
        .group_by(io_rows.c.at, io_rows.c.world_rank)
        .subquery()
    )
    parts = {"elapsed_ns": elapsed.c.ns}
    for name in _SHARE_PARTS[1:]:
        part = func.coalesce(by_class.c[name], 0)
        parts[name] = part + func.coalesce(io.c.ns, 0) if name == "io_ns" else part
    compute = _busy_compute(elapsed.c.ns, {p: v for p, v in parts.items() if p != "elapsed_ns"})
    same = (elapsed.c.at, elapsed.c.world_rank)
    made = (
        select(elapsed.c.at, elapsed.c.world_rank, *(v.label(p) for p, v in parts.items()),
               compute)
        .outerjoin(by_class, tuple_(by_class.c.at, by_class.c.world_rank) == tuple_(*same))
        .outerjoin(io, tuple_(io.c.at, io.c.world_rank) == tuple_(*same))
    )  # fmt: skip
    if not clean:
        return made
    f = RankShareFive.__table__.c
    ready = select(
        f.minute_ns.label("at"),
        f.world_rank,
        *(f[p] for p in _SHARE_PARTS),
        _busy_compute(f.elapsed_ns, {p: f[p] for p in SHARE_CLASSES}),
    ).where(f.job_id == scope.job_id, _inside(f.minute_ns, clean, FIVE_NS))
    return union_all(made, ready)


def _profile_coll(
    session: Session, scope: Scope, steps: Steps
) -> list[tuple[int, int, str, int, int]]:
    """(comm_id, comm_size, op, rank, time_ns) of every collective with calls over the
    window, per rank (overflow communicators left out)."""
    cd = CollDelta

    def colls(cm: Any) -> _Source:
        return _Source(
            cm,
            [cm.comm_id, cm.comm_size, cm.op_id, cm.world_rank, cm.calls, cm.time_ns],
            time=cm.minute_ns,
        )

    coll_rows = _rows(
        session, scope, steps, MINUTE_NS, colls(CollMinute),
        _Source(cd, [cd.comm_id, cd.comm_size, cd.op_id, cd.world_rank, cd.calls, cd.time_ns]),
        fives=colls(CollFive),
    )  # fmt: skip
    c = coll_rows.c
    coll_query = (
        select(c.comm_id, c.comm_size, c.op_id, c.world_rank, _sum(c.time_ns, "time_ns"))
        .where(c.comm_id != OVERFLOW_COMM_ID)
        .group_by(c.comm_id, c.comm_size, c.op_id, c.world_rank)
        .having(func.sum(c.calls) > 0)
    )
    return [
        (int(r[0]), int(r[1]), op_display_name(r[2]), int(r[3]), int(r[4]))
        for r in session.execute(coll_query)
    ]


def _elapsed(session: Session, scope: Scope, steps: Steps, skip: list[int] | None = None) -> Any:
    """Per step and rank, the time its intervals ending in the step cover: for each run,
    the last interval end minus the first interval start among the intervals that stored
    anything (an MPI call or file I/O; a rank's intervals follow one another without gaps,
    so this is exact unless an interval at the very start or end of a step had neither).
    The five minutes starting at `skip` are left out."""

    def spans(m: Any) -> _Source:
        return _Source(
            m,
            [
                m.run_id,
                m.world_rank,
                m.first_start_ns.label("t_start_ns"),
                m.last_end_ns.label("t_end_ns"),
            ],
            time=m.minute_ns,
        )

    rows = _rows(
        session, scope, steps, MINUTE_NS, spans(RankMinute),
        *(_Source(f, [f.run_id, f.world_rank, f.t_start_ns, f.t_end_ns])
          for f in (OpFrames, IoDelta)),
        fives=spans(RankFive), skip=skip,
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


def _window_elapsed(scope: Scope, steps: Steps) -> Any:
    """Per rank, the time it ran within the window, summed over its runs: from its first
    interval's start to its last interval's end (`ranks`: every frame, an empty one too),
    cut to the window. Unlike the steps' sum this loses nothing at the steps' edges (a
    rank blocked in a long call stores no record until it returns), and reads one row per
    rank and run."""
    start = func.greatest(Rank.first_seen_ns, steps.from_ns)
    end = func.least(Rank.last_seen_ns, steps.to_ns)
    return (
        select(Rank.world_rank, func.sum(func.greatest(end - start, 0)))
        .where(*scope.rows(Rank))
        .group_by(Rank.world_rank)
    )


_READERS: dict[str, Callable[[Session, Scope, Steps], Any]] = {
    "category": _by_category,
    "op": _by_op,
    "rank": _by_rank,
    "file": _by_file,
    "peer": _by_peer,
}
