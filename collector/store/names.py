"""The bound on the distinct file names of a run, kept by the writer whoever sends.

The hooks fold a rank's files beyond STACKLENS_MAX_KEYS into the overflow record
"<other>" of their I/O layer and phase; a sender that bypasses the hooks could still name
a new file in every record of every frame. The writer therefore keeps, per run, the set of
distinct paths stored (read from io_deltas the first time this writer meets the run) and
folds a record naming a path beyond `cap` new ones into the overflow record of its layer
and phase: the record's counters stay, under "<other>" (mount and file-system type
empty), so every total of the run stays exact and only the names beyond the bound are
lost. Folded records are counted (WriterStats.names_folded, /metrics).

A name admitted by a transaction that is then rolled back stays admitted (the bound is
then reached a little early, never passed). Memory is bounded: past `max_remembered`
names over all runs the runs met longest ago are forgotten (read again when met again).
"""

from __future__ import annotations

import collections

import numpy as np
import psycopg

#: The path of the I/O overflow record (contract/stacklens_wire.def, io.path).
OVERFLOW_PATH = b"<other>"

_STORED_PATHS = """
SELECT DISTINCT run_id, path FROM io_deltas
WHERE job_id = ANY(%b::bigint[]) AND run_id = ANY(%b::bigint[]) AND path <> '<other>'
"""


class RunNames:
    """Distinct file paths of each run this writer stores frames of, up to `cap` each."""

    def __init__(self, cap: int, max_remembered: int = 1 << 20):
        """`cap`: distinct paths stored per run (beyond: folded); `max_remembered`: paths
        held in memory over all runs before the runs met longest ago are forgotten."""
        self.cap = cap
        self.max_remembered = max(max_remembered, cap)
        self._paths: collections.OrderedDict[int, set[bytes]] = collections.OrderedDict()
        self._held = 0

    async def load(
        self, conn: psycopg.AsyncConnection, job_ids: np.ndarray, run_ids: np.ndarray
    ) -> None:
        """Read the stored paths of the runs `run_ids` (of the jobs `job_ids`, same order)
        this writer does not hold yet; forget the runs met longest ago if memory is full."""
        wanted = [(j, r) for j, r in zip(job_ids.tolist(), run_ids.tolist(), strict=True)
                  if r not in self._paths]  # fmt: skip
        for run in set(run_ids.tolist()) & set(self._paths):
            self._paths.move_to_end(run)
        if not wanted:
            return
        jobs, runs = sorted({j for j, _ in wanted}), sorted({r for _, r in wanted})
        found: dict[int, set[bytes]] = {run: set() for run in runs}
        async with conn.transaction(), conn.cursor() as cur:  # no transaction left open
            await cur.execute(_STORED_PATHS, (jobs, runs))
            for run, path in await cur.fetchall():
                found[run].add(path.encode("utf-8", "surrogateescape"))
        for run, paths in found.items():
            if run not in self._paths:  # another worker may have read it meanwhile
                self._paths[run] = paths
                self._held += len(paths)
        keep = set(run_ids.tolist())
        while self._held > self.max_remembered:
            old = next((r for r in self._paths if r not in keep), None)
            if old is None:
                break
            self._held -= len(self._paths.pop(old))

    def fold(self, run_ids: np.ndarray, records: np.ndarray) -> int:
        """Fold, in place, the io `records` (of the runs `run_ids`, one per record) whose
        path is a new one beyond their run's cap into the overflow record; returns how
        many were folded. Runs not loaded are taken as having no stored path."""
        folded = np.zeros(len(records), dtype=bool)
        for i, (run, path) in enumerate(zip(run_ids.tolist(), records["path"].tolist(),
                                            strict=True)):  # fmt: skip
            paths = self._paths.setdefault(run, set())
            if path == OVERFLOW_PATH or path in paths:
                continue
            if len(paths) < self.cap:
                paths.add(path)
                self._held += 1
            else:
                folded[i] = True
        if folded.any():
            records["path"][folded] = OVERFLOW_PATH
            records["mount"][folded] = b""
            records["fstype"][folded] = b""
        return int(folded.sum())
