"""Queries of the fabric over time (routes call these; they never build SQL themselves): the
ports' samples summed over a window or per step, and the fabric events of a window.

A sample belongs to a window when its sweep end (`ts_ns`) lies in it, half-open
[from, to) as everywhere in the API (server.query_params): the sums over a window are the
sums of exactly the samples that ended in it, and two adjacent windows never count one
twice. Every sum is made in the database from the same aggregate: the sample count, the
newest sample time, the OR of the flags, per counter the sum of the known deltas (null:
none known) and, per rate counter, the sampled time (dt) of the samples that know it. The
whole UTC minutes of a window (or of steps of whole minutes from a whole minute) are read
from the per-minute rollups (`fabric_port_minutes`, the same aggregate kept exact by the
fabric store); the rest from the raw samples through their time index. A window's sums
over its whole minutes made before (kept by the caller while `window_version` of those
minutes is unchanged) are added to the rest's in numpy (`Sums.plus`: the same integer
sums, counts, maximum and OR).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Integer,
    Text,
    and_,
    case,
    func,
    literal,
    literal_column,
    or_,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from server.jobs.series import Steps
from stacklens.constants import MINUTE_NS, PORT_COUNTERS, RATE_COUNTERS, TEN_S_NS
from stacklens.schema import FabricEvent, FabricPortMinute, FabricPortSample, FabricPortTen


def sum_columns(counters: Sequence[str] = PORT_COUNTERS) -> tuple[str, ...]:
    """The value columns of ports' sums of these counters (PORT_COUNTERS, in their order),
    in the order the queries return them (after the port id and the step): sums, count of
    known deltas, sampled time knowing each rate counter."""
    rates = [c for c in counters if c in RATE_COUNTERS]
    return ("samples", "last_ns", "flags", *(f"d_{c}" for c in counters),
            *(f"k_{c}" for c in counters), *(f"t_{c}" for c in rates))  # fmt: skip


def row_columns(counters: Sequence[str] = PORT_COUNTERS) -> tuple[str, ...]:
    """The columns of the rows those are summed from (a raw sample's part, a rollup's)."""
    rates = [c for c in counters if c in RATE_COUNTERS]
    return ("samples", "last_ns", "flags", *(f"d_{c}" for c in counters),
            *(f"t_{c}" for c in rates))  # fmt: skip


@dataclass(frozen=True)
class Sums:
    """Ports' samples summed (see the module doc), in columns: one row per port and key (a
    step start, or 0 for a whole window). `deltas[c]` is 0 where `known[c]` is False (no
    known delta: unknown, never 0); a row with `samples` 0 stands for no sample."""

    port: np.ndarray
    key: np.ndarray
    samples: np.ndarray
    last_ns: np.ndarray
    flags: np.ndarray
    deltas: dict[str, np.ndarray]
    known: dict[str, np.ndarray]
    known_ns: dict[str, np.ndarray]  # rate counters: the sampled time that knows them

    @classmethod
    def of(cls, rows: Sequence[Any], counters: Sequence[str] = PORT_COUNTERS) -> Sums:
        """From query rows (port id, key, `sum_columns(counters)`), all integers."""
        at = {name: i + 2 for i, name in enumerate(sum_columns(counters))}
        width = len(at) + 2
        flat = itertools.chain.from_iterable(rows)
        m = np.fromiter(flat, dtype=np.int64, count=len(rows) * width).reshape(len(rows), width)
        return cls(
            m[:, 0], m[:, 1], m[:, at["samples"]], m[:, at["last_ns"]], m[:, at["flags"]],
            {c: m[:, at[f"d_{c}"]] for c in counters},
            {c: m[:, at[f"k_{c}"]] > 0 for c in counters},
            {c: m[:, at[f"t_{c}"]] for c in counters if c in RATE_COUNTERS},
        )  # fmt: skip

    def lookup(self, ports: list[int], keys: list[int]) -> Sums:
        """The rows of these (port id, key) pairs, in their order; a pair without a row gets
        an empty one (samples 0, nothing known)."""
        index = {
            pk: i for i, pk in enumerate(zip(self.port.tolist(), self.key.tolist(), strict=True))
        }
        rows = np.array([index.get(pk, -1) for pk in zip(ports, keys, strict=True)], dtype=np.int64)
        found = rows >= 0
        rows = np.where(found, rows, 0)

        def pick(column: np.ndarray) -> np.ndarray:
            if not len(column):
                return np.zeros(len(rows), dtype=column.dtype)
            return np.where(found, column[rows], np.zeros(1, dtype=column.dtype))

        return Sums(
            np.array(ports, dtype=np.int64), np.array(keys, dtype=np.int64), pick(self.samples),
            pick(self.last_ns), pick(self.flags), {c: pick(v) for c, v in self.deltas.items()},
            {c: pick(v) for c, v in self.known.items()},
            {c: pick(v) for c, v in self.known_ns.items()},
        )  # fmt: skip

    def only(self, ports: list[int]) -> Sums:
        """The rows of these port ids."""
        keep = np.isin(self.port, np.array(ports, dtype=np.int64))
        return Sums(
            self.port[keep], self.key[keep], self.samples[keep], self.last_ns[keep],
            self.flags[keep], {c: v[keep] for c, v in self.deltas.items()},
            {c: v[keep] for c, v in self.known.items()},
            {c: v[keep] for c, v in self.known_ns.items()},
        )  # fmt: skip

    def plus(self, other: Sums) -> Sums:
        """Both sums added per port and key (the same counters): as if summed together."""
        ports = np.concatenate([self.port, other.port])
        keys = np.concatenate([self.key, other.key])
        pairs, at = np.unique(np.stack([ports, keys], axis=1), axis=0, return_inverse=True)
        at = at.reshape(-1)

        def add(a: np.ndarray, b: np.ndarray, ufunc: Any = np.add) -> np.ndarray:
            both = np.concatenate([a, b])
            out = np.zeros(len(pairs), dtype=both.dtype)
            ufunc.at(out, at, both)
            return out

        return Sums(
            pairs[:, 0], pairs[:, 1], add(self.samples, other.samples),
            add(self.last_ns, other.last_ns, np.maximum),
            add(self.flags, other.flags, np.bitwise_or),
            {c: add(v, other.deltas[c]) for c, v in self.deltas.items()},
            {c: add(v, other.known[c], np.logical_or) for c, v in self.known.items()},
            {c: add(v, other.known_ns[c]) for c, v in self.known_ns.items()},
        )  # fmt: skip

    def rate(self, counter: str) -> np.ndarray:
        """Mean rate of a rate counter over the time that knows it (nan: unknown)."""
        t = self.known_ns[counter]
        ok = self.known[counter] & (t > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(ok, self.deltas[counter] * 1e9 / np.where(ok, t, 1), np.nan)


def _raw_rows(ids: Any, lo: int, hi: int, at: Any, counters: Sequence[str]) -> Any:
    """SELECT port_id, at (the step of a sample, or a constant), then a sample as
    `row_columns(counters)`, for the samples of these ports with lo <= ts_ns < hi."""
    s = FabricPortSample.__table__.c
    known = [
        case((and_(s[f"d_{c}"].is_not(None), s.dt_ns > 0), s.dt_ns), else_=0).label(f"t_{c}")
        for c in counters
        if c in RATE_COUNTERS
    ]
    return select(
        s.port_id,
        at(s.ts_ns).label("at"),
        literal(1, Integer).label("samples"),
        s.ts_ns.label("last_ns"),
        s.flags,
        *(s[f"d_{c}"] for c in counters),
        *known,
    ).where(*_of_ports(s.port_id, ids), s.ts_ns >= lo, s.ts_ns < hi)


#: The rollups, coarsest first: table, key column (a span's start), span (ns).
ROLLUPS = (
    (FabricPortMinute.__table__, "minute_ns", MINUTE_NS),
    (FabricPortTen.__table__, "start_ns", TEN_S_NS),
)


def _rolled_rows(
    rollup: tuple[Any, str, int], ids: Any, lo: int, hi: int, at: Any, counters: Sequence[str]
) -> Any:
    """The same rows from a rollup (ROLLUPS), of its spans in [lo, hi) (whole spans)."""
    table, key, _ = rollup
    m = table.c
    columns = (m[c] for c in row_columns(counters))
    return select(m.port_id, at(m[key]).label("at"), *columns).where(
        *_of_ports(m.port_id, ids), m[key] >= lo, m[key] < hi
    )


def _cover(ids: Any, lo: int, hi: int, at: Any, rollups: tuple[Any, ...],
           counters: Sequence[str]) -> list[Any]:  # fmt: skip
    """Row sources of [lo, hi): the whole spans of the coarsest rollup inside it, the rest
    on each side by the finer ones, what is left from the raw samples."""
    if lo >= hi:
        return []
    if not rollups:
        return [_raw_rows(ids, lo, hi, at, counters)]
    span = rollups[0][2]
    first, last = -(-lo // span) * span, hi // span * span
    if first >= last:
        return _cover(ids, lo, hi, at, rollups[1:], counters)
    return [
        *_cover(ids, lo, first, at, rollups[1:], counters),
        _rolled_rows(rollups[0], ids, first, last, at, counters),
        *_cover(ids, last, hi, at, rollups[1:], counters),
    ]


def _summed(parts: list[Any], counters: Sequence[str]) -> Any:
    """SELECT port_id, at, `sum_columns(counters)` of the `row_columns(counters)` of
    `parts`, grouped by both: each part summed on its own first (a few rows per port and
    step each, hashed in memory), then the parts' sums added up."""
    sums = [_sum_columns(part.subquery(), True, counters) for part in parts]
    if len(sums) == 1:
        return sums[0]
    return _sum_columns(union_all(*sums).subquery(), False, counters)


