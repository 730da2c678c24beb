"""The bounds on the distinct names of a run, kept by the writer whoever sends: its file
paths (RunNames) and its communicators (RunComms).

The hooks fold a rank's files and communicators beyond STACKLENS_MAX_KEYS into overflow
records; a sender that bypasses the hooks could still name a new file, or a new
communicator, in every record of every frame. The writer therefore keeps, per run, the
set of distinct names stored (read from the stored rows the first time this writer meets
the run) and folds a record naming a new one beyond the run's cap into the overflow
record, counters kept, so every total of the run stays exact and only the names beyond the
bound are lost:

- a file path beyond STACKLENS_MAX_RUN_FILES: the io record becomes the overflow record of
  its layer and phase, "<other>" (mount and file-system type empty);
- a communicator id beyond STACKLENS_MAX_RUN_COMMS: a coll record becomes its op's overflow
  record (comm_id overflow_comm, comm_size 0, no root), a comm_p2p record its op's and
  direction's (comm_id overflow_comm, no peer), as the hooks make them
  (contract/stacklens_wire.def); a comm record (how that communicator was made) is not
  stored, as the hooks send none beyond their bound;
- a call site, a (rank, site id) pair, beyond STACKLENS_MAX_RUN_CALLSITES: a callsite record
  is counted under the overflow site (site_id overflow_site), as the hooks count the sites
  beyond STACKLENS_MAX_CALLSITES, and the site's callsite_frame records are not stored.

Folded records are counted by reason (WriterStats.names_folded, /metrics:
`run_files`, `run_comms`, `run_comm_descriptions`, `run_callsites`, `run_callsite_frames`).

A name admitted by a transaction that is then rolled back stays admitted (the bound is
then reached a little early, never passed). Memory is bounded: past `max_remembered`
names over all runs the runs met longest ago are forgotten (read again when met again).
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import TypeVar

import numpy as np
import psycopg

from stacklens import wire

#: The path of the I/O overflow record (contract/stacklens_wire.def, io.path).
OVERFLOW_PATH = b"<other>"
#: The communicator id of an overflow record, and the peer (or root) of one without.
OVERFLOW_COMM = wire.BOUNDS["overflow_comm"]
NO_RANK = wire.BOUNDS["no_rank"]
IntOrArray = TypeVar("IntOrArray", int, np.ndarray)

#: The site id of the call sites beyond a bound (contract/stacklens_wire.def).
OVERFLOW_SITE = wire.BOUNDS["overflow_site"]

_STORED_PATHS = """
SELECT DISTINCT run_id, path FROM io_deltas
WHERE job_id = ANY(%b::bigint[]) AND run_id = ANY(%b::bigint[]) AND path <> '<other>'
"""

_STORED_COMMS = """
SELECT run_id, comm_id FROM coll_deltas
WHERE job_id = ANY(%(jobs)b::bigint[]) AND run_id = ANY(%(runs)b::bigint[])
  AND comm_id <> %(overflow)b
UNION
SELECT run_id, comm_id FROM comm_p2p_deltas
WHERE job_id = ANY(%(jobs)b::bigint[]) AND run_id = ANY(%(runs)b::bigint[])
  AND comm_id <> %(overflow)b
UNION
SELECT run_id, comm_id FROM comm_made
WHERE job_id = ANY(%(jobs)b::bigint[]) AND run_id = ANY(%(runs)b::bigint[])
"""

_STORED_SITES = """
SELECT run_id, world_rank, site_id FROM callsite_deltas
WHERE job_id = ANY(%(jobs)b::bigint[]) AND run_id = ANY(%(runs)b::bigint[])
  AND site_id <> %(overflow)b
