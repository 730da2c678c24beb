"""The frame writer: batches validated frames and commits each batch in one transaction.

Every frame's data is written at most once: the `received_frames` ledger deduplicates by
(job, rank, seq) inside the same transaction as the data, so a resent frame is recognised
even after a collector restart. Callers are told a frame is stored only after COMMIT.

Frames arrive as `FrameBatch`es (collector/codec.py: the received bytes plus one record
per validated frame); a batch's bookkeeping is done with numpy over all its frames at
once and its array-layout tables are encoded to binary COPY by the compiled codec, so no
Python runs per record and little per frame.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import psycopg

from collector.codec import FrameBatch, encode_arrays, frame_addresses
from collector.store.copy import COPY_SIGNATURE, COPY_TRAILER, binary_copy
from collector.store.partitions import DAY_NS, Partitions
from collector.store.rollups import MARK_DIRTY, MINUTE_NS
from collector.store.tables import DELTA_TABLES, INTERVAL_COLUMNS, DeltaTable
from stacklens import wire
from stacklens.mpi_ops import op_names
from stacklens.wire import FINAL_TYPES, FrameError, FrameType, Status

log = logging.getLogger(__name__)

_UPSERT_JOBS = """
INSERT INTO jobs (job_key, world_size, command, "user", status, started_ns, last_seen_ns)
SELECT * FROM unnest(%b::text[], %b::int[], %b::text[], %b::text[], %b::text[], %b::bigint[],
                     %b::bigint[])
ON CONFLICT (job_key) DO UPDATE SET
    started_ns = LEAST(jobs.started_ns, EXCLUDED.started_ns),
    last_seen_ns = GREATEST(jobs.last_seen_ns, EXCLUDED.last_seen_ns),
    status = CASE WHEN jobs.status = 'lost' THEN 'running' ELSE jobs.status END,
    command = COALESCE(jobs.command, EXCLUDED.command),
    "user" = COALESCE(jobs."user", EXCLUDED."user")
RETURNING id
"""

_CREATE_JOBS = """
WITH created AS (
    INSERT INTO jobs (job_key, world_size, command, "user", status, started_ns, last_seen_ns)
    SELECT * FROM unnest(%b::text[], %b::int[], %b::text[], %b::text[], %b::text[],
                         %b::bigint[], %b::bigint[])
    ON CONFLICT (job_key) DO NOTHING
    RETURNING id, job_key
)
SELECT id, job_key FROM created
UNION ALL SELECT id, job_key FROM jobs WHERE job_key = ANY(%b::text[])
"""

#: Ids of jobs another transaction created while _CREATE_JOBS waited for it.
_JOB_IDS = "SELECT id, job_key FROM jobs WHERE job_key = ANY(%b::text[])"

_COPY_LEDGER = (
    "COPY received_frames (job_id, world_rank, seq, received_ns) FROM STDIN (FORMAT BINARY)"
)

_INSERT_LEDGER = """
INSERT INTO received_frames (job_id, world_rank, seq, received_ns)
SELECT * FROM unnest(%b::bigint[], %b::int[], %b::bigint[], %b::bigint[])
ON CONFLICT DO NOTHING
RETURNING job_id, world_rank, seq
"""

_UPSERT_RANKS = """
INSERT INTO ranks (job_id, world_rank, host, pid, first_seen_ns, last_seen_ns, finished,
                   killed, keys_dropped, frames_dropped, frames_spooled)
SELECT * FROM unnest(%b::bigint[], %b::int[], %b::text[], %b::int[], %b::bigint[],
                     %b::bigint[], %b::bool[], %b::bool[], %b::bigint[], %b::bigint[],
                     %b::bigint[])
ON CONFLICT (job_id, world_rank) DO UPDATE SET
    first_seen_ns = LEAST(ranks.first_seen_ns, EXCLUDED.first_seen_ns),
    last_seen_ns = GREATEST(ranks.last_seen_ns, EXCLUDED.last_seen_ns),
    finished = ranks.finished OR EXCLUDED.finished,
    killed = ranks.killed OR EXCLUDED.killed,
    keys_dropped = ranks.keys_dropped + EXCLUDED.keys_dropped,
    frames_dropped = ranks.frames_dropped + EXCLUDED.frames_dropped,
    frames_spooled = ranks.frames_spooled + EXCLUDED.frames_spooled