def _sum_columns(rows: Any, first: bool, counters: Sequence[str]) -> Any:
    """SELECT port_id, at, `sum_columns(counters)` of `rows` grouped by both; `first`:
    `rows` are `row_columns` (a known delta counted where one is), else `sum_columns`
    (counts added)."""
    c = rows.c

    def total(column: Any) -> Any:
        return func.coalesce(func.sum(column), 0).cast(BigInteger)

    def known(x: str) -> Any:
        return func.count(c[f"d_{x}"]) if first else total(c[f"k_{x}"])

    return select(
        c.port_id,
        c.at,
        total(c.samples).label("samples"),
        func.max(c.last_ns).label("last_ns"),
        func.bit_or(c.flags).label("flags"),
        *(total(c[f"d_{x}"]).label(f"d_{x}") for x in counters),
        *(known(x).label(f"k_{x}") for x in counters),
        *(total(c[f"t_{x}"]).label(f"t_{x}") for x in counters if x in RATE_COUNTERS),
    ).group_by(c.port_id, c.at)


#: Above this many ports, a query reads every port's rows of its time range (through the
#: time indexes) and the caller keeps its own: cheaper than one index probe per port.
MAX_PORTS_PROBED = 64


def _ids(port_ids: list[int]) -> Any:
    """The ports a query asks for, as one array parameter; None: many, every port is read."""
    if len(set(port_ids)) > MAX_PORTS_PROBED:
        return None
    return literal(sorted(set(port_ids)), type_=ARRAY(Integer))  # one parameter, not 7,000


