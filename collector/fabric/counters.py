"""Port-counter semantics shared by every source: units, widths, deltas, resets, saturation.

Values are converted to bytes once, here, at parse time (PortXmitData/PortRcvData count
4-octet words). A delta is `current - previous`; a decrease means the counter was reset
(by someone else: stacklens never resets counters) and the delta is unknown, not guessed.
A counter at the maximum of its width is saturated: it no longer counts, so its delta is
unknown too (a pegged PortXmitWait would otherwise read as 0 ticks/s) and the sample is
flagged saturated (for PortXmitWait that flag is itself a sign of congestion: see
server/incidents/detect.py). Unknown deltas are stored as NULL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from stacklens.constants import FLAG_EXTENDED, PORT_COUNTERS, RESET_SHIFT, SATURATED_SHIFT
from stacklens.port_counters import PORT_COUNTER_TABLE

N_COUNTERS = len(PORT_COUNTERS)
#: Columns that the MAD layer delivers in 4-octet words (scale 4 in contract/port_counters.def).
WORD_COUNTERS = tuple(i for i, c in enumerate(PORT_COUNTER_TABLE) if c.scale == 4)
#: Bit width of each counter in PortCounters (the basic attribute) and with
#: PortCountersExtended (data and packets become 64-bit), in PORT_COUNTERS order.
BASIC_WIDTHS = np.array([c.basic_bits for c in PORT_COUNTER_TABLE], dtype=np.uint64)
EXTENDED_WIDTHS = np.array([c.extended_bits for c in PORT_COUNTER_TABLE], dtype=np.uint64)
#: Largest value storable in a PostgreSQL bigint; larger byte counts are flagged saturated.
_INT64_MAX = np.uint64(2**63 - 1)


def _max_of(widths: np.ndarray) -> np.ndarray:
    """All-ones value of each bit width (as uint64)."""
    return np.where(widths >= 64, np.uint64(2**64 - 1), (np.uint64(1) << widths) - np.uint64(1))


class PortState(NamedTuple):
    """A probed port's PortInfo PortState (1 Down, 2 Init, 3 Armed, 4 Active) and
    PortPhysicalState (2 Polling, 5 LinkUp, ...)."""

    state: int
    phys_state: int


@dataclass
class RawSweep:
    """One sweep's counter values in bytes/packets/ticks, one row per (GUID, port); and
    the states of the ports probed in the same pass (those that answered), by (GUID, port)."""

    guids: np.ndarray  # uint64
    ports: np.ndarray  # uint8
    values: np.ndarray  # uint64, shape (n, N_COUNTERS), bytes for the data counters
    saturated: np.ndarray  # bool, shape (n, N_COUNTERS)
    extended: np.ndarray  # bool: data/packets from the 64-bit attribute
    t_start_ns: int
    t_end_ns: int
    port_states: dict[tuple[int, int], PortState] = field(default_factory=dict)

    @classmethod
    def from_words(
        cls,
        guids,
        ports,
        values: np.ndarray,
        extended: np.ndarray,
        answered: np.ndarray,
        t_start_ns: int,
        t_end_ns: int,
        port_states: dict[tuple[int, int], PortState] | None = None,
    ) -> RawSweep:
        """Parse raw counter values (data in words): flag saturation, convert words to bytes.

        Rows whose port did not answer are dropped (absent, not zero). `port_states`: the
        probed ports' states, kept as they are.
        """
        keep = np.asarray(answered, dtype=bool)
        raw = np.asarray(values, dtype=np.uint64)[keep]
        ext = np.asarray(extended, dtype=bool)[keep]
        widths = np.where(ext[:, None], EXTENDED_WIDTHS, BASIC_WIDTHS)
        saturated = raw == _max_of(widths)
        out = raw.copy()
        for c in WORD_COUNTERS:
            words = raw[:, c]
            too_big = words > (_INT64_MAX // np.uint64(4))
            out[:, c] = np.where(too_big, _INT64_MAX, words * np.uint64(4))
            saturated[:, c] |= too_big
        return cls(
            guids=np.asarray(guids, dtype=np.uint64)[keep],
            ports=np.asarray(ports, dtype=np.uint8)[keep],
            values=out,
            saturated=saturated,
            extended=ext,
            t_start_ns=t_start_ns,
            t_end_ns=t_end_ns,
            port_states=port_states or {},
        )

    def __len__(self) -> int:
        return len(self.guids)

    def select(self, rows: np.ndarray) -> RawSweep:
        """The same sweep with only `rows` (a boolean mask)."""
        return RawSweep(
            guids=self.guids[rows],
            ports=self.ports[rows],
            values=self.values[rows],
            saturated=self.saturated[rows],
            extended=self.extended[rows],
            t_start_ns=self.t_start_ns,
            t_end_ns=self.t_end_ns,
            port_states=self.port_states,
        )

    def value(self, guid: int, port: int, name: str) -> int:
        """One counter of one port (KeyError if the port is not in this sweep)."""
        idx = np.flatnonzero((self.guids == np.uint64(guid)) & (self.ports == port))
        if not len(idx):
            raise KeyError((guid, port))
        return int(self.values[idx[0], PORT_COUNTERS.index(name)])


@dataclass
class DeltaSweep:
    """A sweep with deltas against the previous sweep of the same ports."""

    raw: RawSweep
    deltas: np.ndarray  # int64 (n, N_COUNTERS); meaningful only where `known`
    known: np.ndarray  # bool (n, N_COUNTERS)
    flags: np.ndarray  # int32 (n,)
    dt_ns: np.ndarray  # int64 (n,), 0 where there was no previous sample

    def delta(self, guid: int, port: int, name: str) -> int | None:
        """The delta of one counter of one port, None if unknown."""
        idx = np.flatnonzero((self.raw.guids == np.uint64(guid)) & (self.raw.ports == port))
        if not len(idx):
            raise KeyError((guid, port))
        c = PORT_COUNTERS.index(name)
        return int(self.deltas[idx[0], c]) if self.known[idx[0], c] else None


def merge_sweeps(older: DeltaSweep, newer: DeltaSweep) -> DeltaSweep:
    """`newer` spanning `older` too, for a store that fell behind (collector/fabric/writer.py):
    each port with a delta in both (one after the other: `older`'s values were the base of
    `newer`'s deltas) gets one sample over both intervals, its deltas summed (a counter
    known only where it is known in both; reset and saturation flags of either kept), so
    the byte, packet and error totals stay exact. A port with no delta in `newer` (no base:
    seen again after a gap) or none in `older` keeps `newer`'s row as it is, and a port
    that answered `older` only loses that interval's counts (its rate is unknown there
    anyway)."""
    olds = zip(older.raw.guids.tolist(), older.raw.ports.tolist(), strict=True)
    index = {key: i for i, key in enumerate(olds)}
    keys = zip(newer.raw.guids.tolist(), newer.raw.ports.tolist(), strict=True)
    at = np.array([index.get(key, -1) for key in keys], dtype=np.int64)
    both = (at >= 0) & (newer.dt_ns > 0)
    both[both] &= older.dt_ns[at[both]] > 0
    rows, base = np.flatnonzero(both), at[both]
    deltas, known = newer.deltas.copy(), newer.known.copy()
    flags, dt_ns = newer.flags.copy(), newer.dt_ns.copy()
    deltas[rows] += older.deltas[base]
    known[rows] &= older.known[base]
    flags[rows] |= older.flags[base]
    dt_ns[rows] += older.dt_ns[base]
    return DeltaSweep(newer.raw, deltas, known, flags, dt_ns)


class DeltaTracker:
    """Keeps the previous sweep per port and turns each new sweep into deltas.

    `min_dt_ns` is the shortest interval a delta may span: a port read again sooner (e.g.
    right after a slow re-discovery) is left out of the result and its previous sample
    stays the base, so its next delta spans the whole time and no rate is ever taken over
    a few milliseconds (where one MAD burst would read as a spike). The previous values
    are kept in arrays (one row per port ever seen, by `_row`), so a sweep's deltas are
    computed for all its ports at once (a sweep has one row per port).
    """

    def __init__(self, min_dt_ns: int = 0) -> None:
        self.min_dt_ns = min_dt_ns
        self._row: dict[tuple[int, int], int] = {}
        self._values = np.zeros((0, N_COUNTERS), dtype=np.uint64)
        self._extended = np.zeros(0, dtype=bool)
        self._t_ns = np.zeros(0, dtype=np.int64)

    def _rows(self, sweep: RawSweep) -> np.ndarray:
        """The memory row of each of the sweep's ports (-1: not seen before)."""
        get = self._row.get
        keys = zip(sweep.guids.tolist(), sweep.ports.tolist(), strict=True)
        return np.array([get(key, -1) for key in keys], dtype=np.int64)

    def update(self, sweep: RawSweep) -> DeltaSweep:
        """Deltas of `sweep` against the previous values; remember `sweep` (less the ports
        read sooner than `min_dt_ns` after their previous sample: left out)."""
        rows = self._rows(sweep)
        seen = rows >= 0
        if self.min_dt_ns and seen.any():
            early = seen & (sweep.t_end_ns - self._t_ns[np.where(seen, rows, 0)] < self.min_dt_ns)
            if early.any():
                sweep, rows, seen = sweep.select(~early), rows[~early], seen[~early]
        rows = self._add(sweep, rows)
        cur, sat, ext = sweep.values, sweep.saturated, sweep.extended
        prev = self._values[rows]
        # a delta needs a previous value read through the same attribute (width)
        comparable = seen & (self._extended[rows] == ext)
        reset = comparable[:, None] & (cur < prev)
        counted = comparable[:, None] & ~reset
        deltas = np.where(counted, (cur - prev).astype(np.int64), 0)
        known = counted & ~sat
        bit = np.int64(1) << np.arange(N_COUNTERS, dtype=np.int64)
        flags = (sat * bit).sum(axis=1) << SATURATED_SHIFT
        flags |= (reset * bit).sum(axis=1) << RESET_SHIFT
        flags |= np.where(ext, FLAG_EXTENDED, 0)
        dt = np.where(comparable, sweep.t_end_ns - self._t_ns[rows], 0).astype(np.int64)
        self._values[rows] = cur
        self._extended[rows] = ext
        self._t_ns[rows] = sweep.t_end_ns
        return DeltaSweep(sweep, deltas, known, flags.astype(np.int32), dt)

    def _add(self, sweep: RawSweep, rows: np.ndarray) -> np.ndarray:
        """`rows` with a new row of memory for each port not seen before (-1)."""
        new = np.flatnonzero(rows < 0)
        if not len(new):
            return rows
        rows = rows.copy()
        rows[new] = np.arange(len(self._t_ns), len(self._t_ns) + len(new))
        keys = zip(sweep.guids[new].tolist(), sweep.ports[new].tolist(), strict=True)
        self._row.update(zip(keys, rows[new].tolist(), strict=True))
        self._values = np.concatenate([self._values, np.zeros((len(new), N_COUNTERS), np.uint64)])
        self._extended = np.concatenate([self._extended, np.zeros(len(new), dtype=bool)])
        self._t_ns = np.concatenate([self._t_ns, np.zeros(len(new), dtype=np.int64)])
        return rows

    def forget(self, keep: set[tuple[int, int]]) -> None:
        """Drop the memory of ports not in `keep` (gone from the topology)."""
        kept = [(key, row) for key, row in self._row.items() if key in keep]
        old = np.array([row for _, row in kept], dtype=np.int64)
        self._row = {key: i for i, (key, _) in enumerate(kept)}
        self._values = self._values[old]
        self._extended = self._extended[old]
        self._t_ns = self._t_ns[old]
