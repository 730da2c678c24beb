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
from stacklens.wire import FrameError, FrameType, Status

log = logging.getLogger(__name__)

_UPSERT_JOBS = """
INSERT INTO jobs (job_key, world_size, command, "user", status, started_ns, last_seen_ns)
SELECT * FROM unnest(%s::text[], %s::int[], %s::text[], %s::text[], %s::text[], %s::bigint[],
                     %s::bigint[])
ON CONFLICT (job_key) DO UPDATE SET
    started_ns = LEAST(jobs.started_ns, EXCLUDED.started_ns),
    last_seen_ns = GREATEST(jobs.last_seen_ns, EXCLUDED.last_seen_ns),
    command = COALESCE(jobs.command, EXCLUDED.command),
    "user" = COALESCE(jobs."user", EXCLUDED."user")
RETURNING id, job_key
"""

_INSERT_LEDGER = """
INSERT INTO received_frames (job_id, world_rank, seq, received_ns)
SELECT * FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])
ON CONFLICT DO NOTHING
RETURNING job_id, world_rank, seq
"""

_UPSERT_RANKS = """
INSERT INTO ranks (job_id, world_rank, host, pid, first_seen_ns, last_seen_ns, finished,
                   keys_dropped, frames_dropped, frames_spooled)
SELECT * FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::int[], %s::bigint[],
                     %s::bigint[], %s::bool[], %s::bigint[], %s::bigint[], %s::bigint[])
ON CONFLICT (job_id, world_rank) DO UPDATE SET
    first_seen_ns = LEAST(ranks.first_seen_ns, EXCLUDED.first_seen_ns),
    last_seen_ns = GREATEST(ranks.last_seen_ns, EXCLUDED.last_seen_ns),
    finished = ranks.finished OR EXCLUDED.finished,
    keys_dropped = ranks.keys_dropped + EXCLUDED.keys_dropped,
    frames_dropped = ranks.frames_dropped + EXCLUDED.frames_dropped,
    frames_spooled = ranks.frames_spooled + EXCLUDED.frames_spooled
"""

