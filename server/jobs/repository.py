"""Queries of the jobs domain (routes call these; they never build SQL themselves).

Every query of a job's data takes a `Scope`: the job, and one of its runs or None for the
whole job (all its runs summed).
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    Subquery,
    Text,
    bindparam,
    distinct,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by
from sqlalchemy.orm import InstrumentedAttribute, Session

from server.access.owner import owner_column
from server.paging import Key
from server.query_params import ALL_TIME, Window
from stacklens.constants import (
    CATEGORIES,
    COMMUNICATION,
    IO_COUNTERS,
    IO_LAYERS,
    MINUTE_NS,
    OVERFLOW_COMM_ID,
    bucket_bounds,
)
from stacklens.mpi_ops import op_categories, op_names, op_receives
from stacklens.schema import (
    CollDelta,
    CollMinute,
    IoDelta,
    Job,
    OpHistDelta,
    P2PDelta,
    P2PMinute,
    Rank,
    RmaDelta,
    RollupDirty,
    Run,
)

#: The heat map's blocks per side at most: a matrix of more ranks is summed over blocks of
#: ranks (p2p_blocks), so its size never depends on the number of ranks.
MATRIX_BLOCKS = 128


@dataclass(frozen=True)
class Scope:
    """What a query reads: one job (jobs.id), one of its runs (runs.id) or all (or, with
    `runs`, those runs: a job's per-rank answers read its MPI runs only, mpi_runs), and the
    intervals that ended in a time window (server.query_params: [from, to), open = all)."""

    job_id: int
    run_id: int | None = None
    window: Window = ALL_TIME
    runs: tuple[int, ...] | None = None

    def rows(self, table: Any) -> list[ColumnElement[bool]]:
        """The conditions that select this scope's rows of `table`: a per-rank delta table
        or view (its intervals that ended in the window), or `ranks` (the ranks seen
        during the window: first interval start before its end, last interval end at or
        after its start)."""
        conditions = [table.job_id == self.job_id, *self.of_runs(table)]
        start, end = self.window.from_ns, self.window.to_ns
        if table is Rank:
            conditions += [] if start is None else [Rank.last_seen_ns >= start]
            conditions += [] if end is None else [Rank.first_seen_ns < end]
        else:
            conditions += [] if start is None else [table.t_end_ns >= start]
            conditions += [] if end is None else [table.t_end_ns < end]
        return conditions

    def of_runs(self, table: Any) -> list[ColumnElement[bool]]:
        """The conditions that keep `table`'s rows (any table with run_id) to this scope's
        run or runs; none for a whole job."""
        if self.run_id is not None:
            return [table.run_id == self.run_id]
        return [] if self.runs is None else [table.run_id.in_(self.runs)]


def mpi_runs(session: Session, scope: Scope) -> Scope:
    """The scope of a whole job's per-rank answers (server.jobs.series: the slow-rank
    profile, the series by rank): its MPI runs, its processes run left out when it has MPI
    runs too (a batch script's shell is numbered 0 in that run, as rank 0 is in an MPI
    run: summed with it, the shell's time would name rank 0 late); a run asked for, or a
    job of one kind of run, as it is."""
    if scope.run_id is not None or scope.runs is not None:
        return scope
    kinds = session.execute(select(Run.id, Run.kind).where(Run.job_id == scope.job_id)).all()
    mpi = tuple(sorted(run_id for run_id, kind in kinds if kind != "processes"))
    if len(mpi) in (0, len(kinds)):
        return scope
    return Scope(scope.job_id, None, scope.window, mpi)


def _minute_edges(window: Window) -> tuple[int | None, int | None]:
    """The whole UTC minutes inside `window`: [first, last) in ns (None = open); first >
    last when the window holds no whole minute."""
    first = None if window.from_ns is None else -(-window.from_ns // MINUTE_NS) * MINUTE_NS
    last = None if window.to_ns is None else window.to_ns // MINUTE_NS * MINUTE_NS
    return first, last


def p2p_sums(
    job_ids: Sequence[int], *keys: str, run_id: int | None = None, window: Window = ALL_TIME
) -> Subquery:
    """Point-to-point bytes and messages sent (columns `bytes`, `messages`) per job and per
    `keys` ("run_id", "world_rank", "peer") over the intervals of each job, or of its run
    `run_id`, that ended in `window`, exact at the statement's snapshot (rolled_sums)."""
    return rolled_sums(P2PMinute, P2PDelta, {"bytes": "bytes_sent", "messages": "msgs_sent"},
                       job_ids, *keys, run_id=run_id, window=window)  # fmt: skip


def coll_sums(
    job_ids: Sequence[int], *keys: str, run_id: int | None = None, window: Window = ALL_TIME
) -> Subquery:
    """Collective calls, bytes and time (columns `calls`, `bytes`, `time_ns`) per job and per
    `keys` (of "run_id", "world_rank", "comm_id", "comm_size", "op_id", "root") over the
    intervals of each job, or of its run `run_id`, that ended in `window`, exact at the
    statement's snapshot (rolled_sums)."""
    values = {"calls": "calls", "bytes": "bytes", "time_ns": "time_ns"}
    return rolled_sums(CollMinute, CollDelta, values, job_ids, *keys, run_id=run_id,
                       window=window)  # fmt: skip


def rolled_sums(
    minutes: Any,
    deltas: Any,
    values: dict[str, str],
    job_ids: Sequence[int],
    *keys: str,
    run_id: int | None = None,
    window: Window = ALL_TIME,
) -> Subquery:
    """The sums of the raw table `deltas`' columns (`values`: label -> column, the same in
    its per-rank minute rollup `minutes`) per job and per `keys` over the intervals of each
    job, or of its run `run_id`, that ended in `window`, exact at the statement's snapshot.

    The window's whole minutes already rolled up are read from `minutes`; the minutes still
    marked dirty, and the parts of a minute at either edge of the window, come from the raw
    deltas. A commit marks its minutes dirty in its own transaction, and the rollup pass
    clears a mark in the transaction that rewrites that minute, so in one snapshot every
    minute is either clean and rolled up, or dirty and read raw: the sum is the raw sum, at
    a cost that grows with minutes, not with intervals, once rolled up
    (collector/store/rollups.py). Rollups are kept per run; a minute of a job is read raw,
    for all its runs, as soon as one of its runs has it dirty.
    """
    first, last = _minute_edges(window)
    dirty = (
        select(RollupDirty.job_id, RollupDirty.minute_ns)
        .where(RollupDirty.job_id.in_(job_ids))
        .where(*_between(RollupDirty.minute_ns, first, last))
        .distinct()
        .cte("dirty")
    )
    m, d = minutes, deltas
    runs = [] if run_id is None else [m.run_id == run_id]
    still_dirty = (dirty.c.job_id == m.job_id) & (dirty.c.minute_ns == m.minute_ns)
    rolled = (
        select(
            m.job_id,
            *(getattr(m, k) for k in keys),
            *(func.sum(getattr(m, column)).label(label) for label, column in values.items()),
        )
        .where(m.job_id.in_(job_ids), ~exists().where(still_dirty), *runs)
        .where(*_between(m.minute_ns, first, last))
        .group_by(m.job_id, *(getattr(m, k) for k in keys))
    )
    in_dirty_minute = (
        (dirty.c.job_id == d.job_id)
        & (d.t_end_ns >= dirty.c.minute_ns)
        & (d.t_end_ns < dirty.c.minute_ns + MINUTE_NS)
    )
    sums = (
        *(getattr(d, k) for k in keys),
        *(func.sum(getattr(d, column)).label(label) for label, column in values.items()),
    )
    raw_runs = [] if run_id is None else [d.run_id == run_id]
    raw_dirty = select(d.job_id, *sums).join(dirty, in_dirty_minute).where(*raw_runs)
    # the window's parts outside its whole minutes (none for an open edge)
    whole = first is None or last is None or first < last  # some whole minute inside
    edges = [(window.from_ns, first), (last, window.to_ns)] if whole else [window.astuple()]
    parts = [raw_dirty.group_by(d.job_id, *(getattr(d, k) for k in keys))]
    for lo, hi in edges:
        if lo is not None and hi is not None and lo < hi:
            edge = select(d.job_id, *sums).where(d.job_id.in_(job_ids), *raw_runs)
            edge = edge.where(d.t_end_ns >= lo, d.t_end_ns < hi)
            parts.append(edge.group_by(d.job_id, *(getattr(d, k) for k in keys)))
    both = union_all(rolled, *parts).subquery()
    group = (both.c.job_id, *(both.c[k] for k in keys))
    return (
        select(*group, *(func.sum(both.c[label]).label(label) for label in values))
        .group_by(*group)
        .subquery()
    )


def _between(column: Any, lo: int | None, hi: int | None) -> list[ColumnElement[bool]]:
    """lo <= column < hi, each side only when given."""
    return [*([] if lo is None else [column >= lo]), *([] if hi is None else [column < hi])]


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a job list holds: `q` a case-insensitive substring of the job id, the
    user or the command; `status` and `user` exact; started in [started_from, started_to)
    (ns). None = any."""

    q: str | None = None
    status: str | None = None
    user: str | None = None
    started_from: int | None = None
    started_to: int | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        """The WHERE conditions on `jobs` of this filter."""
        where: list[ColumnElement[bool]] = []
        if self.q:
            pattern = "%" + re.sub(r"([\\%_])", r"\\\1", self.q) + "%"
            where.append(
                or_(
                    Job.job_key.ilike(pattern, escape="\\"),
                    func.coalesce(Job.user, "").ilike(pattern, escape="\\"),
                    func.coalesce(Job.command, "").ilike(pattern, escape="\\"),
                )
            )
        if self.status is not None:
            where.append(Job.status == self.status)
        if self.user is not None:
            where.append(func.coalesce(Job.user, "") == self.user)
        if self.started_from is not None:
            where.append(Job.started_ns >= self.started_from)
        if self.started_to is not None:
            where.append(Job.started_ns < self.started_to)
        return where


def list_jobs(
    session: Session,
    where: JobFilter,
    limit: int,
    after: Key | None = None,
    rows: Callable[[list[int]], list[dict[str, Any]]] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """A page of the jobs that `where` selects, newest first (by start, then by when first
    registered): the first `limit + 1` after the key `after` (a row's `key`), each with its
    ranks seen, total point-to-point traffic sent and its runs (job_runs); and how many jobs
    `where` selects in all. `rows` gives the rows of the page's job ids (`job_rows`'s; by
    default read now)."""
    conditions = where.conditions()
    newest = select(Job.id, func.count().over().label("total")).where(*conditions)
    if after is not None:
        newest = newest.where(tuple_(Job.started_ns, Job.id) < tuple_(*after))
    newest = newest.order_by(Job.started_ns.desc(), Job.id.desc()).limit(limit + 1)
    found = session.execute(newest).all()
    ids = [row.id for row in found]
    total = _total(session, found, after, select(Job.id).where(*conditions))
    return (job_rows(session, ids) if rows is None else rows(ids)), total


def _total(session: Session, page: Sequence[Any], after: Key | None, rows: Select[Any]) -> int:
    """How many rows `rows` selects: on a first page, the `total` its rows carry (a count
    over the whole selection, taken before the limit, in the same scan); after a cursor,
    counted apart."""
    if after is None:
        return int(page[0].total) if page else 0
    return session.scalar(select(func.count()).select_from(rows.subquery())) or 0


def job_rows(session: Session, ids: list[int]) -> list[dict[str, Any]]:
    """The job list's rows of the jobs `ids`, newest first; `key` is each one's sort key.
    A job's row changes only with `jobs_version`."""
    ranks = (
        select(Rank.job_id, func.count().label("ranks_seen"))
        .where(Rank.job_id.in_(ids))
        .group_by(Rank.job_id)
        .subquery()
    )
    traffic = p2p_sums(ids)
    query = (
        select(
            Job.id,
            Job.job_key.label("job"),
            Job.world_size,
            func.coalesce(Job.command, "").label("command"),
            func.coalesce(Job.user, "").label("user"),
            Job.status,
            Job.started_ns,
            Job.last_seen_ns,
            func.coalesce(ranks.c.ranks_seen, 0).label("ranks_seen"),
            func.coalesce(traffic.c.bytes, 0).label("bytes_sent"),
            func.coalesce(traffic.c.messages, 0).label("messages_sent"),
        )
        .where(Job.id.in_(ids))
        .outerjoin(ranks, ranks.c.job_id == Job.id)
        .outerjoin(traffic, traffic.c.job_id == Job.id)
        .order_by(Job.started_ns.desc(), Job.id.desc())
    )
    jobs = [dict(row._mapping) for row in session.execute(query)]
    runs: dict[int, list[dict[str, Any]]] = {}
    for run in _runs(session, ids):  # by the job's row: one per (owner, job id)
        runs.setdefault(run.pop("job_id"), []).append(run)
    return [
        {**job, "key": (job["started_ns"], job["id"]), "runs": runs.get(job.pop("id"), [])}
        for job in jobs
    ]


def job_row(session: Session, job_id: int) -> dict[str, Any]:
    """The job list's row of one job (GET /api/jobs/{job})."""
    (row,) = job_rows(session, [job_id])
    return {k: v for k, v in row.items() if k != "key"}


#: At most this many jobs of one key are read to resolve it (a 409 lists their owners).
MAX_SAME_KEY = 20


def owner_name() -> ColumnElement[str]:
    """A job's owner as the job list names it (`user`; "" for a job that names none): what
    the `owner` qualifier of the job endpoints matches."""
    return func.coalesce(owner_column(), "")


#: A row's version (`xmin`: the transaction that wrote it last) as a number.
_ROW_VERSION = literal_column("xmin").cast(Text).cast(BigInteger)
_VERSION_IDS = bindparam("ids", type_=ARRAY(BigInteger))
#: Per job of :ids and per table (0 the job's row, 1 its runs, 2 and 3 its rows in the
#: rollups): the newest row version and the rows; one statement, compiled once.
_JOBS_VERSION = union_all(*(
    select(key, literal(i), func.max(_ROW_VERSION), func.count()).select_from(table)
    .where(key == func.any(_VERSION_IDS)).group_by(key)
    for i, (table, key) in enumerate(((Job, Job.id), (Run, Run.job_id),
                                      (P2PMinute, P2PMinute.job_id),
                                      (CollMinute, CollMinute.job_id)))
))  # fmt: skip


def jobs_version(session: Session, ids: list[int]) -> tuple[tuple[Any, ...], ...]:
    """Changes whenever anything stored about these jobs changes: the transaction that
    stores a job's frames (collector/store/writer.py) upserts its run's row and its own (a
    new row version even when no value changes: a frame replayed late, with an old interval
    end, too), and so do a launch record, a status change and retention; a rollup pass
    writes its minutes (P2PMinute, CollMinute: the rollups the answers read), and nothing
    else writes them. Per job (in the order of `ids`): its id, then of its row, its runs'
    and its rows in each rollup the newest version (`xmin`, the transaction that wrote it
    last) and how many there are; read past the owner filter (the caller found the jobs
    readable)."""
    found = {(job, part): (newest, count) for job, part, newest, count in
             session.connection().execute(_JOBS_VERSION, {"ids": ids})}  # fmt: skip
    return tuple((i, *(found.get((i, part), (None, 0)) for part in range(4))) for i in ids)


def job_version(session: Session, job_id: int) -> tuple[Any, ...]:
    """`jobs_version` of one job."""
    return jobs_version(session, [job_id])[0]


def find_jobs(session: Session, job_key: str, owner: str | None = None) -> list[Job]:
    """The jobs with this key that the session may read, of `owner` only when given (the
    owner's name, `owner_name()`), newest seen first; at most MAX_SAME_KEY. A job is its
    owner's and its key (two users may use one key): a user sees only theirs
    (server/access/owner.py), an admin may see several, which the caller must not pick
    from silently."""
    query = select(Job).where(Job.job_key == job_key)
    if owner is not None:
        query = query.where(owner_name() == owner)
    query = query.order_by(Job.last_seen_ns.desc(), Job.id.desc()).limit(MAX_SAME_KEY)
    return list(session.scalars(query))


def get_run(session: Session, job_id: int, ordinal: int) -> Run | None:
    """Run number `ordinal` (1, 2, ...) of a job, or None."""
    query = select(Run).where(Run.job_id == job_id, Run.ordinal == ordinal)
    return session.scalars(query).one_or_none()


def job_runs(session: Session, scope: Scope) -> list[dict[str, Any]]:
    """The runs of a job by ordinal that were seen during the scope's window (started
    before its end, last seen at or after its start): kind, label, size, status, times,
    ranks (or processes) seen, command and user."""
    runs = _runs(session, [scope.job_id], scope.window)
    return [{k: v for k, v in run.items() if k != "job_id"} for run in runs]


def _runs(
    session: Session, job_ids: Sequence[int], window: Window = ALL_TIME
) -> list[dict[str, Any]]:
    """The runs of the jobs `job_ids` by job and ordinal, each with its job's row id
    (`job_id`: a job is its owner's and its key, so two owners' jobs of one key are two
    rows), only those seen during `window`."""
    ranks = (
        select(Rank.run_id, func.count().label("ranks_seen"))
        .where(Rank.job_id.in_(job_ids))
        .group_by(Rank.run_id)
        .subquery()
    )
    query = (
        select(
            Run.job_id,
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
            Run.ranks_expected,
            Run.exit_code,
            Run.exit_signal,
            Run.forwarded_signal,
            Run.launch_output,
        )
        .outerjoin(ranks, ranks.c.run_id == Run.id)
        .where(Run.job_id.in_(job_ids))
        .where(*([] if window.from_ns is None else [Run.last_seen_ns >= window.from_ns]))
        .where(*([] if window.to_ns is None else [Run.started_ns < window.to_ns]))
        .order_by(Run.job_id, Run.ordinal)
    )
    rows = [dict(row._mapping) for row in session.execute(query)]
    for row in rows:
        row["exit_signal"] = signal_name(row["exit_signal"])
        row["forwarded_signal"] = signal_name(row["forwarded_signal"])
    return rows


def signal_name(number: int | None) -> str | None:
    """A signal's name (SIGSEGV) for its number, `signal N` for one this system does not
    name; None for None."""
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def p2p_matrix(
    session: Session, scope: Scope, limit: int, after: Key | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A page of the bytes and messages sent per (source rank, destination rank) over the
    scope, only pairs with messages, by source then destination: the first `limit + 1`
    after the pair `after`; and how many pairs there are (from the rollups, p2p_sums)."""
    sums = p2p_sums([scope.job_id], "world_rank", "peer", run_id=scope.run_id, window=scope.window)
    sent = sums.c.messages > 0
    query = select(
        sums.c.world_rank.label("src"),
        sums.c.peer.label("dst"),
        sums.c.bytes,
        sums.c.messages,
        func.count().over().label("total"),
    ).where(sent)
    if after is not None:
        query = query.where(tuple_(sums.c.world_rank, sums.c.peer) > tuple_(*after))
    found = session.execute(query.order_by(sums.c.world_rank, sums.c.peer).limit(limit + 1)).all()
    rows = [
        {"src": r.src, "dst": r.dst, "bytes": int(r.bytes), "messages": int(r.messages)}
        for r in found
    ]
    return rows, _total(session, found, after, select(sums.c.peer).where(sent))


def p2p_blocks(session: Session, scope: Scope) -> tuple[int, list[dict[str, Any]]]:
    """The whole matrix of the scope summed over square blocks of ranks: (ranks per block
    side, the non-zero blocks by source block then destination block). The side is the
    smallest that makes the highest rank seen (source or destination) fit in
    `MATRIX_BLOCKS` blocks: 1 up to that many ranks."""
    sums = p2p_sums([scope.job_id], "world_rank", "peer", run_id=scope.run_id, window=scope.window)
    sent = sums.c.messages > 0
    top = session.scalar(
        select(func.max(func.greatest(sums.c.world_rank, sums.c.peer))).where(sent)
    )
    side = 1 if top is None else max(1, -(-(int(top) + 1) // MATRIX_BLOCKS))
    src = (sums.c.world_rank // literal(side)).label("src")
    dst = (sums.c.peer // literal(side)).label("dst")
    query = (
        select(src, dst, func.sum(sums.c.bytes).label("bytes"),
               func.sum(sums.c.messages).label("messages"))
        .where(sent)
        .group_by(src, dst)
        .order_by(src, dst)
    )  # fmt: skip
    blocks = [
        {"src": int(r.src), "dst": int(r.dst), "bytes": int(r.bytes), "messages": int(r.messages)}
        for r in session.execute(query)
    ]
    return side, blocks


def job_ops(totals: Iterable[tuple[int, int, int, int, int]]) -> list[dict[str, Any]]:
    """The rows of server.jobs.series.op_totals (op_id, calls, bytes, time_ns, ranks: the
    job's ops with calls over its window) with each op's name, traffic category and whether
    its bytes are received (`op_receives`); heaviest time first (then by name)."""
    receives = op_receives()
    rows = [
        {
            "op": op_display_name(op_id),
            "category": op_display_category(op_id),
            "received": op_id < len(receives) and receives[op_id],
            "calls": calls,
            "bytes": nbytes,
            "time_ns": time_ns,
            "ranks": ranks,
        }
        for op_id, calls, nbytes, time_ns, ranks in totals
    ]
    return sorted(rows, key=lambda r: (-r["time_ns"], r["op"]))


def category_totals(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls, bytes sent, bytes received and time summed per traffic category over `job_ops`
    rows: every category of `stacklens.constants.CATEGORIES`, in that order, zeros included.
    A message's bytes are in `bytes_sent` once (at its sender) and again in
    `bytes_received` at its receiver, never added together."""
    totals = {
        c: {"category": c, "calls": 0, "bytes_sent": 0, "bytes_received": 0, "time_ns": 0,
            "communication": c in COMMUNICATION}
        for c in CATEGORIES
    }  # fmt: skip
    for op in ops:
        total = totals[op["category"]]
        total["calls"] += op["calls"]
        total["time_ns"] += op["time_ns"]
        total["bytes_received" if op["received"] else "bytes_sent"] += op["bytes"]
    return list(totals.values())


def _io_sums(scope: Scope, phase: int) -> Subquery:
    """File-system I/O per (layer, path) over all ranks and intervals of the scope in one
    phase, with `moved` = bytes read + written. Mount and file-system type are those the
    ranks reported; should ranks disagree (a node-local path on different hosts), the
    distinct values are joined with ", "."""

    def distinct_values(column: InstrumentedAttribute[str]) -> ColumnElement[str]:
        return func.array_to_string(
            func.array_agg(aggregate_order_by(distinct(column), column)), ", "
        )

    sums = {name: func.sum(getattr(IoDelta, name)) for name in IO_COUNTERS}
    return (
        select(
            IoDelta.layer,
            IoDelta.path,
            distinct_values(IoDelta.mount).label("mount"),
            distinct_values(IoDelta.fstype).label("fstype"),
            func.count(distinct(IoDelta.world_rank)).label("ranks"),
            *(total.label(name) for name, total in sums.items()),
            (sums["bytes_read"] + sums["bytes_written"]).label("moved"),
        )
        .where(*scope.rows(IoDelta), IoDelta.phase == phase)
        .group_by(IoDelta.layer, IoDelta.path)
        .subquery()
    )


def job_io(
    session: Session, scope: Scope, phase: int, limit: int, after: Key | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A page of the file-system I/O per (layer, path) of the scope in one phase (0: the
    program's; 1: start-up, before MPI_Init), most bytes (read + written) first, then by
    layer and path: the first `limit + 1` rows after the key `after` (a row's `key`:
    bytes moved, layer, path); and how many (layer, path) rows there are."""
    io = _io_sums(scope, phase)
    query = select(io, func.count().over().label("total"))
    if after is not None:
        moved, layer, path = after
        query = query.where(
            or_(
                io.c.moved < moved,
                (io.c.moved == moved) & (tuple_(io.c.layer, io.c.path) > tuple_(layer, path)),
            )
        )
    query = query.order_by(io.c.moved.desc(), io.c.layer, io.c.path).limit(limit + 1)
    found = session.execute(query).all()
    rows = [
        {
            **{k: v for k, v in row._mapping.items() if k not in ("moved", "total")},
            "layer": IO_LAYERS.get(row.layer, f"layer {row.layer}"),
            **{name: int(row._mapping[name]) for name in IO_COUNTERS},
            "key": (int(row.moved), row.layer, row.path),
        }
        for row in found
    ]
    return rows, _total(session, found, after, select(io.c.path))


def io_totals(session: Session, scope: Scope, phase: int) -> dict[str, int]:
    """(layer, path) rows, bytes read and bytes written of the scope's I/O in one phase."""
    io = _io_sums(scope, phase)
    row = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(io.c.bytes_read), 0),
            func.coalesce(func.sum(io.c.bytes_written), 0),
        )
    ).one()
    return {"files": int(row[0]), "bytes_read": int(row[1]), "bytes_written": int(row[2])}


def op_display_name(op_id: int) -> str:
    # The collector accepts only op ids of its spec; an older server may not know a newer
    # spec's appended ids: they are still listed (by id, category "other").
    names = op_names()
    return names[op_id] if op_id < len(names) else f"op {op_id}"


def op_display_category(op_id: int) -> str:
    categories = op_categories()
    return categories[op_id] if op_id < len(categories) else "other"


def collective_totals(
    session: Session, scope: Scope
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """From one pass over the scope's collective sums (per communicator, op, root and rank
    in the database, from the rollups where they hold the window: coll_sums): per
    communicator (id and size) its calls, bytes and time, the ranks that called any
    collective on it and its distinct (op, root) pairs, heaviest time first (then by id and
    size); and per (communicator, op, root) its calls, bytes,
    time and the ranks that called it, heaviest time first (then op name, communicator id,
    root). Only those with calls."""
    keys = ("comm_id", "comm_size", "op_id", "root", "world_rank")
    c = coll_sums([scope.job_id], *keys, run_id=scope.run_id, window=scope.window).c
    query = select(c.comm_id, c.comm_size, c.op_id, c.root, c.world_rank, c.calls, c.bytes,
                   c.time_ns)  # fmt: skip
    comms: dict[tuple[int, int], dict[str, Any]] = {}
    callers: dict[tuple[int, int], set[int]] = {}
    pairs: dict[tuple[int, int], set[tuple[int, int]]] = {}
    colls: dict[tuple[int, int, int, int], dict[str, Any]] = {}
    for comm_id, size, op_id, root, rank, calls, nbytes, ns in session.execute(query):
        comm = comms.setdefault((comm_id, size), {
            "comm_id": int(comm_id), "comm_size": int(size),
            "overflow": comm_id == OVERFLOW_COMM_ID, "calls": 0, "bytes": 0,
            "time_ns": 0})  # fmt: skip
        coll = colls.setdefault((comm_id, size, op_id, root), {
            "op": op_display_name(op_id), "comm_id": int(comm_id), "comm_size": int(size),
            "root": int(root), "ranks": 0, "calls": 0, "bytes": 0, "time_ns": 0})  # fmt: skip
        for row in (comm, coll):
            row["calls"] += int(calls)
            row["bytes"] += int(nbytes)
            row["time_ns"] += int(ns)
        if calls > 0:  # calls are counts: a rank's sum has calls iff one of its rows has
            coll["ranks"] += 1
            callers.setdefault((comm_id, size), set()).add(rank)
            pairs.setdefault((comm_id, size), set()).add((op_id, root))
    communicators = sorted(
        ({**c, "ranks": len(callers.get(k, ())), "ops": len(pairs.get(k, ()))}
         for k, c in comms.items() if c["calls"] > 0),
        key=lambda r: (-r["time_ns"], r["comm_id"], r["comm_size"]),
    )  # fmt: skip
    collectives = sorted(
        (c for c in colls.values() if c["calls"] > 0),
        key=lambda r: (-r["time_ns"], r["op"], r["comm_id"], r["root"]),
    )
    return communicators, collectives


def job_sizes(session: Session, scope: Scope) -> list[dict[str, Any]]:
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
    ops: dict[int, dict[str, Any]] = {}
    for row in session.execute(query):
        op = ops.setdefault(
            row.op_id,
            {
                "op": op_display_name(row.op_id),
                "category": op_display_category(row.op_id),
                "messages": 0,
                "buckets": [],
            },
        )
        lower, upper = bucket_bounds(row.bucket)
        n = int(row._mapping["count"])  # row.count is the tuple method
        op["messages"] += n
        bucket = {"bucket": row.bucket, "lower_bytes": lower, "upper_bytes": upper}
        op["buckets"].append({**bucket, "count": n})
    return sorted(ops.values(), key=lambda o: (-o["messages"], o["op"]))


def job_rma(session: Session, scope: Scope) -> list[dict[str, Any]]:
    """One-sided calls and bytes of the scope per op, most bytes first (then by name)."""
    calls = func.sum(RmaDelta.calls)
    query = (
        select(RmaDelta.op_id, calls.label("calls"), func.sum(RmaDelta.bytes).label("bytes"))
        .where(*scope.rows(RmaDelta))
        .group_by(RmaDelta.op_id)
        .having(calls > 0)
    )
    ops = [
        {"op": op_display_name(r.op_id), "calls": int(r.calls), "bytes": int(r.bytes)}
        for r in session.execute(query)
    ]
    return sorted(ops, key=lambda o: (-o["bytes"], o["op"]))


def rma_pairs(
    session: Session, scope: Scope, limit: int, after: Key | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A page of the one-sided traffic of the scope per (origin, target) pair with calls, by
    origin then target, each with its ops by name: the first `limit + 1` pairs after the
    pair `after`; and how many pairs there are."""
    calls = func.sum(RmaDelta.calls)
    per_op = (
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
        .subquery()
    )
    pairs = select(per_op.c.world_rank, per_op.c.target).distinct()
    total = session.scalar(select(func.count()).select_from(pairs.subquery())) or 0
    if after is not None:
        pairs = pairs.where(tuple_(per_op.c.world_rank, per_op.c.target) > tuple_(*after))
    chosen = pairs.order_by(per_op.c.world_rank, per_op.c.target).limit(limit + 1).subquery()
    query = select(per_op).join(
        chosen,
        (chosen.c.world_rank == per_op.c.world_rank) & (chosen.c.target == per_op.c.target),
    )
    cells: dict[tuple[int, int], dict[str, Any]] = {}
    for row in session.execute(query):
        name, n, nbytes = op_display_name(row.op_id), int(row.calls), int(row.bytes)
        cell = cells.setdefault(
            (row.world_rank, row.target),
            {"origin": row.world_rank, "target": row.target, "calls": 0, "bytes": 0, "ops": []},
        )
        cell["calls"] += n
        cell["bytes"] += nbytes
        cell["ops"].append({"op": name, "calls": n, "bytes": nbytes})
    for cell in cells.values():
        cell["ops"].sort(key=lambda o: o["op"])
    return [cells[key] for key in sorted(cells)], total


def rank_status(rank: Rank, run_status: str) -> str:
    """A rank's status: how its final frame says it ended (aborted, killed, exited: its
    process ended without MPI_Finalize, finished), else
    running while its run runs and lost once the run has ended without that frame (a rank
    SIGKILLed by its launcher, a node lost)."""
    if rank.aborted:
        return "aborted"
    if rank.killed:
        return "killed"
    if rank.unfinalized:
        return "exited"
    if rank.finished:
        return "finished"
    return "running" if run_status == "running" else "lost"


def job_ranks(
    session: Session, scope: Scope, limit: int, after: Key | None = None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """A page of the ranks (or non-MPI processes) of the scope that reported, by run and
    world rank (a process's number): the first `limit + 1` after the key `after` (run
    ordinal, rank); each with its run's ordinal and kind, host, pid, first and last
    interval, status (`rank_status`), MPI_Abort's error code and the health counters
    (summed over its frames). And how many reported of all pages, apart: MPI ranks
    (`ranks`) and the processes run's processes (`processes`)."""
    query = select(Rank, Run.ordinal, Run.kind, Run.status).join(Run, Run.id == Rank.run_id)
    query = query.where(*scope.rows(Rank))
    if after is not None:
        query = query.where(tuple_(Run.ordinal, Rank.world_rank) > tuple_(*after))
    query = query.order_by(Run.ordinal, Rank.world_rank).limit(limit + 1)
    rows = [
        {
            "run": ordinal,
            "kind": kind,
            "rank": r.world_rank,
            "host": r.host,
            "pid": r.pid,
            "first_seen_ns": r.first_seen_ns,
            "last_seen_ns": r.last_seen_ns,
            "finished": r.finished,
            "killed": r.killed,
            "aborted": r.aborted,
            "unfinalized": r.unfinalized,
            "abort_code": r.abort_code,
            "status": rank_status(r, run_status),
            "keys_dropped": r.keys_dropped,
            "frames_dropped": r.frames_dropped,
            "frames_spooled": r.frames_spooled,
        }
        for r, ordinal, kind, run_status in session.execute(query)
    ]
    processes = func.count().filter(Run.kind == "processes")
    counted = select(func.count() - processes, processes).select_from(Rank)
    counted = counted.join(Run, Run.id == Rank.run_id).where(*scope.rows(Rank))
    ranks, procs = session.execute(counted).one()
    return rows, {"ranks": int(ranks), "processes": int(procs)}


def rank_hosts(session: Session, scope: Scope) -> list[dict[str, Any]]:
    """Every host of the scope's ranks with its number of ranks, most first (then by name)."""
    n = func.count()
    query = (
        select(Rank.host, n.label("ranks"))
        .where(*scope.rows(Rank))
        .group_by(Rank.host)
        .order_by(n.desc(), Rank.host)
    )
    return [{"host": r.host, "ranks": int(r.ranks)} for r in session.execute(query)]


def rank_health(session: Session, scope: Scope) -> dict[str, int]:
    """Over all the scope's ranks: how many folded keys into overflow rows and how many keys
    that was, how many lost frames and how many frames that was."""
    row = session.execute(
        select(
            func.count().filter(Rank.keys_dropped > 0),
            func.coalesce(func.sum(Rank.keys_dropped), 0),
            func.count().filter(Rank.frames_dropped > 0),
            func.coalesce(func.sum(Rank.frames_dropped), 0),
        ).where(*scope.rows(Rank))
    ).one()
    names = ("ranks_folded", "keys_dropped", "ranks_lost", "frames_dropped")
    return {name: int(value) for name, value in zip(names, row, strict=True)}
