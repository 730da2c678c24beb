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


class DeltaTracker:
    """Keeps the previous sweep per port and turns each new sweep into deltas.

    `min_dt_ns` is the shortest interval a delta may span: a port read again sooner (e.g.
    right after a slow re-discovery) is left out of the result and its previous sample
    stays the base, so its next delta spans the whole time and no rate is ever taken over
    a few milliseconds (where one MAD burst would read as a spike).
    """

    def __init__(self, min_dt_ns: int = 0) -> None:
        self.min_dt_ns = min_dt_ns
        self._prev: dict[tuple[int, int], tuple[np.ndarray, bool, int, np.ndarray]] = {}

    def update(self, sweep: RawSweep) -> DeltaSweep:
        """Deltas of `sweep` against the previous values; remember `sweep` (less the ports
        read sooner than `min_dt_ns` after their previous sample: left out)."""
        if self.min_dt_ns:
            early = np.array(
                [
                    (prev := self._prev.get((int(g), int(p)))) is not None
                    and sweep.t_end_ns - prev[2] < self.min_dt_ns
                    for g, p in zip(sweep.guids, sweep.ports, strict=True)
                ],
                dtype=bool,
            )
            if early.any():
                sweep = sweep.select(~early)
        n = len(sweep)
        deltas = np.zeros((n, N_COUNTERS), dtype=np.int64)
        known = np.zeros((n, N_COUNTERS), dtype=bool)
        flags = np.zeros(n, dtype=np.int64)
        dt = np.zeros(n, dtype=np.int64)
        bit = np.int64(1) << np.arange(N_COUNTERS, dtype=np.int64)
        for i in range(n):
            key = (int(sweep.guids[i]), int(sweep.ports[i]))
            cur = sweep.values[i]
            sat = sweep.saturated[i]
            prev = self._prev.get(key)
            f = int((bit * sat).sum()) << SATURATED_SHIFT
            if sweep.extended[i]:
                f |= FLAG_EXTENDED
            if prev is not None and prev[1] == bool(sweep.extended[i]):
                pvals = prev[0]
                reset = cur < pvals
                deltas[i, ~reset] = (cur[~reset] - pvals[~reset]).astype(np.int64)
                known[i] = ~reset & ~sat
                f |= int((bit * reset).sum()) << RESET_SHIFT
                dt[i] = sweep.t_end_ns - prev[2]
            flags[i] = f
            self._prev[key] = (cur.copy(), bool(sweep.extended[i]), sweep.t_end_ns, sat)
        return DeltaSweep(sweep, deltas, known, flags.astype(np.int32), dt)

    def forget(self, keep: set[tuple[int, int]]) -> None:
        """Drop the memory of ports not in `keep` (gone from the topology)."""
        for key in list(self._prev):
            if key not in keep:
                del self._prev[key]
