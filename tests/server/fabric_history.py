"""A seeded port history of the small fabric (tests/server/fabric_data.py) written through the
real FabricStore: 200 sweeps, 1 s apart, across four UTC minutes, every counter of every
port moving by a known amount each sweep; leaf1[1]'s symbol errors move at sweeps 50-52
(one burst) and at sweep 120 (another); host1[1]'s PortRcvErrors go down at sweep 90 (a
reset: unknown); host2[1] stops answering for the last 4 sweeps. `History.expected`
gives any window's sums from the generated values alone (the test oracle).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from stacklens.constants import PORT_COUNTERS, RATE_COUNTERS
from tests.server.fabric_data import CAPACITY, HOST1, HOST2, LEAF1, SECOND, topology

#: The first sweep's end: 25 s into a UTC minute (1,700,000,040 s is a whole minute).
START = 1_700_000_065 * SECOND
SWEEPS = 200
SILENT_FROM = SWEEPS - 4  # host2[1] answers no sweep from this one on
BURSTS = {50: 2, 51: 2, 52: 2, 120: 5}  # sweep -> leaf1[1] symbol errors added
RESET_AT = 90  # host1[1]'s PortRcvErrors go from 10 to 4
ENDS = sorted(CAPACITY)


def increment(end: int, counter: int, i: int) -> int:
    """What counter `counter` of end number `end` gains at sweep i >= 1 (data counters in
    4-octet words)."""
    name = PORT_COUNTERS[counter]
    if name in RATE_COUNTERS:
        return ((i * (end + 3) + counter * 5) % 11 + 1) * 1000
    if name == "symbol_errors" and ENDS[end] == (LEAF1, 1):
        return BURSTS.get(i, 0)
    return 0


@dataclass
class History:
    """Per (end, sweep): the stored sample's ts, dt (None: first) and deltas (bytes for the
    data counters; None: unknown)."""

    samples: dict[tuple[tuple[int, int], int], dict] = field(default_factory=dict)

    def ts(self, i: int) -> int:
        return START + i * SECOND

    def expected(self, end: tuple[int, int], lo: int, hi: int) -> dict:
        """The sums of `end`'s samples with lo <= ts < hi: samples, per counter the sum of the
        known deltas (None: none known) and per rate counter the time that knows it."""
        chosen = [s for (e, _), s in self.samples.items() if e == end and lo <= s["ts"] < hi]
        out: dict[str, int | None] = {"samples": len(chosen)}
        for c in PORT_COUNTERS:
            known = [s["deltas"][c] for s in chosen if s["deltas"][c] is not None]
            out[c] = sum(known) if known else None
            if c in RATE_COUNTERS:
                out[f"t_{c}"] = sum(s["dt"] for s in chosen if s["deltas"][c] is not None)
        return out


def write_history(url: str) -> History:
    """Write the topology (at START - 10 s) and the sweeps; the generated history."""
    store = FabricStore(url)
    history = History()
    values = np.zeros((len(ENDS), len(PORT_COUNTERS)), dtype=np.uint64)
    values[ENDS.index((HOST1, 1)), PORT_COUNTERS.index("rcv_errors")] = 10
    try:
        store.write_topology(topology(), START - 10 * SECOND, [])
        tracker = DeltaTracker()
        for i in range(SWEEPS):
            ts = history.ts(i)
            if i:
                for e in range(len(ENDS)):
                    for c in range(len(PORT_COUNTERS)):
                        values[e, c] += np.uint64(increment(e, c, i))
            if i == RESET_AT:
                values[ENDS.index((HOST1, 1)), PORT_COUNTERS.index("rcv_errors")] = 4
            answered = np.array([not (e == (HOST2, 1) and i >= SILENT_FROM) for e in ENDS])
            sweep = RawSweep.from_words(
                [g for g, _ in ENDS], [p for _, p in ENDS], values.copy(),
                np.ones(len(ENDS), dtype=bool), answered, ts - SECOND // 10, ts,
            )  # fmt: skip
            store.write_samples(tracker.update(sweep))
            for e, end in enumerate(ENDS):
                if not answered[e]:
                    continue
                deltas = {}
                for c, name in enumerate(PORT_COUNTERS):
                    gain = increment(e, c, i) * (4 if name in ("xmit_bytes", "rcv_bytes") else 1)
                    reset = i == RESET_AT and end == (HOST1, 1) and name == "rcv_errors"
                    deltas[name] = None if i == 0 or reset else gain
                history.samples[(end, i)] = {
                    "ts": ts, "dt": SECOND if i else None, "deltas": deltas
                }  # fmt: skip
    finally:
        store.close()
    return history