def _of_ports(column: Any, ids: Any) -> list[Any]:
    """SQL conditions: `column` is one of the ports `ids` (none: every port)."""
    return [] if ids is None else [column == func.any(ids)]


def _whole(_: Any) -> Any:
    """The key of every row of a window's sums: 0."""
    return literal(0, BigInteger)


def whole_minutes(lo: int, hi: int) -> tuple[int, int]:
    """The whole UTC minutes inside [lo, hi), as [first, last) (none if first >= last)."""
    return -(-lo // MINUTE_NS) * MINUTE_NS, hi // MINUTE_NS * MINUTE_NS


def window_sums(session: Session, port_ids: list[int], lo: int, hi: int,
                counters: Sequence[str] = PORT_COUNTERS, minutes: Sums | None = None
                ) -> Sums:  # fmt: skip
    """Per port id, its samples with lo <= ts_ns < hi summed (key 0; ports without one have
    no row), of these counters only (PORT_COUNTERS, in their order: each one fewer is
    three aggregates fewer per row): the window's whole minutes from the minute rollups
    (or `minutes`: their `minute_sums` of these ports and counters, made before), the
    whole 10 s of its partial first and last minutes from the 10 s ones, the rest (under
    10 s at each end) raw."""
    if not port_ids:
        return Sums.of([], counters)
    ids = _ids(port_ids)
    first, last = whole_minutes(lo, hi)
    if minutes is None or first >= last:
        parts = _cover(ids, lo, hi, _whole, ROLLUPS, counters)
        return Sums.of(session.execute(_summed(parts, counters)).all(), counters).only(port_ids)
    parts = [*_cover(ids, lo, first, _whole, ROLLUPS[1:], counters),
             *_cover(ids, last, hi, _whole, ROLLUPS[1:], counters)]  # fmt: skip
    edges = Sums.of(session.execute(_summed(parts, counters)).all() if parts else [], counters)
    return edges.plus(minutes).only(port_ids)


def minute_sums(session: Session, port_ids: list[int], first: int, last: int,
                counters: Sequence[str] = PORT_COUNTERS) -> Sums:  # fmt: skip
    """`window_sums` of the whole minutes [first, last) (`whole_minutes`), from the minute
    rollups alone."""
    if not port_ids:
        return Sums.of([], counters)
    part = _rolled_rows(ROLLUPS[0], _ids(port_ids), first, last, _whole, counters)
    return Sums.of(session.execute(_summed([part], counters)).all(), counters).only(port_ids)


def window_version(session: Session, lo: int, hi: int) -> tuple[int, int]:
    """Changes whenever a sample with lo <= ts_ns < hi is stored or retired (or the rollups
    rebuilt): the number of minute rollup rows of the window's minutes and their newest
    row version (`xmin`, the transaction that wrote a row last). The fabric store adds
    every sample to its minute's row in the transaction that stores it (a new row version,
    newer than all before it until transaction ids wrap around, every 2**32), retention
    and repairs delete rows. One narrow read of the window's minute rows, no sums."""
    m = FabricPortMinute.__table__.c
    newest = func.max(literal_column("xmin").cast(Text).cast(BigInteger))
    query = select(func.count(), func.coalesce(newest, 0)).where(
        m.minute_ns >= lo // MINUTE_NS * MINUTE_NS, m.minute_ns < hi
    )
    count, version = session.execute(query).one()
    return int(count), int(version)


def samples_between(session: Session, lo: int, hi: int) -> bool:
    """Whether a raw sample with lo <= ts_ns < hi is stored (one probe of the time index):
    with the same `window_version`, two windows of one start whose ends are lo and hi hold
    the same samples exactly when none is."""
    s = FabricPortSample.__table__.c
    return (
        session.execute(select(s.port_id).where(s.ts_ns >= lo, s.ts_ns < hi).limit(1)).first()
        is not None
    )


def resolution(steps: Steps) -> str:
    """What the steps are read from: "minutes" for whole minutes from a whole minute,
    "10 s" for whole 10 s from a whole 10 s (the rollups serve them; the finer rollups and
    the raw samples the window's partial last span), else "samples"."""
    spans = (("minutes", MINUTE_NS), ("10 s", TEN_S_NS))
    fits = [name for name, span in spans if steps.from_ns % span == steps.step_ns % span == 0]
    return fits[0] if fits else "samples"


def step_sums(session: Session, port_ids: list[int], steps: Steps,
              counters: Sequence[str] = PORT_COUNTERS) -> Sums:  # fmt: skip
    """Per port id and step start (key), its samples in the step summed (only steps with
    one), of these counters only (as `window_sums`): from the coarsest rollup whose spans
    lie whole in the steps (`resolution`), the finer ones and the raw samples for the
    window's partial last span; otherwise raw."""
    if not port_ids:
        return Sums.of([], counters)
    ids = _ids(port_ids)
    usable = {"minutes": ROLLUPS, "10 s": ROLLUPS[1:], "samples": ()}[resolution(steps)]
    parts = _cover(ids, steps.from_ns, steps.to_ns, steps.start, usable, counters)
    return Sums.of(session.execute(_summed(parts, counters)).all(), counters).only(port_ids)


# ---- events ----------------------------------------------------------------------------------


def _overlapping(lo: int, hi: int, kind: str | None, link: int | None) -> list[Any]:
    """Conditions: an event [start, end] (end null: open) overlaps [lo, hi); of this kind
    and link when given."""
    e = FabricEvent
    where = [e.start_ns < hi, or_(e.end_ns.is_(None), e.end_ns >= lo)]
    if kind is not None:
        where.append(e.kind == kind)
    if link is not None:
        where.append(e.link_id == link)
    return where


def events(
    session: Session,
    lo: int,
    hi: int,
    kind: str | None,
    link: int | None,
    limit: int,
    after: tuple[int, int] | None,
) -> tuple[list[dict[str, Any]], int]:
    """The events overlapping [lo, hi) (of `kind`, of `link`), newest start first, then
    newest id: up to `limit` + 1 after the cursor key (start_ns, id), and how many in all."""
    where = _overlapping(lo, hi, kind, link)
    total = session.scalar(select(func.count()).select_from(FabricEvent).where(*where)) or 0
    query = select(FabricEvent).where(*where)
    if after is not None:
        start, event_id = after
        query = query.where(
            or_(
                FabricEvent.start_ns < start,
                and_(FabricEvent.start_ns == start, FabricEvent.id < event_id),
            )
        )
    query = query.order_by(FabricEvent.start_ns.desc(), FabricEvent.id.desc()).limit(limit + 1)
    rows = [
        {
            "id": e.id,
            "kind": e.kind,
            "subject": e.subject,
            "start_ns": e.start_ns,
            "end_ns": e.end_ns,
            "link_id": e.link_id,
            "details": e.details,
        }
        for e in session.scalars(query)
    ]
    return rows, total


def down_at(session: Session, t_ns: int) -> dict[int, int]:
    """The links down at `t_ns` (a link_down event open at that time): id -> since when."""
    return _open_at(session, t_ns, "link_down", FabricEvent.link_id)


def gone_at(session: Session, t_ns: int) -> dict[int, int]:
    """The nodes gone at `t_ns` (a node_gone event open then): stored GUID -> since when."""
    return _open_at(session, t_ns, "node_gone", FabricEvent.node_guid)


def _open_at(session: Session, t_ns: int, kind: str, key: Any) -> dict[int, int]:
    e = FabricEvent
    query = select(key, e.start_ns).where(
        e.kind == kind,
        key.is_not(None),
        e.start_ns <= t_ns,
        or_(e.end_ns.is_(None), e.end_ns > t_ns),
    )
    return {int(k): int(start) for k, start in session.execute(query)}