"""

# A job ends 'killed' as soon as one rank's final frame says it ended by a signal (the
# others may never report: a launcher SIGKILLs them), else 'finished' once every rank has
# sent its final frame.
_FINISH_JOBS = """
UPDATE jobs SET status = ended.status, finished_ns = jobs.last_seen_ns
FROM (SELECT r.job_id, CASE WHEN bool_or(r.killed) THEN 'killed' ELSE 'finished' END AS status,
             bool_or(r.killed) AS killed, count(*) FILTER (WHERE r.finished) AS done
      FROM ranks r WHERE r.job_id = ANY(%b::bigint[]) GROUP BY r.job_id) ended
WHERE jobs.id = ended.job_id AND (ended.killed OR ended.done >= jobs.world_size)
  AND jobs.status <> ended.status
"""

_HEALTH = ("keys_dropped", "frames_dropped", "frames_spooled")

_SYNC_OPS = """
INSERT INTO mpi_ops (id, name) SELECT * FROM unnest(%s::smallint[], %s::text[])
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name
"""

#: Frames that may wait for the batch loop before senders are asked to pause.
MAX_BACKLOG_FRAMES = 16384

#: A submission's outcome: the frames the database refused (index -> why); empty = all stored.
Refused = dict[int, FrameError]


@dataclass
class WriterStats:
    """Counters of what the writer did (exported on /metrics)."""

    frames_committed: int = 0
    frames_duplicate: int = 0
    batches: int = 0
    write_errors: int = 0
    data_errors: int = 0
    rows: collections.Counter = field(default_factory=collections.Counter)


@dataclass
class _Pending:
    """Frames that must be committed together, and the future their sender awaits."""

    batch: FrameBatch
    done: asyncio.Future
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


class _Frames:
    """The frames of several batches seen as one: their FRAME_INFO records, concatenated."""

    def __init__(self, batches: list[FrameBatch]):
        self.batches = batches
        self.info = np.concatenate([b.info for b in batches]) if len(batches) > 1 else (
            batches[0].info)  # fmt: skip
        sizes = [len(b) for b in batches]
        self._owner = np.repeat(np.arange(len(batches)), sizes)
        self._local = np.concatenate([np.arange(n) for n in sizes])
        self.addresses = frame_addresses(batches)  # valid while the batches live

    def __len__(self) -> int:
        return len(self.info)

    def records(self, i: int, table: str) -> np.ndarray:
        """Frame i's records of a wire table."""
        return self.batches[self._owner[i]].records(int(self._local[i]), table)

    def rank_info(self, i: int) -> tuple[str | None, str | None]:
        """(command, user) of frame i, or Nones if it carries no rank information."""
        info = self.records(i, "rank_info")
        if not len(info):
            return None, None
        command, user = (bytes(info[name][0]).split(b"\0", 1)[0] for name in ("command", "user"))
        return command.decode("utf-8", "replace"), user.decode("utf-8", "replace") or None


