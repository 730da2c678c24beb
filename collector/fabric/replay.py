"""Replay source: sweeps recorded to a JSON-lines file, played back as if read live.

One line per sweep: {"t_start_ns", "t_end_ns", "ports": [[guid, port, extended,
saturated_bits, v0 .. v10], ...]} with values already in bytes/packets (the units of
RawSweep, counters in PORT_COUNTERS order). `record()` writes such lines from any source.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from collector.fabric.counters import N_COUNTERS, RawSweep


def sweep_to_line(sweep: RawSweep) -> str:
    """One recorded line of `sweep`."""
    bits = (sweep.saturated * (1 << np.arange(N_COUNTERS))).sum(axis=1)
    ports = [
        [int(sweep.guids[i]), int(sweep.ports[i]), bool(sweep.extended[i]), int(bits[i])]
        + [int(v) for v in sweep.values[i]]
        for i in range(len(sweep))
    ]
    return json.dumps({"t_start_ns": sweep.t_start_ns, "t_end_ns": sweep.t_end_ns, "ports": ports})


def line_to_sweep(line: str) -> RawSweep:
    """Parse one recorded line back into a RawSweep."""
    rec = json.loads(line)
    rows = rec["ports"]
    bits = np.array([r[3] for r in rows], dtype=np.int64)
    return RawSweep(
        guids=np.array([r[0] for r in rows], dtype=np.uint64),
        ports=np.array([r[1] for r in rows], dtype=np.uint8),
        values=np.array([r[4:] for r in rows], dtype=np.uint64).reshape(len(rows), N_COUNTERS),
        saturated=((bits[:, None] >> np.arange(N_COUNTERS)) & 1).astype(bool),
        extended=np.array([r[2] for r in rows], dtype=bool),
        t_start_ns=rec["t_start_ns"],
        t_end_ns=rec["t_end_ns"],
    )


def record(sweep: RawSweep, path: Path) -> None:
    """Append `sweep` to the recording at `path`."""
    with open(path, "a") as f:
        f.write(sweep_to_line(sweep) + "\n")


class ReplaySource:
    """Plays the sweeps of a recording in order; `sweep()` raises EOFError at the end."""

    name = "replay"

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lines = [ln for ln in self.path.read_text().splitlines() if ln.strip()]
        self._next = 0

    def discover(self) -> None:
        """No fabric topology from this source (local/recorded counters only)."""
        return None

    def sweep(self) -> RawSweep:
        """The next recorded sweep."""
        if self._next >= len(self._lines):
            raise EOFError(f"{self.path}: all {len(self._lines)} sweeps replayed")
        self._next += 1
        return line_to_sweep(self._lines[self._next - 1])