_FINISH_JOBS = """
UPDATE jobs SET status = 'finished', finished_ns = jobs.last_seen_ns
WHERE jobs.id = ANY(%s::bigint[]) AND jobs.status <> 'finished'
  AND (SELECT count(*) FROM ranks r WHERE r.job_id = jobs.id AND r.finished) >= jobs.world_size
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
    """Commits frames to PostgreSQL in batches; `submit()` resolves once they are committed."""

    def __init__(self, url: str, max_batch: int = 1024, max_backlog: int = MAX_BACKLOG_FRAMES):
        self._url = url
        self._max_batch = max_batch
        self.max_backlog = max_backlog
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake = asyncio.Event()
        self._room: list[Callable[[], None]] = []
        self.backlog = 0  # frames queued, not yet taken by the batch loop
        self._task: asyncio.Task | None = None
        self._conn: psycopg.AsyncConnection | None = None
        self.stats = WriterStats()
        self.partitions = Partitions()

    async def start(self) -> None:
        """Start the background batch loop."""
        self._task = asyncio.create_task(self._run(), name="stacklens-frame-writer")

    async def stop(self) -> None:
        """Stop the loop and close the database connection."""
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()

    @property
    def queue_depth(self) -> int:
        """Frames waiting for the batch loop."""
        return self.backlog

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

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            taken = self._take()
            try:
                await self._write([p.batch for p in taken])
            except psycopg.errors.DataError:
                # A value the database refuses: isolate it so it cannot block the others.
                await self._write_separately(taken)
                continue
            except (psycopg.Error, OSError) as exc:
                await self._outage(taken, exc)
                continue
            except Exception as exc:  # a bug must not stop the loop: fail these, go on
                log.exception("unexpected error writing %d submissions", len(taken))
                await self._outage(taken, exc)
                continue
            _settle(taken)

    async def _write_separately(self, taken: list[_Pending]) -> None:
        """Write each frame on its own; report the ones the database refuses."""
        for pending in taken:
            refused: Refused = {}
            batch = pending.batch
            try:
                if pending.atomic:
                    try:
                        await self._write([batch])
                    except psycopg.errors.DataError as exc:
                        self.stats.data_errors += 1
                        log.error("database refused a value, rejecting the batch: %s", exc)
                        reason = f"database refused a value: {exc}"
                        pending.done.set_exception(FrameError(Status.BAD_BODY, reason))
                    continue
                for i in range(len(batch)):
                    try:
                        await self._write([FrameBatch(batch.data, batch.info[i : i + 1])])
                    except psycopg.errors.DataError as exc:
                        self.stats.data_errors += 1
                        log.error("database refused a frame, rejecting it: %s", exc)
                        refused[i] = FrameError(Status.BAD_BODY, f"database refused a value: {exc}")
            except (psycopg.Error, OSError) as exc:
                await self._outage([pending], exc)
            else:
                if not pending.done.done():
                    pending.done.set_result(refused)

    async def _outage(self, taken: list[_Pending], exc: Exception) -> None:
        """The database is unreachable or failing: fail the batch (senders keep the frames)."""
        self.stats.write_errors += 1
        frames = sum(len(p.batch) for p in taken)
        log.error("could not store %d frames, not acknowledging them: %s", frames, exc)
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        _settle(taken, exc)
        await asyncio.sleep(0.5)

    async def _connection(self) -> psycopg.AsyncConnection:
        """The writer's connection; a new one also (re)syncs the MPI op names."""
        if self._conn is None or self._conn.closed:
            conn = await psycopg.AsyncConnection.connect(self._url)
            names = op_names()
            async with conn.transaction():
                await conn.execute(_SYNC_OPS, (list(range(len(names))), list(names)))
            self._conn = conn
        return self._conn

    async def _write(self, batches: list[FrameBatch]) -> None:
        """Write frames in one transaction (ledger, jobs, ranks, deltas)."""
        frames = _Frames(batches)
        info = frames.info
        conn = await self._connection()
        await self.partitions.ensure(conn, np.unique(info["t_end"] // DAY_NS).tolist())
        async with conn.transaction(), conn.cursor() as cur:
            job_ids = await self._upsert_jobs(cur, frames)
            fresh = await self._insert_ledger(cur, info, job_ids)
            await self._upsert_ranks(cur, info[fresh], job_ids[fresh])
            addresses = frame_addresses(batches)[fresh]
            for table in DELTA_TABLES:
                await self._copy_deltas(cur, frames, fresh, addresses, job_ids[fresh], table)
            p2p = fresh[info["count"][fresh, wire.SPEC.table("p2p").id] > 0]
            if len(p2p):
                minutes = info["t_end"][p2p].astype(np.int64) // MINUTE_NS * MINUTE_NS
                await cur.execute(MARK_DIRTY, (job_ids[p2p].tolist(), minutes.tolist()))
            final = fresh[info["frame_type"][fresh] == FrameType.FINAL]
            if len(final):
                await cur.execute(_FINISH_JOBS, (np.unique(job_ids[final]).tolist(),))
        self.stats.batches += 1
        self.stats.frames_committed += len(fresh)
        self.stats.frames_duplicate += len(info) - len(fresh)

    async def _upsert_jobs(self, cur: psycopg.AsyncCursor, frames: _Frames) -> np.ndarray:
        """One upsert row per job: size, command, user, first start and last end seen.
        Returns the job id of every frame."""
        info = frames.info
        first, group, n = _groups(info["job"])
        start = np.full(n, np.iinfo(np.int64).max)
        end = np.zeros(n, dtype=np.int64)
        np.minimum.at(start, group, info["t_start"].astype(np.int64))
        np.maximum.at(end, group, info["t_end"].astype(np.int64))
        commands: list[str | None] = [None] * n
        users: list[str | None] = [None] * n
        rank_info = wire.SPEC.table("rank_info").id
        for i in np.flatnonzero(info["count"][:, rank_info]).tolist():
            command, user = frames.rank_info(i)
            commands[group[i]] = commands[group[i]] or command
            users[group[i]] = users[group[i]] or user
        keys = [raw.decode("utf-8", "replace") for raw in info["job"][first].tolist()]
        await cur.execute(
            _UPSERT_JOBS,
            (keys, info["world_size"][first].tolist(), commands, users, ["running"] * n,
             start.tolist(), end.tolist()),
        )  # fmt: skip
        ids = {key: job_id for job_id, key in await cur.fetchall()}
        return np.array([ids[key] for key in keys], dtype=np.int64)[group]

    async def _insert_ledger(
        self, cur: psycopg.AsyncCursor, info: np.ndarray, job_ids: np.ndarray
    ) -> np.ndarray:
        """Record every (job, rank, seq) once; returns the indices of the frames not stored
        before (the first of any repeats within the batch), in arrival order."""
        first, _, _ = _groups(job_ids, info["world_rank"], info["seq"])
        first.sort()
        jobs, ranks = job_ids[first].tolist(), info["world_rank"][first].tolist()
        seqs = info["seq"][first].tolist()
        await cur.execute(_INSERT_LEDGER, (jobs, ranks, seqs, [time.time_ns()] * len(first)))
        new = {tuple(row) for row in await cur.fetchall()}
        if len(new) == len(first):
            return first
        keep = [key in new for key in zip(jobs, ranks, seqs, strict=True)]
        return first[np.array(keep, dtype=bool)]

    async def _upsert_ranks(
        self, cur: psycopg.AsyncCursor, info: np.ndarray, job_ids: np.ndarray
    ) -> None:
        """One upsert row per (job, rank): seen times, finished flag, health deltas summed."""
        if not len(info):
            return
        first, group, n = _groups(job_ids, info["world_rank"])
        start = np.full(n, np.iinfo(np.int64).max)
        end = np.zeros(n, dtype=np.int64)
        finished = np.zeros(n, dtype=bool)
        np.minimum.at(start, group, info["t_start"].astype(np.int64))
        np.maximum.at(end, group, info["t_end"].astype(np.int64))
        np.logical_or.at(finished, group, info["frame_type"] == FrameType.FINAL)
        health = []
        for name in _HEALTH:
            total = np.zeros(n, dtype=np.int64)
            np.add.at(total, group, info[name].astype(np.int64))
            health.append(total.tolist())
        hosts = [raw.decode("utf-8", "replace") for raw in info["host"][first].tolist()]
        # ON CONFLICT DO UPDATE may not touch a row twice: hence one row per key.
        await cur.execute(
            _UPSERT_RANKS,
            (job_ids[first].tolist(), info["world_rank"][first].tolist(), hosts,
             info["pid"][first].tolist(), start.tolist(), end.tolist(), finished.tolist(),
             *health),
        )  # fmt: skip

    async def _copy_deltas(
        self,
        cur: psycopg.AsyncCursor,
        frames: _Frames,
        fresh: np.ndarray,
        addresses: np.ndarray,
        job_ids: np.ndarray,
        table: DeltaTable,
    ) -> None:
        """COPY one wire table of the fresh frames (a row per frame, or per record)."""
        table_id = wire.SPEC.table(table.wire).id
        counts = frames.info["count"][fresh, table_id]
        present = np.flatnonzero(counts)
        if not len(present):
            return
        info = frames.info[fresh[present]]
        if table.arrays:
            rows = encode_arrays(
                table_id, table.columns, addresses[present], info, job_ids[present]
            )
            payload = COPY_SIGNATURE + rows + COPY_TRAILER
        else:
            repeat = counts[present]
            heads = {
                "job_id": np.repeat(job_ids[present], repeat),
                "world_rank": np.repeat(info["world_rank"], repeat),
                "t_start_ns": np.repeat(info["t_start"], repeat),
                "t_end_ns": np.repeat(info["t_end"], repeat),
            }
            records = np.concatenate(
                [frames.records(int(i), table.wire) for i in fresh[present].tolist()]
            )
            payload = binary_copy(
                [(kind, heads[name]) for name, kind in INTERVAL_COLUMNS]
                + [(kind, records[name]) for name, kind in table.fields]
            )
        async with cur.copy(table.copy_statement) as copy:
            await copy.write(payload)
        self.stats.rows[table.view or table.sql] += int(counts.sum())
