"""The frame writer: batches validated frames and commits each batch in one transaction.

Every frame's data is written at most once: the `received_frames` ledger deduplicates by
(run, rank, seq) inside the same transaction as the data, so a resent frame is recognised
even after a collector restart. A job is its owner's (the Unix user the ingest proved,
`FrameBatch.owner`) and its id: the same job id sent by two users is two jobs, so nobody
can pre-empt another user's job. A run is one launch of a job; the writer registers jobs,
runs and the numbers of non-MPI processes (their rank) before it stores their frames.
Callers are told a frame is stored only after COMMIT.

Frames arrive as `FrameBatch`es (collector/codec.py: the received bytes plus one record
per validated frame); a batch's bookkeeping is done with numpy over all its frames at
once and its array-layout tables are encoded to binary COPY by the compiled codec, so no
Python runs per record and little per frame.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import pwd
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import psycopg

from collector.codec import FrameBatch, encode_arrays, frame_addresses, join_info
from collector.store.copy import COPY_SIGNATURE, COPY_TRAILER, binary_copy
from collector.store.jobs import JOB_STATUS, UPSERT_JOBS
from collector.store.launches import LaunchRecord, launch_records, store_launches
from collector.store.names import (
    NO_RANK,
    OVERFLOW_COMM,
    OVERFLOW_SITE,
    RunComms,
    RunNames,
    RunSites,
    site_key,
)
from collector.store.partitions import Partitions
from collector.store.rollups import MARK_DIRTY
from collector.store.tables import DELTA_TABLES, INTERVAL_COLUMNS, DeltaTable
from stacklens import wire
from stacklens.constants import DAY_NS, MINUTE_NS
from stacklens.mpi_ops import op_names
from stacklens.wire import FINAL_TYPES, FrameError, FrameType, Status

log = logging.getLogger(__name__)

#: Registration (its own short transaction, see FrameWriter._register): new jobs ...
_CREATE_JOBS = """
INSERT INTO jobs (owner_uid, job_key, world_size, command, "user", status, started_ns,
                  last_seen_ns)
SELECT * FROM unnest(%b::bigint[], %b::text[], %b::int[], %b::text[], %b::text[], %b::text[],
                     %b::bigint[], %b::bigint[])
ON CONFLICT (owner_uid, job_key) DO NOTHING
"""

#: ... the jobs whose runs or processes are being numbered, locked in key order (the order
#: of UPSERT_JOBS) against other registrations; FOR NO KEY UPDATE does not conflict with
#: the KEY SHARE locks that rows referring to the job take.
_LOCK_JOBS = """
SELECT j.id, j.owner_uid, j.job_key FROM jobs j
JOIN unnest(%b::bigint[], %b::text[]) AS k(owner_uid, job_key)
    ON j.owner_uid = k.owner_uid AND j.job_key = k.job_key
ORDER BY j.owner_uid, j.job_key COLLATE "C" FOR NO KEY UPDATE OF j
"""

_KNOWN_RUNS = """
SELECT r.job_id, r.run_key, r.id FROM runs r
JOIN unnest(%b::bigint[], %b::bigint[]) AS k(job_id, run_key)
    ON r.job_id = k.job_id AND r.run_key = k.run_key
"""

_LAST_ORDINALS = "SELECT job_id, max(ordinal) FROM runs WHERE job_id = ANY(%b::bigint[]) GROUP BY 1"

_CREATE_RUNS = """
INSERT INTO runs (job_id, run_key, ordinal, kind, label, world_size, command, "user", status,
                  started_ns, last_seen_ns, launch_key, exe_build_id, exe_path)
SELECT j, k, o, kind, label, size, command, u, 'running', s, e, l, b, x
FROM unnest(%b::bigint[], %b::bigint[], %b::int[], %b::text[], %b::text[], %b::int[],
            %b::text[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[], %b::text[],
            %b::text[])
     AS v(j, k, o, kind, label, size, command, u, s, e, l, b, x)
RETURNING job_id, run_key, id
"""

#: Runs a launch record made before any of its ranks' frames came (collector/store/
#: launches.py: run key = launch key, no ranks), for (job, launch key) pairs of new runs;
#: locked: the first new run of that launch takes it over (_ADOPT_LAUNCH_RUN).
_LAUNCH_RUNS = """
SELECT r.job_id, r.run_key, r.id FROM runs r
JOIN unnest(%b::bigint[], %b::bigint[]) AS k(job_id, launch_key)
    ON r.job_id = k.job_id AND r.run_key = k.launch_key AND r.launch_key = k.launch_key
WHERE NOT EXISTS (SELECT 1 FROM ranks WHERE ranks.job_id = r.job_id AND ranks.run_id = r.id)
FOR NO KEY UPDATE OF r
"""

#: ... taken over by the ranks' run: it becomes that run (its key, kind, size, command,
#: start as the ranks say) and keeps its ordinal, the launch's columns and how the launch
#: ended (the ranks' final frames then end it as they would have: _END_RUNS).
_ADOPT_LAUNCH_RUN = """
UPDATE runs SET run_key = %(run_key)s, kind = %(kind)s, label = %(label)s,
    world_size = %(size)s, command = COALESCE(%(command)s, runs.command),
    "user" = COALESCE(%(user)s, runs."user"), started_ns = %(start)s,
    last_seen_ns = GREATEST(runs.last_seen_ns, %(end)s),
    finished_ns = GREATEST(runs.finished_ns, %(end)s)
WHERE id = %(id)s
"""

#: New runs of a launch whose record another run of it already holds (a launch of several
#: runs, the record first): the launch's columns, and its end (as launches._ON_RUNS).
_LAUNCH_SIBLINGS = """
UPDATE runs SET ranks_expected = s.ranks_expected, exit_code = s.exit_code,
    exit_signal = s.exit_signal, forwarded_signal = s.forwarded_signal,
    launch_output = s.launch_output,
    status = CASE WHEN s.exit_signal IS NOT NULL OR s.forwarded_signal IS NOT NULL THEN 'killed'
                  WHEN s.exit_code <> 0 THEN 'failed' ELSE 'finished' END,
    finished_ns = GREATEST(runs.last_seen_ns, s.finished_ns),
    last_seen_ns = GREATEST(runs.last_seen_ns, s.finished_ns)
FROM (SELECT DISTINCT ON (job_id, launch_key) id, job_id, launch_key, ranks_expected,
             exit_code, exit_signal, forwarded_signal, launch_output, finished_ns
      FROM runs WHERE launch_output IS NOT NULL AND job_id = ANY(%(jobs)s)
      ORDER BY job_id, launch_key, id) s
WHERE runs.id = ANY(%(runs)s) AND runs.launch_output IS NULL
    AND s.job_id = runs.job_id AND s.launch_key = runs.launch_key AND s.id <> runs.id
"""

_KNOWN_PROCESSES = """
SELECT p.run_id, p.host, p.pid, p.proc_start_ns, p.process FROM run_processes p
JOIN unnest(%b::bigint[], %b::text[], %b::int[], %b::bigint[]) AS k(run_id, host, pid, start)
    ON p.run_id = k.run_id AND p.host = k.host AND p.pid = k.pid AND p.proc_start_ns = k.start
"""

_LAST_PROCESSES = (
    "SELECT run_id, max(process) FROM run_processes WHERE run_id = ANY(%b::bigint[]) GROUP BY 1"
)

_CREATE_PROCESSES = """
INSERT INTO run_processes (run_id, host, pid, proc_start_ns, process)
SELECT * FROM unnest(%b::bigint[], %b::text[], %b::int[], %b::bigint[], %b::int[])
"""

_COPY_LEDGER = (
    "COPY received_frames (job_id, run_id, world_rank, seq, received_ns) FROM STDIN (FORMAT BINARY)"
)

_INSERT_LEDGER = """
INSERT INTO received_frames (job_id, run_id, world_rank, seq, received_ns)
SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::int[], %b::bigint[], %b::bigint[])
ON CONFLICT DO NOTHING
RETURNING run_id, world_rank, seq
"""

_UPSERT_RANKS = """
INSERT INTO ranks (job_id, run_id, world_rank, host, pid, first_seen_ns, last_seen_ns,
                   finished, killed, aborted, unfinalized, abort_code, net_devices,
                   keys_dropped, frames_dropped, frames_spooled)
SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::int[], %b::text[], %b::int[],
                     %b::bigint[], %b::bigint[], %b::bool[], %b::bool[], %b::bool[], %b::bool[],
                     %b::int[], %b::text[], %b::bigint[], %b::bigint[], %b::bigint[])
ON CONFLICT (job_id, run_id, world_rank) DO UPDATE SET
    first_seen_ns = LEAST(ranks.first_seen_ns, EXCLUDED.first_seen_ns),
    last_seen_ns = GREATEST(ranks.last_seen_ns, EXCLUDED.last_seen_ns),
    finished = ranks.finished OR EXCLUDED.finished,
    killed = ranks.killed OR EXCLUDED.killed,
    aborted = ranks.aborted OR EXCLUDED.aborted,
    unfinalized = ranks.unfinalized OR EXCLUDED.unfinalized,
    abort_code = COALESCE(EXCLUDED.abort_code, ranks.abort_code),
    net_devices = COALESCE(EXCLUDED.net_devices, ranks.net_devices),
    keys_dropped = ranks.keys_dropped + EXCLUDED.keys_dropped,
    frames_dropped = ranks.frames_dropped + EXCLUDED.frames_dropped,
    frames_spooled = ranks.frames_spooled + EXCLUDED.frames_spooled
"""

# Rows are locked in (job key, run key) order; a run retention deleted meanwhile is inserted
# with ordinal 0, and the RETURNING ids tell (the transaction is then rolled back).
_UPSERT_RUNS = """
INSERT INTO runs (job_id, run_key, ordinal, kind, label, world_size, command, "user", status,
                  started_ns, last_seen_ns, launch_key, exe_build_id, exe_path)
SELECT j, k, 0, kind, label, size, command, u, 'running', s, e, l, b, x
FROM unnest(%b::bigint[], %b::bigint[], %b::text[], %b::text[], %b::int[], %b::text[],
            %b::text[], %b::bigint[], %b::bigint[], %b::bigint[], %b::text[], %b::text[])
     AS v(j, k, kind, label, size, command, u, s, e, l, b, x)
ON CONFLICT (job_id, run_key) DO UPDATE SET
    world_size = CASE WHEN runs.kind = 'mpi' THEN GREATEST(runs.world_size, EXCLUDED.world_size)
                 ELSE (SELECT count(*) FROM run_processes p WHERE p.run_id = runs.id) END,
    started_ns = LEAST(runs.started_ns, EXCLUDED.started_ns),
    last_seen_ns = GREATEST(runs.last_seen_ns, EXCLUDED.last_seen_ns),
    status = CASE WHEN runs.status = 'lost' THEN 'running' ELSE runs.status END,
    label = COALESCE(runs.label, EXCLUDED.label),
    command = COALESCE(runs.command, EXCLUDED.command),
    "user" = COALESCE(runs."user", EXCLUDED."user"),
    launch_key = COALESCE(runs.launch_key, EXCLUDED.launch_key),
    exe_build_id = COALESCE(runs.exe_build_id, EXCLUDED.exe_build_id),
    exe_path = COALESCE(runs.exe_path, EXCLUDED.exe_path)
RETURNING id
"""

# How a run ends. MPI: 'aborted' as soon as one rank's final frame says it called MPI_Abort,
# else 'killed' as soon as one says it ended by a signal (the others may never report: a
# launcher SIGKILLs them; an abort makes it signal the others), else 'finished' once every
# rank has sent its final frame. Processes: 'running' while a process seen has not ended,
# then 'killed' if one ended by a signal, else 'finished' (a new process makes it run again).
_END_RUNS = """
UPDATE runs SET status = ended.status,
    finished_ns = CASE WHEN ended.status = 'running' THEN NULL ELSE runs.last_seen_ns END
FROM (SELECT r.run_id,
             CASE WHEN u.kind = 'mpi' AND bool_or(r.aborted) THEN 'aborted'
                  WHEN u.kind = 'mpi' AND bool_or(r.killed) THEN 'killed'
                  WHEN u.kind = 'mpi' AND count(*) FILTER (WHERE r.finished) >= u.world_size
                      THEN 'finished'
                  WHEN u.kind = 'mpi' THEN NULL
                  WHEN count(*) FILTER (WHERE r.finished) < u.world_size THEN 'running'
                  WHEN bool_or(r.killed) THEN 'killed'
                  ELSE 'finished' END AS status
      FROM ranks r JOIN runs u ON u.id = r.run_id
      WHERE r.run_id = ANY(%b::bigint[]) GROUP BY r.run_id, u.kind, u.world_size) ended
WHERE runs.id = ended.run_id AND ended.status IS NOT NULL AND runs.status <> ended.status
"""

#: What each owner has stored per day (the bound on storage per user reads it: StorageQuota
#: in collector/ingest/budget.py); rows in (owner, day) order, locked last.
_ADD_STORAGE = """
INSERT INTO owner_storage (owner_uid, day, frames, bytes)
SELECT * FROM unnest(%b::bigint[], %b::int[], %b::bigint[], %b::bigint[])
ON CONFLICT (owner_uid, day) DO UPDATE SET frames = owner_storage.frames + EXCLUDED.frames,
    bytes = owner_storage.bytes + EXCLUDED.bytes
"""

_HEALTH = ("keys_dropped", "frames_dropped", "frames_spooled")

_SYNC_OPS = """
INSERT INTO mpi_ops (id, name) SELECT * FROM unnest(%s::smallint[], %s::text[])
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name
"""

#: Failures of the database or the connection to it (not of a frame): the batch fails, its
#: senders resend it later.
_OUTAGE = (psycopg.OperationalError, psycopg.InterfaceError, OSError)

#: Frames that may wait for the batch loop before senders are asked to pause.
MAX_BACKLOG_FRAMES = 16384

#: Frames committed in one transaction at most. A transaction's fixed cost (its statements
#: besides the COPYs, the commit, psycopg's round trips) is several milliseconds of the
#: database's and the collector's CPU: a 16-peer frame cost 31 us of their CPU in batches of
#: up to 1,024 frames, 23 us in batches of up to 8,192 (bench/ingest.py, bench/RESULTS.md
#: "Ingest, third pass").
MAX_BATCH_FRAMES = 8192

#: A submission's outcome: the frames the database refused (index -> why); empty = all stored.
Refused = dict[int, FrameError]


@dataclass
class WriterStats:
    """Counters of what the writer did (exported on /metrics)."""

    frames_committed: int = 0
    frames_duplicate: int = 0
    batches: int = 0
    write_errors: int = 0
    data_errors: int = 0  # frames refused for a value the database refuses
    store_failed: int = 0  # frames refused for any other failure of their own (poison)
    # records whose new name beyond the run's bound was folded into the overflow record
    # (or, for a communicator's description, not stored), by reason
    # (collector/store/names.py)
    names_folded: collections.Counter[str] = field(default_factory=collections.Counter)
    rows: collections.Counter[str] = field(default_factory=collections.Counter)


@dataclass
class _Pending:
    """Frames that must be committed together, and the future their sender awaits."""

    batch: FrameBatch
    done: asyncio.Future[Refused]
    atomic: bool = False  # all frames or none: one refused value fails the whole batch


def _settle(pending: list[_Pending], error: Exception | None = None) -> None:
    """Resolve the submissions' futures: committed, or failed with `error`."""
    for p in pending:
        if p.done.done():
            continue
        if error is None:
            p.done.set_result({})
        else:
            p.done.set_exception(error)