def _groups(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Group rows by equal key columns: (first row of each group, group of each row, groups)."""
    key = np.rec.fromarrays(keys) if len(keys) > 1 else keys[0]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1), len(first)


class FrameWriter:
    """Commits frames to PostgreSQL in batches; `submit()` resolves once they are committed.

    Several workers (each with its own connection) take batches from one queue, so one
    prepares a batch while another's transaction runs. Concurrent transactions are safe:
    they lock rows in one order (new jobs, ledger, rollup marks, ranks, jobs; key order
    within each), and the ledger's unique key makes a frame sent twice at once wait and
    then be skipped.
    """

    def __init__(
        self,
        url: str,
        max_batch: int = 1024,
        max_backlog: int = MAX_BACKLOG_FRAMES,
        workers: int = 3,
    ):
        self._url = url
        self._workers = workers
        self._max_batch = max_batch
        self.max_backlog = max_backlog
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake = asyncio.Event()
        self._room: list[Callable[[], None]] = []
        self.backlog = 0  # frames queued, not yet taken by the batch loop
        self._tasks: list[asyncio.Task] = []
        self._conns: dict[int, psycopg.AsyncConnection] = {}
        self._job_ids: dict[str, int] = {}  # job key -> jobs.id, as the database said
        self.stats = WriterStats()
        self.partitions = Partitions()

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

    def submit(self, batch: FrameBatch, atomic: bool = False) -> asyncio.Future:
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
            except psycopg.errors.DataError:
                # A value the database refuses: isolate it so it cannot block the others.
                await self._write_separately(worker, taken)
                continue
            except (psycopg.Error, OSError) as exc:
                await self._outage(worker, taken, exc)
                continue
            except Exception as exc:  # a bug must not stop the loop: fail these, go on
                log.exception("unexpected error writing %d submissions", len(taken))
                await self._outage(worker, taken, exc)
                continue
            _settle(taken)

    async def _write_separately(self, worker: int, taken: list[_Pending]) -> None:
        """Write each frame on its own; report the ones the database refuses."""
        for pending in taken:
            refused: Refused = {}
            batch = pending.batch
            try:
                if pending.atomic:
                    try:
                        await self._write(worker, [batch])
                    except psycopg.errors.DataError as exc:
                        self.stats.data_errors += 1
                        log.error("database refused a value, rejecting the batch: %s", exc)
                        reason = f"database refused a value: {exc}"
                        pending.done.set_exception(FrameError(Status.BAD_BODY, reason))
                    continue
                for i in range(len(batch)):
                    try:
                        await self._write(worker, [FrameBatch(batch.data, batch.info[i : i + 1])])
                    except psycopg.errors.DataError as exc:
                        self.stats.data_errors += 1
                        log.error("database refused a frame, rejecting it: %s", exc)
                        refused[i] = FrameError(Status.BAD_BODY, f"database refused a value: {exc}")
            except (psycopg.Error, OSError) as exc:
                await self._outage(worker, [pending], exc)
            else:
                if not pending.done.done():
                    pending.done.set_result(refused)

    async def _outage(self, worker: int, taken: list[_Pending], exc: Exception) -> None:
        """The database is unreachable or failing: fail the batch (senders keep the frames)."""
        self.stats.write_errors += 1
        frames = sum(len(p.batch) for p in taken)
        log.error("could not store %d frames, not acknowledging them: %s", frames, exc)
        conn = self._conns.pop(worker, None)
        if conn is not None:
            await conn.close()
        self._job_ids.clear()
        _settle(taken, exc)
        await asyncio.sleep(0.5)

    async def _connection(self, worker: int) -> psycopg.AsyncConnection:
        """A worker's connection; a new one also (re)syncs the MPI op names."""
        conn = self._conns.get(worker)
        if conn is None or conn.closed:
            conn = await psycopg.AsyncConnection.connect(self._url)
            names = op_names()
            async with conn.transaction():
                await conn.execute(_SYNC_OPS, (list(range(len(names))), list(names)))
                await self.partitions.load(conn)  # the days ingest need not count as new
            self._conns[worker] = conn
        return conn

    async def _write(self, worker: int, batches: list[FrameBatch]) -> None:
        """Write frames in one transaction (ledger, deltas, rollup marks, ranks, jobs).

        Everything is prepared before the transaction, with the ids of the jobs known
        from earlier commits, and the rows other transactions also update (rollup marks,
        ranks, jobs) come last: the workers' transactions overlap up to there, one
        preparing or copying while the other finishes. Frames stored before (a resend)
        only make the plan be prepared again; a remembered job id that is gone (retention
        deleted the job) rolls the transaction back and it is written again.
        """
        frames = _Frames(batches)
        jobs = _Jobs(frames)
        conn = await self._connection(worker)
        await self.partitions.ensure(conn, np.unique(frames.info["t_end"] // DAY_NS).tolist())
        try:
            await self._write_once(conn, frames, jobs)
        except (_StaleJobIds, psycopg.errors.ForeignKeyViolation):  # ranks -> jobs
            self._job_ids.clear()
            await self._write_once(conn, frames, jobs)

    async def _write_once(
        self, conn: psycopg.AsyncConnection, frames: _Frames, jobs: _Jobs
    ) -> None:
        job_ids = [self._job_ids.get(key) for key in jobs.keys]
        plan = _Plan(frames, jobs.ids(job_ids), None) if None not in job_ids else None
        rows: collections.Counter = collections.Counter()
        async with conn.transaction(), conn.cursor() as cur:
            if plan is None:  # a job not committed before: create it first
                job_ids = await self._create_jobs(cur, jobs)
                plan = _Plan(frames, jobs.ids(job_ids), None)
            if not await self._ledger_fast(conn, cur, plan):
                await cur.execute(_INSERT_LEDGER, plan.ledger(time.time_ns()))
                stored = {tuple(row) for row in await cur.fetchall()}
                if len(stored) != len(plan.fresh):
                    plan = _Plan(frames, plan.job_ids, plan.keep(stored))
            for table, records, payload in plan.copies():
                async with cur.copy(table.copy_statement) as copy:
                    for part in payload:
                        await copy.write(part)
                rows[table.view or table.sql] += records
            for statement, params in plan.statements():
                await cur.execute(statement, params)
            await cur.execute(_UPSERT_JOBS, jobs.params())
            if sorted(job_ids) != sorted(row[0] for row in await cur.fetchall()):
                raise _StaleJobIds
            if plan.finishing:
                await cur.execute(_FINISH_JOBS, (plan.finishing,))
        self._job_ids.update(zip(jobs.keys, job_ids, strict=True))
        self.stats.rows.update(rows)
        self.stats.batches += 1
        self.stats.frames_committed += len(plan.fresh)
        self.stats.frames_duplicate += len(frames) - len(plan.fresh)

    async def _create_jobs(self, cur: psycopg.AsyncCursor, jobs: _Jobs) -> list[int]:
        """Create the jobs that do not exist yet; the id of every job of `jobs`."""
        await cur.execute(_CREATE_JOBS, (*jobs.params(), jobs.keys))
        ids = {key: job_id for job_id, key in await cur.fetchall()}
        if missing := [key for key in jobs.keys if key not in ids]:
            # Created meanwhile by a transaction this statement waited for.
            await cur.execute(_JOB_IDS, (missing,))
            ids.update({key: job_id for job_id, key in await cur.fetchall()})
        return [ids[key] for key in jobs.keys]

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


class _StaleJobIds(Exception):
    """A job id remembered from an earlier commit no longer exists."""


class _Jobs:
    """The jobs of a set of frames: one upsert row each (size, command, user, first start
    and last end seen), sorted by job key (the order rows are locked in)."""

    def __init__(self, frames: _Frames):
        info = frames.info
        first, self.group, n = _groups(info["job"])
        self.keys = [raw.decode("utf-8", "replace") for raw in info["job"][first].tolist()]
        self.start = np.full(n, np.iinfo(np.int64).max)
        self.end = np.zeros(n, dtype=np.int64)
        np.minimum.at(self.start, self.group, info["t_start"].astype(np.int64))
        np.maximum.at(self.end, self.group, info["t_end"].astype(np.int64))
        self.sizes = info["world_size"][first].tolist()
        self.commands: list[str | None] = [None] * n
        self.users: list[str | None] = [None] * n
        rank_info = wire.SPEC.table("rank_info").id
        for i in np.flatnonzero(info["count"][:, rank_info]).tolist():
            command, user = frames.rank_info(i)
            g = self.group[i]
            self.commands[g] = self.commands[g] or command
            self.users[g] = self.users[g] or user

    def params(self) -> tuple:
        """Parameters of _UPSERT_JOBS."""
        n = len(self.keys)
        return (self.keys, self.sizes, self.commands, self.users, ["running"] * n,
                self.start.tolist(), self.end.tolist())  # fmt: skip

    def ids(self, job_ids: list[int]) -> np.ndarray:
        """The job id of every frame, given the id of every job."""
        return np.array(job_ids, dtype=np.int64)[self.group]


class _Plan:
    """Everything a batch writes after its jobs: ledger rows, rank upserts, rollup marks,
    finished jobs and the COPY payloads, for the frames in `fresh` (default: the first of
    every (job, rank, seq) in the batch)."""

    def __init__(self, frames: _Frames, job_ids: np.ndarray, fresh: np.ndarray | None):
        self.frames, self.job_ids = frames, job_ids
        info = frames.info
        if fresh is None:
            fresh, _, _ = _groups(job_ids, info["world_rank"], info["seq"])  # sorted by key
        self.fresh = fresh
        self._keys = (job_ids[fresh].tolist(), info["world_rank"][fresh].tolist(),
                      info["seq"][fresh].tolist())  # fmt: skip
        self._statements = self._marks() + self._ranks()  # the order rows are locked in
        self._copies = [c for table in DELTA_TABLES if (c := self._copy(table)) is not None]
        final = fresh[np.isin(info["frame_type"][fresh], FINAL_TYPES)]
        self.finishing = np.unique(job_ids[final]).tolist()  # jobs a rank finished in

    def ledger(self, now_ns: int) -> tuple:
        """Parameters of _INSERT_LEDGER."""
        return (*self._keys, [now_ns] * len(self.fresh))

    def ledger_copy(self, now_ns: int) -> bytes:
        """The ledger rows as a binary COPY payload (_COPY_LEDGER)."""
        info = self.frames.info[self.fresh]
        return binary_copy([
            ("int8", self.job_ids[self.fresh]), ("int4", info["world_rank"]),
            ("int8", info["seq"]), ("int8", np.full(len(self.fresh), now_ns)),
        ])  # fmt: skip

    def keep(self, stored: set[tuple[int, int, int]]) -> np.ndarray:
        """The fresh frames whose (job, rank, seq) the ledger has just taken."""
        keep = [key in stored for key in zip(*self._keys, strict=True)]
        return self.fresh[np.array(keep, dtype=bool)]

    def statements(self) -> list[tuple[str, tuple]]:
        """(SQL, parameters) to run after the ledger and the deltas: rollup marks, ranks."""
        return self._statements

    def copies(self) -> list[tuple[DeltaTable, int, tuple[bytes, ...]]]:
        """(table, records, binary COPY payload in parts) of every table the frames carry."""
        return self._copies

    def _ranks(self) -> list[tuple[str, tuple]]:
        """One upsert row per (job, rank): seen times, finished flag, health deltas summed."""
        info, job_ids = self.frames.info[self.fresh], self.job_ids[self.fresh]
        if not len(info):
            return []
        first, group, n = _groups(job_ids, info["world_rank"])
        start = np.full(n, np.iinfo(np.int64).max)
        end = np.zeros(n, dtype=np.int64)
        finished = np.zeros(n, dtype=bool)
        killed = np.zeros(n, dtype=bool)
        np.minimum.at(start, group, info["t_start"].astype(np.int64))
        np.maximum.at(end, group, info["t_end"].astype(np.int64))
        np.logical_or.at(finished, group, np.isin(info["frame_type"], FINAL_TYPES))
        np.logical_or.at(killed, group, info["frame_type"] == FrameType.KILLED)
        health = []
        for name in _HEALTH:
            total = np.zeros(n, dtype=np.int64)
            np.add.at(total, group, info[name].astype(np.int64))
            health.append(total.tolist())
        hosts = [raw.decode("utf-8", "replace") for raw in info["host"][first].tolist()]
        # ON CONFLICT DO UPDATE may not touch a row twice: hence one row per key.
        return [(_UPSERT_RANKS,
                 (job_ids[first].tolist(), info["world_rank"][first].tolist(), hosts,
                  info["pid"][first].tolist(), start.tolist(), end.tolist(), finished.tolist(),
                  killed.tolist(), *health))]  # fmt: skip

    def _marks(self) -> list[tuple[str, tuple]]:
        """The rollup buckets to recompute."""
        info, fresh = self.frames.info, self.fresh
        p2p = fresh[info["count"][fresh, wire.SPEC.table("p2p").id] > 0]
        if not len(p2p):
            return []
        minutes = info["t_end"][p2p].astype(np.int64) // MINUTE_NS * MINUTE_NS
        return [(MARK_DIRTY, (self.job_ids[p2p].tolist(), minutes.tolist()))]

    def _copy(self, table: DeltaTable) -> tuple[DeltaTable, int, tuple[bytes, ...]] | None:
        """The COPY of one wire table of the fresh frames (a row per frame, or per record)."""
        frames, fresh = self.frames, self.fresh
        table_id = wire.SPEC.table(table.wire).id
        counts = frames.info["count"][fresh, table_id]
        present = fresh[np.flatnonzero(counts)]
        if not len(present):
            return None
        info, job_ids = frames.info[present], self.job_ids[present]
        if table.arrays:
            addresses = frames.addresses[present]
            rows = encode_arrays(table_id, table.columns, addresses, info, job_ids)
            return table, int(counts.sum()), (COPY_SIGNATURE, rows, COPY_TRAILER)
        repeat = info["count"][:, table_id]
        heads = {
            "job_id": np.repeat(job_ids, repeat),
            "world_rank": np.repeat(info["world_rank"], repeat),
            "t_start_ns": np.repeat(info["t_start"], repeat),
            "t_end_ns": np.repeat(info["t_end"], repeat),
        }
        records = np.concatenate([frames.records(i, table.wire) for i in present.tolist()])
        payload = binary_copy(
            [(kind, heads[name]) for name, kind in INTERVAL_COLUMNS]
            + [(kind, records[name]) for name, kind in table.fields]
        )
        return table, int(counts.sum()), (payload,)