UNION
SELECT run_id, world_rank, site_id FROM callsite_paths
WHERE job_id = ANY(%(jobs)b::bigint[]) AND run_id = ANY(%(runs)b::bigint[])
"""


def site_key(rank: IntOrArray, site_id: IntOrArray) -> IntOrArray:
    """One name for a rank's call site (site ids are each rank's own numbering); ints or
    int64 arrays."""
    return (rank << 32) | site_id  # type: ignore[no-any-return]


class _RunKeys:
    """Distinct names (keys) of each run this writer stores frames of, up to `cap` each."""

    def __init__(self, cap: int, max_remembered: int = 1 << 20):
        """`cap`: distinct names stored per run (beyond: folded); `max_remembered`: names
        held in memory over all runs before the runs met longest ago are forgotten."""
        self.cap = cap
        self.max_remembered = max(max_remembered, cap)
        self._keys: collections.OrderedDict[int, set[Hashable]] = collections.OrderedDict()
        self._held = 0

    async def _stored(
        self, conn: psycopg.AsyncConnection, jobs: list[int], runs: list[int]
    ) -> list[tuple[int, Hashable]]:
        """(run, name) of every name stored for the runs `runs` of the jobs `jobs`."""
        raise NotImplementedError

    async def load(
        self, conn: psycopg.AsyncConnection, job_ids: np.ndarray, run_ids: np.ndarray
    ) -> None:
        """Read the stored names of the runs `run_ids` (of the jobs `job_ids`, same order)
        this writer does not hold yet; forget the runs met longest ago if memory is full."""
        wanted = [(j, r) for j, r in zip(job_ids.tolist(), run_ids.tolist(), strict=True)
                  if r not in self._keys]  # fmt: skip
        for run in set(run_ids.tolist()) & set(self._keys):
            self._keys.move_to_end(run)
        if not wanted:
            return
        jobs, runs = sorted({j for j, _ in wanted}), sorted({r for _, r in wanted})
        found: dict[int, set[Hashable]] = {run: set() for run in runs}
        async with conn.transaction():  # no transaction left open
            for run, name in await self._stored(conn, jobs, runs):
                found[run].add(name)
        for run, names in found.items():
            if run not in self._keys:  # another worker may have read it meanwhile
                self._keys[run] = names
                self._held += len(names)
        keep = set(run_ids.tolist())
        while self._held > self.max_remembered:
            old = next((r for r in self._keys if r not in keep), None)
            if old is None:
                break
            self._held -= len(self._keys.pop(old))

    def _admit(self, run: int, name: Hashable) -> bool:
        """Whether `name` is (now) one of `run`'s stored names; admitted if within the cap.
        A run not loaded is taken as having none stored."""
        names = self._keys.setdefault(run, set())
        if name in names:
            return True
        if len(names) < self.cap:
            names.add(name)
            self._held += 1
            return True
        return False

    def beyond(self, run_ids: np.ndarray, keys: np.ndarray, exempt: int) -> np.ndarray:
        """Which records (of the runs `run_ids`, naming the integer names `keys`, in the
        order met) name one beyond their run's cap (admitting, in that order, the new ones
        within it); records naming `exempt` (the overflow record's) never are."""
        out = np.zeros(len(keys), dtype=bool)
        if not len(keys):
            return out
        pairs = np.stack([run_ids.astype(np.int64), keys.astype(np.int64)], axis=1)
        unique, first, inverse = np.unique(pairs, axis=0, return_index=True,
                                           return_inverse=True)  # fmt: skip
        refused = np.zeros(len(unique), dtype=bool)
        for u in np.argsort(first, kind="stable").tolist():  # in the order met
            run, key = unique[u].tolist()
            refused[u] = key != exempt and not self._admit(run, key)
        out[:] = refused[inverse.reshape(-1)]
        return out


class RunNames(_RunKeys):
    """Distinct file paths of each run (io records), up to `cap` each."""

    async def _stored(
        self, conn: psycopg.AsyncConnection, jobs: list[int], runs: list[int]
    ) -> list[tuple[int, Hashable]]:
        async with conn.cursor() as cur:
            await cur.execute(_STORED_PATHS, (jobs, runs))
            return [(run, path.encode("utf-8", "surrogateescape"))
                    for run, path in await cur.fetchall()]  # fmt: skip

    def fold(self, run_ids: np.ndarray, records: np.ndarray) -> int:
        """Fold, in place, the io `records` (of the runs `run_ids`, one per record) whose
        path is a new one beyond their run's cap into the overflow record; returns how
        many were folded."""
        folded = np.zeros(len(records), dtype=bool)
        for i, (run, path) in enumerate(zip(run_ids.tolist(), records["path"].tolist(),
                                            strict=True)):  # fmt: skip
            if path != OVERFLOW_PATH and not self._admit(run, path):
                folded[i] = True
        if folded.any():
            records["path"][folded] = OVERFLOW_PATH
            records["mount"][folded] = b""
            records["fstype"][folded] = b""
        return int(folded.sum())


class RunComms(_RunKeys):
    """Distinct communicator ids of each run (coll, comm_p2p and comm records), up to `cap`
    each."""

    async def _stored(
        self, conn: psycopg.AsyncConnection, jobs: list[int], runs: list[int]
    ) -> list[tuple[int, Hashable]]:
        async with conn.cursor() as cur:
            params = {"jobs": jobs, "runs": runs, "overflow": OVERFLOW_COMM}
            await cur.execute(_STORED_COMMS, params)
            return [(run, int(comm)) for run, comm in await cur.fetchall()]


class RunSites(_RunKeys):
    """Distinct call sites, (rank, site id) as site_key, of each run (callsite and
    callsite_frame records), up to `cap` each."""

    async def _stored(
        self, conn: psycopg.AsyncConnection, jobs: list[int], runs: list[int]
    ) -> list[tuple[int, Hashable]]:
        async with conn.cursor() as cur:
            params = {"jobs": jobs, "runs": runs, "overflow": OVERFLOW_SITE}
            await cur.execute(_STORED_SITES, params)
            return [(run, site_key(rank, site)) for run, rank, site in await cur.fetchall()]