def _split_launches(batches: list[FrameBatch]) -> tuple[list[FrameBatch], list[LaunchRecord]]:
    """The batches without their launch records (frames of type launch), and those records
    (collector/store/launches.py): stored after the rest, in a transaction of their own."""
    rest: list[FrameBatch] = []
    launches: list[LaunchRecord] = []
    for batch in batches:
        is_launch = batch.info["frame_type"] == FrameType.LAUNCH
        if not is_launch.any():
            rest.append(batch)
            continue
        launches += launch_records(batch, np.flatnonzero(is_launch), user_name)
        if not is_launch.all():
            rest.append(FrameBatch(batch.data, batch.info[~is_launch], batch.owner, batch.proven))
    return rest, launches


class _Frames:
    """The frames of several batches seen as one: their FRAME_INFO records, concatenated."""

    def __init__(self, batches: list[FrameBatch]):
        self.batches = batches
        self.info = join_info([b.info for b in batches]) if len(batches) > 1 else (
            batches[0].info)  # fmt: skip
        sizes = [len(b) for b in batches]
        self._batch = np.repeat(np.arange(len(batches)), sizes)
        self._local = np.concatenate([np.arange(n) for n in sizes])
        self.owner = np.repeat(np.array([b.owner for b in batches], dtype=np.int64), sizes)
        self.proven = np.repeat(np.array([b.proven for b in batches], dtype=bool), sizes)
        self.addresses = frame_addresses(batches)  # valid while the batches live

    def __len__(self) -> int:
        return len(self.info)

    def records(self, i: int, table: str) -> np.ndarray:
        """Frame i's records of a wire table."""
        records: np.ndarray = self.batches[self._batch[i]].records(int(self._local[i]), table)
        return records

    def field(self, which: np.ndarray, table: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The values of one u32 field of every record of a wire table in the frames
        `which`, in frame then record order, and the frame of each (vectorised: no Python
        per frame or record)."""
        spec = wire.SPEC.table(table)
        fdtype, offset = wire.fields_of(spec.dtype)[name][:2]
        assert fdtype == np.dtype("<u4"), "a u32 field"
        counts = self.info["count"][which, spec.id].astype(np.int64)
        frame = np.repeat(which, counts)
        total = int(counts.sum())
        within = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        start = self.info["offset"][which].astype(np.int64) + self.info["section"][which, spec.id]
        where = np.repeat(start, counts) + within * spec.dtype.itemsize + offset
        values = np.zeros(total, dtype=np.uint32)
        batch = self._batch[frame]
        for b in np.unique(batch).tolist():
            here = batch == b
            raw = np.frombuffer(self.batches[b].data, np.uint8)
            values[here] = raw[where[here, None] + np.arange(4)].copy().view("<u4").reshape(-1)
        return values, frame

    def net_devices(self, i: int) -> str | None:
        """The network devices frame i's rank was told to use ("NAME=value"), None if it
        carries no rank information or they are empty."""
        info = self.records(i, "rank_info")
        if not len(info):
            return None
        text = bytes(info["net_devices"][0]).split(b"\0", 1)[0].decode("utf-8", "replace")
        return text or None

    def rank_info(self, i: int) -> tuple[str | None, str | None, str | None, int | None,
                                         str | None, str | None]:  # fmt: skip
        """(command, user, run label, launch id: two's complement, executable's build-id,
        executable's path) of frame i, Nones if it carries no rank information (and for an
        empty user, label, build-id or path, a launch id 0). The user of a proven frame is
        its owner's name (what the read side filters on, server/access/owner.py), never
        the name claimed."""
        info = self.records(i, "rank_info")
        if not len(info):
            return None, None, None, None, None, None
        command, user, label, build, path = (
            bytes(info[name][0]).split(b"\0", 1)[0].decode("utf-8", "replace")
            for name in ("command", "user", "run_label", "exe_build_id", "exe_path")
        )
        if self.batches[self._batch[i]].proven:
            user = user_name(int(self.owner[i]))
        launch = int(info["launch_id"][0].astype(np.int64))
        return command, user or None, label or None, launch or None, build or None, path or None


@lru_cache(maxsize=4096)
def user_name(uid: int) -> str:
    """The login name of uid, or "uid:<uid>" for a uid without one."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid:{uid}"


def _groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Group rows by equal key columns: (first row of each group, group of each row, groups),
    the groups in key order (one stable sort of the key columns, no record comparisons)."""
    n = len(keys[0])
    order = np.lexsort(keys[::-1])  # the first key sorts first; equal keys keep row order
    starts = np.zeros(n, dtype=bool)
    starts[:1] = True
    for key in keys:
        ordered = key[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(starts) - 1
    first: np.ndarray = order[starts]
    return first, inverse, len(first)


class FrameWriter:
    """Commits frames to PostgreSQL in batches; `submit()` resolves once they are committed.

    Several workers (each with its own connection) take batches from one queue, so one
    prepares a batch while another's transaction runs. Concurrent transactions are safe:
    they lock rows in one order (ledger, rollup marks, ranks, runs, jobs; key order within
    each), registrations of new jobs, runs and processes lock only jobs (by key) and commit
    on their own first, and the ledger's unique key makes a frame sent twice at once wait
    and then be skipped.
    """

    def __init__(
        self,
        url: str,
        max_batch: int = MAX_BATCH_FRAMES,
        max_backlog: int = MAX_BACKLOG_FRAMES,
        workers: int = 3,
        max_run_names: int = 100_000,
        max_run_comms: int = 10_000,
        max_run_callsites: int = 1 << 20,
    ):
        """`max_run_names`, `max_run_comms`, `max_run_callsites`: distinct file paths,
        communicators and call sites stored per run (collector/store/names.py)."""
        self.url = url  # the database's
        self._workers = workers
        self._max_batch = max_batch
        self.max_backlog = max_backlog
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake = asyncio.Event()
        self._room: list[Callable[[], None]] = []
        self.backlog = 0  # frames queued, not yet taken by the batch loop
        self._tasks: list[asyncio.Task[None]] = []
        self._conns: dict[int, psycopg.AsyncConnection] = {}
        # job key -> jobs.id, (job key, run key) -> runs.id, ("process", runs.id, host, pid,
        # start) -> process number: as the database said
        self._ids_seen: _IdMap = {}
        self.stats = WriterStats()
        self.partitions = Partitions()
        self.names = RunNames(max_run_names)
        self.comms = RunComms(max_run_comms)
        self.sites = RunSites(max_run_callsites)
        #: Called after a commit that stored call-site frames, with their jobs' ids (the
        #: collector's resolver: collector/resolver.py; it must not block); None: nobody
        #: is told.
        self.on_sites: Callable[[list[int]], None] | None = None

    async def start(self) -> None:
        """Start the batch loops: `workers` transactions may be in flight at once."""
        self._tasks = [
            asyncio.create_task(self._run(i), name=f"stacklens-frame-writer-{i}")
            for i in range(self._workers)
        ]

    async def stop(self) -> None:
        """Stop the loops and close their database connections."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in self._conns.values():
            await conn.close()

    @property
    def full(self) -> bool:
        """Whether senders should pause until `when_room` calls them back."""
        return self.backlog >= self.max_backlog

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the backlog has drained below half the bound."""
        self._room.append(callback)

    def submit(self, batch: FrameBatch, atomic: bool = False) -> asyncio.Future[Refused]:
        """Queue a batch; the future resolves (to the frames the database refused, usually
        none) when its frames are committed in one transaction, or fails. An `atomic`
        batch is stored whole or not at all (a refused value fails it with FrameError)."""
        pending = _Pending(batch, asyncio.get_running_loop().create_future(), atomic)
        if not len(batch):
            pending.done.set_result({})
            return pending.done
        self._queue.append(pending)
        self.backlog += len(batch)
        self._wake.set()
        return pending.done

    async def store(self, batch: FrameBatch, atomic: bool = False) -> Refused:
        """Queue a batch and wait until it is committed (raises if the write failed)."""
        return await self.submit(batch, atomic)

    def _take(self) -> list[_Pending]:
        """Submissions for one transaction, up to max_batch frames (at least one)."""
        taken = [self._queue.popleft()]
        size = len(taken[0].batch)
        while self._queue and size + len(self._queue[0].batch) <= self._max_batch:
            taken.append(self._queue.popleft())
            size += len(taken[-1].batch)
        self.backlog -= size
        if self._room and self.backlog < self.max_backlog // 2:
            callbacks, self._room = self._room, []
            for callback in callbacks:
                callback()
        return taken

    async def _run(self, worker: int) -> None:
        with contextlib.suppress(psycopg.Error, OSError):  # else: at the first batch
            await self._connection(worker)  # connected before the first frames arrive
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            taken = self._take()
            try:
                await self._write(worker, [p.batch for p in taken])
            except _OUTAGE as exc:
                await self._outage(worker, taken, exc)
                continue
            except Exception as exc:
                # A value the database refuses (DataError), or any other failure that may
                # come from a frame (a poison frame): store each frame on its own so the
                # one that fails cannot block the others, nor come back forever.
                log.warning("writing %d submissions failed (%s: %s); storing each frame on "
                            "its own", len(taken), type(exc).__name__, exc)  # fmt: skip
                await self._write_separately(worker, taken)
                continue
            _settle(taken)

    async def _write_separately(self, worker: int, taken: list[_Pending]) -> None:
        """Write each submission on its own and, in one that fails, each frame on its own
        (a transaction holds up to MAX_BATCH_FRAMES frames of many senders: one per frame
        would keep this worker busy for long); the frames that fail on their own (not for
        an outage) are refused (`Refused`, counted in `data_errors` / `store_failed` and
        logged with their key: the poison frame is named and set aside; its sender keeps it
        as a rejected frame) and the others stored. An atomic batch fails whole."""
        for pending in taken:
            refused: Refused = {}
            batch = pending.batch
            try:
                if not pending.atomic and len(taken) > 1 and len(batch) > 1:
                    try:
                        await self._write(worker, [batch])
                    except _OUTAGE:
                        raise
                    except Exception:
                        pass  # the frames that fail are found one by one below
                    else:
                        pending.done.set_result(refused)
                        continue
                if pending.atomic:
                    try:
                        await self._write(worker, [batch])
                    except _OUTAGE:
                        raise
                    except Exception as exc:
                        pending.done.set_exception(self._poison(batch, None, exc))
                    continue
                for i in range(len(batch)):
                    try:
                        one = FrameBatch(batch.data, batch.info[i : i + 1], batch.owner,
                                         batch.proven)  # fmt: skip
                        await self._write(worker, [one])
                    except _OUTAGE:
                        raise
                    except Exception as exc:
                        refused[i] = self._poison(batch, i, exc)
            except _OUTAGE as exc:
                await self._outage(worker, [pending], exc)
            else:
                if not pending.done.done():
                    pending.done.set_result(refused)

    def _poison(self, batch: FrameBatch, i: int | None, exc: Exception) -> FrameError:
        """Count and log frame `i` of `batch` (None: the atomic batch) that failed to be
        stored on its own; what its sender is answered (bad_body), counted on /metrics as
        `bad_body` (a value the database refuses) or `store_failed` (any other failure)."""
        if isinstance(exc, psycopg.errors.DataError):
            self.stats.data_errors += 1
            why, label = f"database refused a value: {exc}", None
        else:
            self.stats.store_failed += 1
            why, label = f"storing it failed: {type(exc).__name__}: {exc}", "store_failed"
        if i is None:
            what = f"an atomic batch of {len(batch)} frames of uid {batch.owner}"
        else:
            info = batch.info[i]
            what = (f"frame (uid {batch.owner}, job {bytes(info['job'])!r}, run "
                    f"{int(info['run_id'])}, rank {int(info['world_rank'])}, seq "
                    f"{int(info['seq'])})")  # fmt: skip
        log.error("rejecting %s: %s", what, why, exc_info=not isinstance(exc, psycopg.Error))
        error = FrameError(Status.BAD_BODY, why)
        error.label = label or error.label
        return error

    async def _outage(self, worker: int, taken: list[_Pending], exc: Exception) -> None:
        """The database is unreachable or failing: fail the batch (senders keep the frames)."""
        self.stats.write_errors += 1
        frames = sum(len(p.batch) for p in taken)
        log.error("could not store %d frames, not acknowledging them: %s", frames, exc)
        conn = self._conns.pop(worker, None)
        if conn is not None:
            await conn.close()
        self._ids_seen.clear()
        _settle(taken, exc)
        await asyncio.sleep(0.5)

    async def _connection(self, worker: int) -> psycopg.AsyncConnection:
        """A worker's connection; a new one also (re)syncs the MPI op names."""
        conn = self._conns.get(worker)
        if conn is None or conn.closed:
            conn = await psycopg.AsyncConnection.connect(self.url)
            names = op_names()
            async with conn.transaction():
                await conn.execute(_SYNC_OPS, (list(range(len(names))), list(names)))
                await self.partitions.load(conn)  # the days ingest need not count as new
            self._conns[worker] = conn
        return conn

    async def _write(self, worker: int, batches: list[FrameBatch]) -> None:
        """Write frames in one transaction (ledger, deltas, rollup marks, ranks, runs, jobs).

        Everything is prepared before the transaction, with the ids of the jobs, runs and
        processes known from earlier commits (unknown ones are registered first, in a short
        transaction of their own), and the rows other transactions also update (rollup
        marks, ranks, runs, jobs) come last: the workers' transactions overlap up to there,
        one preparing or copying while the other finishes. Frames stored before (a resend)
        only make the plan be prepared again; a remembered id that is gone (retention
        deleted the job) rolls the transaction back and it is written again.
        """
        batches, launches = _split_launches(batches)
        conn = await self._connection(worker)
        if batches:
            frames = _Frames(batches)
            runs = _Runs(frames)
            days = np.unique(frames.info["t_end"] // DAY_NS).tolist()
            await self.partitions.ensure(conn, days)
            try:
                await self._write_once(conn, frames, runs, await self._ids(conn, runs))
            except (_StaleIds, psycopg.errors.ForeignKeyViolation):  # ranks -> runs, jobs
                self._ids_seen.clear()
                await self._write_once(conn, frames, runs, await self._ids(conn, runs))
        if launches:
            await store_launches(conn, launches)
            self.stats.frames_committed += len(launches)

    async def _write_once(
        self, conn: psycopg.AsyncConnection, frames: _Frames, runs: _Runs, ids: _Ids
    ) -> None:
        io = frames.info["count"][:, _IO_ID] > 0
        await self.names.load(conn, ids.frame_job[io], ids.frame_run[io])
        comm = (frames.info["count"][:, _COMM_IDS] > 0).any(axis=1)
        await self.comms.load(conn, ids.frame_job[comm], ids.frame_run[comm])
        site = (frames.info["count"][:, _SITE_IDS] > 0).any(axis=1)
        await self.sites.load(conn, ids.frame_job[site], ids.frame_run[site])
        plan = _Plan(frames, ids, None, self.names, self.comms, self.sites)  # names read
        rows: collections.Counter[str] = collections.Counter()
        async with conn.transaction(), conn.cursor() as cur:
            if not await self._ledger_fast(conn, cur, plan):
                await cur.execute(_INSERT_LEDGER, plan.ledger(time.time_ns()))
                stored = {tuple(row) for row in await cur.fetchall()}
                if len(stored) != len(plan.fresh):
                    plan = _Plan(frames, ids, plan.keep(stored), self.names, self.comms,
                                 self.sites)  # fmt: skip
            for table, records, payload in plan.copies():
                async with cur.copy(table.copy_statement) as copy:
                    for part in payload:
                        await copy.write(part)
                rows[table.view or table.sql] += records
            for statement, params in plan.statements():
                await cur.execute(statement, params)
            await cur.execute(_UPSERT_RUNS, runs.params(ids.jobs))
            if sorted(ids.runs.tolist()) != sorted(row[0] for row in await cur.fetchall()):
                raise _StaleIds
            if ending := plan.ending(runs):
                await cur.execute(_END_RUNS, (ending,))
            await cur.execute(UPSERT_JOBS, runs.job_params())
            if sorted(ids.jobs.tolist()) != sorted(row[0] for row in await cur.fetchall()):
                raise _StaleIds
            await cur.execute(JOB_STATUS, (ids.jobs.tolist(),))
            await cur.execute(_ADD_STORAGE, plan.storage())
        self.stats.rows.update(rows)
        self.stats.names_folded.update(+plan.folded)
        described = frames.info["count"][plan.fresh, _SITE_FRAME_ID] > 0
        if self.on_sites is not None and described.any():
            self.on_sites(np.unique(ids.frame_job[plan.fresh[described]]).tolist())
        self.stats.batches += 1
        self.stats.frames_committed += len(plan.fresh)
        self.stats.frames_duplicate += len(frames) - len(plan.fresh)

    async def _ids(self, conn: psycopg.AsyncConnection, runs: _Runs) -> _Ids:
        """The ids of the frames' jobs and runs and the numbers of their processes: from
        earlier commits, else registered now (_register)."""
        seen = self._ids_seen
        if len(seen) > _MAX_IDS_SEEN:
            seen.clear()  # a bound on memory; forgetting costs one registration each
        # A copy of what this batch needs: another worker may clear `seen` meanwhile.
        run_keys = runs.run_keys()
        known = {key: seen[key] for key in [*runs.job_keys, *run_keys] if key in seen}
        process_keys = runs.process_keys([known.get(key) for key in run_keys])
        known.update({key: seen[key] for key in process_keys if key in seen})
        if any(key not in known for key in [*runs.job_keys, *run_keys, *process_keys]):
            learned = await self._register(conn, runs)
            seen.update(learned)
            known.update(learned)
        run_ids = [known[key] for key in run_keys]
        return _Ids.of(
            runs,
            [known[key] for key in runs.job_keys],
            run_ids,
            [known[key] for key in runs.process_keys(run_ids)],
        )

    async def _register(self, conn: psycopg.AsyncConnection, runs: _Runs) -> _IdMap:
        """Create the batch's unknown jobs, runs (ordinal: the next of the job) and processes
        (number: the next of the run) in one short transaction; returns the id of every
        job, run and process of `runs`, keyed as in the writer's memory of them.

        It commits before the frames' transaction, so ordinals and process numbers stay
        fixed whatever happens to the frames (a resend finds them); the jobs concerned are
        locked against other registrations while numbers are drawn. Lock order: jobs by
        key, as in the frames' transaction, which never waits for a registration holding
        anything it has locked (its rows' references take KEY SHARE locks only).
        """
        learned: _IdMap = {}
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(_CREATE_JOBS, runs.job_params())
            await cur.execute(_LOCK_JOBS, runs.job_columns())
            learned.update({(owner, key): job_id for job_id, owner, key in await cur.fetchall()})
            job_ids = [learned[key] for key in runs.job_keys]
            wanted = runs.run_rows(job_ids)
            await cur.execute(_KNOWN_RUNS, (wanted["job_id"], wanted["run_key"]))
            found = {(j, k): run_id for j, k, run_id in await cur.fetchall()}
            missing = [i for i, key in enumerate(zip(wanted["job_id"], wanted["run_key"],
                                                     strict=True)) if key not in found]  # fmt: skip
            new_jobs = sorted({wanted["job_id"][i] for i in missing})
            if missing:
                # a launch's record may have come first: its run becomes the ranks' run
                missing = await self._adopt_launch_runs(cur, wanted, missing, found)
            if missing:
                await cur.execute(_LAST_ORDINALS, (new_jobs,))
                last: dict[int, int] = dict(await cur.fetchall())
                ordinals = []
                for i in sorted(missing, key=lambda i: wanted["started_ns"][i]):
                    job = wanted["job_id"][i]
                    last[job] = last.get(job, 0) + 1
                    ordinals.append((i, last[job]))
                rows = [i for i, _ in ordinals]
                params = [[wanted[c][i] for i in rows] for c in _RUN_COLUMNS]
                params.insert(2, [o for _, o in ordinals])
                await cur.execute(_CREATE_RUNS, params)
                created = await cur.fetchall()
                found.update({(j, k): run_id for j, k, run_id in created})
                if any(wanted["launch_key"][i] is not None for i in rows):
                    ids = [run_id for _, _, run_id in created]
                    await cur.execute(_LAUNCH_SIBLINGS, {"jobs": new_jobs, "runs": ids})
            if new_jobs:
                await cur.execute(JOB_STATUS, (new_jobs,))
            run_ids = [found[key] for key in zip(wanted["job_id"], wanted["run_key"], strict=True)]
            learned.update(zip(runs.run_keys(), run_ids, strict=True))
            learned.update(await self._register_processes(cur, runs.process_rows(run_ids)))
        return learned

    @staticmethod
    async def _adopt_launch_runs(
        cur: psycopg.AsyncCursor,
        wanted: dict[str, list[Any]],
        missing: list[int],
        found: dict[tuple[int, int], int],
    ) -> list[int]:
        """The runs of `missing` (indices of `wanted`) whose launch record was stored before
        any of their frames (it made a run of its own: launches._OWN_RUN) take that run
        over, the first of each launch by start (_ADOPT_LAUNCH_RUN); their ids go into
        `found`. Returns the runs still to create. Whatever the order the record and the
        ranks' frames arrive in, the launch is then one run, with its ordinal."""
        launched = [i for i in missing if wanted["launch_key"][i] is not None]
        if not launched:
            return missing
        await cur.execute(_LAUNCH_RUNS, ([wanted["job_id"][i] for i in launched],
                                         [wanted["launch_key"][i] for i in launched]))  # fmt: skip
        placeholders = {(j, k): run_id for j, k, run_id in await cur.fetchall()}
        adopted = set()
        for i in sorted(launched, key=lambda i: wanted["started_ns"][i]):
            run_id = placeholders.pop((wanted["job_id"][i], wanted["launch_key"][i]), None)
            if run_id is None:
                continue
            await cur.execute(_ADOPT_LAUNCH_RUN, {
                "id": run_id, "run_key": wanted["run_key"][i], "kind": wanted["kind"][i],
                "label": wanted["label"][i], "size": wanted["world_size"][i],
                "command": wanted["command"][i], "user": wanted["user"][i],
                "start": wanted["started_ns"][i], "end": wanted["last_seen_ns"][i],
            })  # fmt: skip
            found[(wanted["job_id"][i], wanted["run_key"][i])] = run_id
            adopted.add(i)
        return [i for i in missing if i not in adopted]

    async def _register_processes(
        self, cur: psycopg.AsyncCursor, wanted: list[tuple[Any, ...]]
    ) -> _IdMap:
        """Number the processes of `processes` runs, (run id, host, pid, start) each, that
        have no number yet; returns every process's number (keyed ("process", *key))."""
        if not wanted:
            return {}
        columns = [list(c) for c in zip(*wanted, strict=True)]
        await cur.execute(_KNOWN_PROCESSES, columns)
        found = {tuple(row[:4]): row[4] for row in await cur.fetchall()}
        missing = [key for key in wanted if key not in found]
        if missing:
            await cur.execute(_LAST_PROCESSES, (sorted({key[0] for key in missing}),))
            last: dict[int, int] = dict(await cur.fetchall())
            for key in missing:
                found[key] = last[key[0]] = last.get(key[0], -1) + 1
            created = [list(c) for c in zip(*missing, strict=True)]
            await cur.execute(_CREATE_PROCESSES, (*created, [found[key] for key in missing]))
        return {("process", *key): number for key, number in found.items()}

    async def _ledger_fast(
        self, conn: psycopg.AsyncConnection, cur: psycopg.AsyncCursor, plan: _Plan
    ) -> bool:
        """COPY the plan's ledger rows (the usual case: none stored before). False if one
        was (a resend): the savepoint is rolled back and nothing of it remains."""
        try:
            async with conn.transaction(), cur.copy(_COPY_LEDGER) as copy:
                await copy.write(plan.ledger_copy(time.time_ns()))
        except psycopg.errors.UniqueViolation:
            return False
        return True


#: Ids a writer knows: (owner, job key) -> jobs.id, ((owner, job key), run key) -> runs.id,
#: ("process", runs.id, host, pid, start) -> process number.
_IdMap = dict[Any, int]

#: Ids remembered by a writer (job keys, runs, processes) before it starts afresh.
_MAX_IDS_SEEN = 1 << 16

#: Columns of FrameWriter._register's new runs, in _CREATE_RUNS order (ordinal inserted
#: third).
_RUN_COLUMNS = ("job_id", "run_key", "kind", "label", "world_size", "command", "user",
                "started_ns", "last_seen_ns", "launch_key", "exe_build_id",
                "exe_path")  # fmt: skip


class _StaleIds(Exception):
    """A job or run id remembered from an earlier commit no longer exists."""


def _texts(raw: np.ndarray) -> list[str]:
    return [b.decode("utf-8", "replace") for b in raw.tolist()]


class _Runs:
    """The jobs and runs of a set of frames (runs: by job and wire run id; the frames of a
    `processes` run, wire run id 0, by process key): what their upserts write, sorted by
    ((owner, job key), run key), the order rows are locked in."""

    def __init__(self, frames: _Frames):
        info = frames.info
        first, self.job_group, n_jobs = _groups(frames.owner, info["job"])
        self.job_keys: list[tuple[int, str]] = list(
            zip(frames.owner[first].tolist(), _texts(info["job"][first]), strict=True)
        )
        run_key = info["run_id"].view(np.int64)
        run_first, self.run_group, n_runs = _groups(self.job_group, run_key)
        self.run_job = self.job_group[run_first]
        self.run_key = run_key[run_first]
        self.processes = self.run_key == 0
        self.world_size = np.where(self.processes, 0, info["world_size"][run_first]).astype(
            np.int64
        )
        self.start = np.full(n_runs, np.iinfo(np.int64).max)
        self.end = np.zeros(n_runs, dtype=np.int64)
        np.minimum.at(self.start, self.run_group, info["t_start"].astype(np.int64))
        np.maximum.at(self.end, self.run_group, info["t_end"].astype(np.int64))
        self.commands: list[str | None] = [None] * n_runs
        self.users: list[str | None] = [None] * n_runs
        self.labels: list[str | None] = [None] * n_runs
        self.launches: list[int | None] = [None] * n_runs
        self.builds: list[str | None] = [None] * n_runs
        self.exe_paths: list[str | None] = [None] * n_runs
        rank_info = wire.SPEC.table("rank_info").id
        for i in np.flatnonzero(info["count"][:, rank_info]).tolist():
            g = self.run_group[i]
            command, user, label, launch, build, exe_path = frames.rank_info(i)
            self.commands[g] = self.commands[g] or command
            self.users[g] = self.users[g] or user
            self.labels[g] = self.labels[g] or label
            self.launches[g] = self.launches[g] or launch
            self.builds[g] = self.builds[g] or build
            self.exe_paths[g] = self.exe_paths[g] or exe_path
        # A proven run is its owner's whatever its frames carry (the read side filters on
        # the user name): also a run whose frames have no rank information.
        for g, i in enumerate(run_first.tolist()):
            if frames.proven[i] and self.users[g] is None:
                self.users[g] = user_name(int(frames.owner[i]))
        # Frames of processes runs, grouped by process: (run, host, pid, start).
        self.process_frames = np.flatnonzero(self.processes[self.run_group])
        pf = self.process_frames
        first, self.process_group, _ = _groups(
            self.run_group[pf], info["host"][pf], info["pid"][pf], info["proc_start"][pf]
        )
        self._process_first = pf[first]
        self._info = info
        self.world_rank = info["world_rank"]  # of every frame

    def job_columns(self) -> tuple[list[int], list[str]]:
        """The owners and the job keys of every job (the columns of its key)."""
        return [k[0] for k in self.job_keys], [k[1] for k in self.job_keys]

    def run_keys(self) -> list[tuple[tuple[int, str], int]]:
        """((owner, job key), run key) of every run."""
        pairs = zip(self.run_job.tolist(), self.run_key.tolist(), strict=True)
        return [(self.job_keys[j], k) for j, k in pairs]

    def process_keys(self, run_ids: Sequence[int | None]) -> list[tuple[Any, ...]]:
        """("process", run id, host, pid, start) of every process (given the run ids)."""
        return [("process", *key) for key in self.process_rows(run_ids)]

    def process_rows(self, run_ids: Sequence[int | None]) -> list[tuple[int | None, str, int, int]]:
        """(run id, host, pid, start) of every process, given every run's id."""
        info, first = self._info, self._process_first
        return list(zip([run_ids[g] for g in self.run_group[first].tolist()],
                        _texts(info["host"][first]), info["pid"][first].tolist(),
                        info["proc_start"][first].astype(np.int64).tolist(),
                        strict=True))  # fmt: skip

    def run_rows(self, job_ids: list[int]) -> dict[str, list[Any]]:
        """Every run's columns for _CREATE_RUNS (_RUN_COLUMNS), given every job's id."""
        return {
            "job_id": [job_ids[j] for j in self.run_job.tolist()],
            "run_key": self.run_key.tolist(),
            "kind": ["processes" if p else "mpi" for p in self.processes.tolist()],
            "label": self.labels,
            "world_size": self.world_size.tolist(),
            "command": self.commands,
            "user": self.users,
            "started_ns": self.start.tolist(),
            "last_seen_ns": self.end.tolist(),
            "launch_key": self.launches,
            "exe_build_id": self.builds,
            "exe_path": self.exe_paths,
        }

    def params(self, job_ids: np.ndarray) -> tuple[Any, ...]:
        """Parameters of _UPSERT_RUNS, given every job's id."""
        rows = self.run_rows(job_ids.tolist())
        return tuple(rows[c] for c in _RUN_COLUMNS)

    def job_params(self) -> tuple[Any, ...]:
        """Parameters of UPSERT_JOBS and _CREATE_JOBS: one row per job (largest MPI world,
        first command and user, earliest start, latest end)."""
        n = len(self.job_keys)
        size = np.ones(n, dtype=np.int64)
        start = np.full(n, np.iinfo(np.int64).max)
        end = np.zeros(n, dtype=np.int64)
        np.maximum.at(size, self.run_job, self.world_size)
        np.minimum.at(start, self.run_job, self.start)
        np.maximum.at(end, self.run_job, self.end)
        commands: list[str | None] = [None] * n
        users: list[str | None] = [None] * n
        for g, job in enumerate(self.run_job.tolist()):
            commands[job] = commands[job] or self.commands[g]
            users[job] = users[job] or self.users[g]
        return (*self.job_columns(), size.tolist(), commands, users, ["running"] * n,
                start.tolist(), end.tolist())  # fmt: skip


@dataclass(frozen=True)
class _Ids:
    """Database ids of a _Runs: per job, per run, and per frame (job, run, stored rank: the
    world rank, or a non-MPI process's number)."""

    jobs: np.ndarray
    runs: np.ndarray
    frame_job: np.ndarray
    frame_run: np.ndarray
    frame_rank: np.ndarray

    @classmethod
    def of(cls, runs: _Runs, jobs: list[int], run_ids: list[int], processes: list[int]) -> _Ids:
        """From the ids of every job and run and the number of every process of `runs`."""
        job_ids = np.array(jobs, dtype=np.int64)
        run_id = np.array(run_ids, dtype=np.int64)
        rank = runs.world_rank.astype(np.int32)
        if len(runs.process_frames):
            rank[runs.process_frames] = np.array(processes, dtype=np.int32)[runs.process_group]
        return cls(job_ids, run_id, job_ids[runs.job_group], run_id[runs.run_group], rank)


#: One table's COPY: (table, records, binary COPY payload in parts; the parts of an
#: array-layout table are encoded as they are asked for, each valid until the next).
_Copy = tuple[DeltaTable, int, Iterable[bytes | memoryview]]

#: Wire table ids of the tables with rollups (collector/store/rollups.py).
_ROLLED_IDS = [wire.SPEC.table(name).id for name in ("p2p", "op", "coll", "io")]

#: Wire table id of the io table (its paths are bounded per run: collector/store/names.py).
_IO_ID = wire.SPEC.table("io").id

#: The wire tables naming communicators (bounded per run, collector/store/names.py), and
#: how a record beyond the bound is folded: the fields set to the overflow record's values
#: (None: the record is not stored), and the /metrics reason.
_COMM_FOLDS: dict[str, tuple[dict[str, int] | None, str]] = {
    "coll": ({"comm_id": OVERFLOW_COMM, "comm_size": 0, "root": NO_RANK}, "run_comms"),
    "comm_p2p": ({"comm_id": OVERFLOW_COMM, "peer": NO_RANK}, "run_comms"),
    "comm": (None, "run_comm_descriptions"),
}
_COMM_IDS = [wire.SPEC.table(name).id for name in _COMM_FOLDS]
#: The same for the records naming a call site (RunSites).
_SITE_FOLDS: dict[str, tuple[dict[str, int] | None, str]] = {
    "callsite": ({"site_id": OVERFLOW_SITE}, "run_callsites"),
    "callsite_frame": (None, "run_callsite_frames"),
}
_SITE_IDS = [wire.SPEC.table(name).id for name in _SITE_FOLDS]
#: Wire table id of the call sites' frames (their jobs are told to the resolver).
_SITE_FRAME_ID = wire.SPEC.table("callsite_frame").id


class _Plan:
    """Everything a batch writes before its runs and jobs: ledger rows, rank upserts, rollup
    marks and the COPY payloads, for the frames in `fresh` (default: the first of every
    (run, rank, seq) in the batch); names beyond a run's bounds are folded by `names` (io
    paths), `comms` (communicators) and `sites` (call sites): `folded` counts them by
    reason."""

    def __init__(
        self,
        frames: _Frames,
        ids: _Ids,
        fresh: np.ndarray | None,
        names: RunNames,
        comms: RunComms,
        sites: RunSites,
    ):
        self.frames, self.ids, self._names, self._comms = frames, ids, names, comms
        self._sites = sites
        self.folded: collections.Counter[str] = collections.Counter()
        info = frames.info
        if fresh is None:
            fresh, _, _ = _groups(ids.frame_run, ids.frame_rank, info["seq"])  # sorted by key
        self.fresh = fresh
        self._counts = info["count"][fresh]  # records per table of each fresh frame
        self._keys = (ids.frame_run[fresh].tolist(), ids.frame_rank[fresh].tolist(),
                      info["seq"][fresh].tolist())  # fmt: skip
        self._statements = self._marks() + self._ranks()  # the order rows are locked in
        self._addresses = frames.addresses  # where each frame is read from by encode_arrays
        self._rewritten: dict[int, bytearray] = {}  # frame -> its copy with folded records
        self._dropped: dict[str, np.ndarray] = {}  # table -> its records not stored
        self._fold(_COMM_FOLDS, self._comms, "comm_id", OVERFLOW_COMM)
        self._fold(_SITE_FOLDS, self._sites, "site_id", OVERFLOW_SITE, by_rank=True)
        self._copies = [c for table in DELTA_TABLES if (c := self._copy(table)) is not None]

    def _fold(
        self,
        folds: dict[str, tuple[dict[str, int] | None, str]],
        keys: RunComms | RunSites,
        field: str,
        overflow: int,
        by_rank: bool = False,
    ) -> None:
        """Fold the records naming a communicator (`field` comm_id) or a call site (site_id,
        named with its rank: `by_rank`) beyond their run's bound (`keys`; new ones within it are
        admitted table by table, in frame order): an array table's records are rewritten
        in a copy of their frame (the received bytes stay as they are) as `folds` says, a
        description is left out of the COPY."""
        frames, fresh = self.frames, self.fresh
        for table, (fold, reason) in folds.items():
            spec = wire.SPEC.table(table)
            present = fresh[np.flatnonzero(self._counts[:, spec.id])]  # as _copy
            if not len(present):
                continue
            values, frame = frames.field(present, table, field)
            names = values.astype(np.int64)
            if by_rank:
                ranks = self.ids.frame_rank[frame].astype(np.int64)
                names = np.where(values == overflow, overflow, site_key(ranks, names))
            beyond = keys.beyond(self.ids.frame_run[frame], names, overflow)
            if not beyond.any():
                continue
            self.folded[reason] += int(beyond.sum())
            if fold is None:
                self._dropped[table] = beyond
                continue
            for f in np.unique(frame[beyond]).tolist():
                records = np.frombuffer(self._copy_of(f), dtype=spec.dtype,
                                        count=int(frames.info["count"][f, spec.id]),
                                        offset=int(frames.info["section"][f, spec.id]))  # fmt: skip
                mine = beyond[frame == f]
                for name, value in fold.items():
                    records[name][mine] = value

    def _copy_of(self, f: int) -> bytearray:
        """A writable copy of frame `f`, read from there by encode_arrays from now on."""
        if f not in self._rewritten:
            frames = self.frames
            batch = frames.batches[frames._batch[f]]
            start = int(frames.info["offset"][f])  # in its own batch's bytes
            copy = bytearray(batch.data[start : start + int(frames.info["length"][f])])
            self._rewritten[f] = copy
            if self._addresses is self.frames.addresses:
                self._addresses = self._addresses.copy()
            self._addresses[f] = np.frombuffer(copy, np.uint8).ctypes.data
        return self._rewritten[f]

    def ending(self, runs: _Runs) -> list[int]:
        """Ids of the runs whose status may change: MPI runs a rank ended in, and every
        `processes` run (a new process makes it run again)."""
        info, fresh = self.frames.info, self.fresh
        final = fresh[np.isin(info["frame_type"][fresh], FINAL_TYPES)]
        ending: list[int] = np.union1d(
            self.ids.frame_run[final], self.ids.runs[runs.processes]
        ).tolist()
        return ending

    def ledger(self, now_ns: int) -> tuple[Any, ...]:
        """Parameters of _INSERT_LEDGER."""
        return (self.ids.frame_job[self.fresh].tolist(), *self._keys,
                [now_ns] * len(self.fresh))  # fmt: skip

    def ledger_copy(self, now_ns: int) -> bytes:
        """The ledger rows as a binary COPY payload (_COPY_LEDGER)."""
        fresh, ids = self.fresh, self.ids
        return binary_copy([
            ("int8", ids.frame_job[fresh]), ("int8", ids.frame_run[fresh]),
            ("int4", ids.frame_rank[fresh]), ("int8", self.frames.info["seq"][fresh]),
            ("int8", np.full(len(fresh), now_ns)),
        ])  # fmt: skip

    def keep(self, stored: set[tuple[int, int, int]]) -> np.ndarray:
        """The fresh frames whose (run, rank, seq) the ledger has just taken."""
        keep = [key in stored for key in zip(*self._keys, strict=True)]
        kept: np.ndarray = self.fresh[np.array(keep, dtype=bool)]
        return kept

    def storage(self) -> tuple[list[int], ...]:
        """Parameters of _ADD_STORAGE: the fresh frames and their bytes per (owner, day)."""
        fresh, info = self.fresh, self.frames.info
        owner, day = self.frames.owner[fresh], (info["t_end"][fresh] // DAY_NS).astype(np.int64)
        first, group, n = _groups(owner, day)  # sorted by (owner, day)
        frames = np.bincount(group, minlength=n).astype(np.int64)
        size = np.zeros(n, dtype=np.int64)
        np.add.at(size, group, info["length"][fresh].astype(np.int64))
        return owner[first].tolist(), day[first].tolist(), frames.tolist(), size.tolist()

    def statements(self) -> list[tuple[str, tuple[Any, ...]]]:
        """(SQL, parameters) to run after the ledger and the deltas: rollup marks, ranks."""
        return self._statements

    def copies(self) -> list[_Copy]:
        """(table, records, binary COPY payload in parts) of every table the frames carry."""
        return self._copies

    def _ranks(self) -> list[tuple[str, tuple[Any, ...]]]:
        """One upsert row per (run, rank): seen times, finished flag, health deltas summed.
        Only the fields used are taken from the frames' records (not whole records), flags
        are set by index (an OR), and the health deltas, zero but for spooling senders, are
        summed only when one is not."""
        fresh, ids, every = self.fresh, self.ids, self.frames.info
        run_ids = ids.frame_run[fresh]
        if not len(fresh):
            return []
        first, group, n = _groups(run_ids, ids.frame_rank[fresh])
        start = np.full(n, np.iinfo(np.int64).max)
        end = np.zeros(n, dtype=np.int64)
        np.minimum.at(start, group, every["t_start"][fresh].astype(np.int64))
        np.maximum.at(end, group, every["t_end"][fresh].astype(np.int64))
        frame_type = every["frame_type"][fresh]
        flags = []
        for ended in (np.isin(frame_type, FINAL_TYPES), frame_type == FrameType.KILLED,
                      frame_type == FrameType.ABORTED, frame_type == FrameType.EXITED):  # fmt: skip
            flag = np.zeros(n, dtype=bool)
            flag[group[ended]] = True  # any frame of the rank
            flags.append(flag.tolist())
        abort_codes: list[int | None] = [None] * n
        for i in np.flatnonzero(frame_type == FrameType.ABORTED).tolist():
            code = int(self.frames.records(int(self.fresh[i]), "abort")["errorcode"][0])
            abort_codes[group[i]] = code - (1 << 32) if code >> 31 else code  # a C int
        net: list[str | None] = [None] * n
        for i in np.flatnonzero(every["count"][fresh, wire.SPEC.table("rank_info").id]).tolist():
            net[group[i]] = self.frames.net_devices(int(fresh[i]))
        health: list[list[int]] = []
        for name in _HEALTH:  # exact sums (Python ints: a sum past 2^63 is refused, not wrapped)
            values = every[name][fresh]
            if not values.any():
                health.append([0] * n)
                continue
            total = np.zeros(n, dtype=object)
            np.add.at(total, group, values.astype(object))
            health.append(total.tolist())
        firsts = fresh[first]
        # ON CONFLICT DO UPDATE may not touch a row twice: hence one row per key.
        return [(_UPSERT_RANKS,
                 (ids.frame_job[firsts].tolist(), run_ids[first].tolist(),
                  ids.frame_rank[firsts].tolist(), _texts(every["host"][firsts]),
                  every["pid"][firsts].tolist(), start.tolist(), end.tolist(), *flags,
                  abort_codes, net, *health))]  # fmt: skip

    def _marks(self) -> list[tuple[str, tuple[Any, ...]]]:
        """The rollup buckets to recompute: the minutes of the frames with records of a
        rolled-up table (p2p, op, coll, io: collector/store/rollups.py)."""
        info, fresh, ids = self.frames.info, self.fresh, self.ids
        rolled = fresh[(self._counts[:, _ROLLED_IDS] > 0).any(axis=1)]
        if not len(rolled):
            return []
        minutes = info["t_end"][rolled].astype(np.int64) // MINUTE_NS * MINUTE_NS
        # one row per (run, minute), sorted (a run is of one job): a batch's thousands of
        # frames fall in a few, and the statement carries no list per frame
        first, _, _ = _groups(ids.frame_run[rolled], minutes)
        return [(MARK_DIRTY, (ids.frame_run[rolled][first].tolist(), minutes[first].tolist(),
                              ids.frame_job[rolled][first].tolist()))]  # fmt: skip

    def _copy(self, table: DeltaTable) -> _Copy | None:
        """The COPY of one wire table of the fresh frames (a row per frame, or per record)."""
        frames, fresh, ids = self.frames, self.fresh, self.ids
        table_id = wire.SPEC.table(table.wire).id
        counts = self._counts[:, table_id]
        held = frames.info["section"][fresh, table_id] if table.empty_rows else counts
        present = fresh[np.flatnonzero(held)]
        if not len(present):
            return None
        info = frames.info[present]
        job_ids, run_ids, ranks = (ids.frame_job[present], ids.frame_run[present],
                                   ids.frame_rank[present])  # fmt: skip
        if table.arrays:
            addresses = self._addresses[present]
            rows = encode_arrays(table_id, table.columns, addresses, info, job_ids, run_ids, ranks)
            parts: Iterable[bytes | memoryview] = itertools.chain(
                (COPY_SIGNATURE,), rows, (COPY_TRAILER,)
            )
            return table, int(counts.sum()), parts
        repeat = info["count"][:, table_id]
        heads = {
            "job_id": np.repeat(job_ids, repeat),
            "run_id": np.repeat(run_ids, repeat),
            "world_rank": np.repeat(ranks, repeat),
            "t_start_ns": np.repeat(info["t_start"], repeat),
            "t_end_ns": np.repeat(info["t_end"], repeat),
        }
        records = np.concatenate([frames.records(i, table.wire) for i in present.tolist()])
        if (dropped := self._dropped.get(table.wire)) is not None:
            heads = {name: column[~dropped] for name, column in heads.items()}
            records = records[~dropped]
            if not len(records):
                return None
        if table.wire == "io":
            self.folded["run_files"] += self._names.fold(heads["run_id"], records)
        payload = binary_copy(
            [(kind, heads[name]) for name, kind in INTERVAL_COLUMNS]
            + [(kind, records[name]) for name, kind in table.fields]
        )
        return table, len(records), (payload,)
