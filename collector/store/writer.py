"""The frame writer: batches validated frames and commits each batch in one transaction.

Every frame's data is written at most once: the `received_frames` ledger deduplicates by
(job, rank, seq) inside the same transaction as the data, so a resent frame is recognised
even after a collector restart. Callers are told a frame is stored only after COMMIT.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import psycopg

from collector.store.copy import binary_copy
from collector.store.partitions import Partitions, day_of
from collector.store.rollups import MARK_DIRTY, minute_of
from collector.store.tables import DELTA_TABLES, INTERVAL_COLUMNS, DeltaTable
from stacklens.mpi_ops import op_names
from stacklens.wire import Frame, FrameError, FrameType, Status

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

    frames: list[Frame]
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def _settle(batch: list[_Pending], error: Exception | None = None) -> None:
    """Resolve the submissions' futures: committed, or failed with `error`."""
    for pending in batch:
        if pending.done.done():
            continue
        if error is None:
            pending.done.set_result(None)
        else:
            pending.done.set_exception(error)


class FrameWriter:
    """Commits frames to PostgreSQL in batches; `store()` returns once a frame is committed."""

    def __init__(self, url: str, max_batch: int = 512, max_queue: int = 8192):
        self._url = url
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=max_queue)
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
        """Submissions waiting for the batch loop."""
        return self._queue.qsize()

    async def store(self, frame: Frame) -> None:
        """Queue `frame` and wait until it is committed (raises if the write failed)."""
        await self.store_all([frame])

    async def store_all(self, frames: list[Frame]) -> None:
        """Queue `frames`, committed in one transaction; wait for it (raises on failure)."""
        await (await self.submit(frames))

    async def submit(self, frames: list[Frame]) -> asyncio.Future:
        """Queue `frames` (waiting only while the queue is full); the future resolves when
        they are committed in one transaction, or fails."""
        pending = _Pending(frames)
        await self._queue.put(pending)
        return pending.done

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            size = len(batch[0].frames)
            while size < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
                size += len(batch[-1].frames)
            try:
                await self._write([f for p in batch for f in p.frames])
            except psycopg.errors.DataError:
                # A value the database refuses: isolate it so it cannot block the others.
                await self._write_separately(batch)
                continue
            except (psycopg.Error, OSError) as exc:
                await self._outage(batch, exc)
                continue
            _settle(batch)

    async def _write_separately(self, batch: list[_Pending]) -> None:
        """Write each submission on its own; reject the ones the database refuses."""
        for pending in batch:
            try:
                await self._write(pending.frames)
            except psycopg.errors.DataError as exc:
                self.stats.data_errors += 1
                log.error("database refused a frame, rejecting it: %s", exc)
                _settle([pending], FrameError(Status.BAD_BODY, f"database refused a value: {exc}"))
            except (psycopg.Error, OSError) as exc:
                await self._outage([pending], exc)
            else:
                _settle([pending])

    async def _outage(self, batch: list[_Pending], exc: Exception) -> None:
        """The database is unreachable or failing: fail the batch (senders keep the frames)."""
        self.stats.write_errors += 1
        frames = sum(len(p.frames) for p in batch)
        log.error("could not store %d frames, not acknowledging them: %s", frames, exc)
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        _settle(batch, exc)
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

    async def _write(self, frames: list[Frame]) -> None:
        """Write one batch in one transaction (ledger, jobs, ranks, deltas)."""
        conn = await self._connection()
        await self.partitions.ensure(conn, {day_of(f.header.interval_end_ns) for f in frames})
        now = time.time_ns()
        async with conn.transaction(), conn.cursor() as cur:
            job_ids = await self._upsert_jobs(cur, frames)
            unique: dict[tuple[int, int, int], Frame] = {}
            for f in frames:
                key = (job_ids[f.header.job_id], f.header.world_rank, f.header.seq)
                unique.setdefault(key, f)
            keys = list(unique)
            await cur.execute(
                _INSERT_LEDGER,
                (
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                    [k[2] for k in keys],
                    [now] * len(keys),
                ),
            )
            new_keys = {tuple(row) for row in await cur.fetchall()}
            fresh = [(k, unique[k]) for k in keys if k in new_keys]
            await self._upsert_ranks(cur, fresh)
            for table in DELTA_TABLES:
                await self._copy_deltas(cur, fresh, table)
            dirty = {
                (k[0], minute_of(f.header.interval_end_ns)) for k, f in fresh if "p2p" in f.tables
            }
            if dirty:
                await cur.execute(MARK_DIRTY, ([j for j, _ in dirty], [m for _, m in dirty]))
            finishing = sorted({k[0] for k, f in fresh if f.header.frame_type == FrameType.FINAL})
            if finishing:
                await cur.execute(_FINISH_JOBS, (finishing,))
        self.stats.batches += 1
        self.stats.frames_committed += len(fresh)
        self.stats.frames_duplicate += len(frames) - len(fresh)

    async def _upsert_jobs(self, cur: psycopg.AsyncCursor, frames: list[Frame]) -> dict[str, int]:
        """One upsert row per job: size, command, user, first start and last end seen."""
        jobs: dict[str, dict] = {}
        for f in frames:
            h = f.header
            job = jobs.setdefault(
                h.job_id,
                {"size": h.world_size, "command": None, "user": None,
                 "start": h.interval_start_ns, "end": h.interval_end_ns},
            )  # fmt: skip
            job["command"] = job["command"] or f.command
            job["user"] = job["user"] or f.user
            job["start"] = min(job["start"], h.interval_start_ns)
            job["end"] = max(job["end"], h.interval_end_ns)
        keys = list(jobs)
        columns = [[jobs[k][c] for k in keys] for c in ("size", "command", "user")]
        ends = [[jobs[k][c] for k in keys] for c in ("start", "end")]
        await cur.execute(_UPSERT_JOBS, (keys, *columns, ["running"] * len(keys), *ends))
        return {key: job_id for job_id, key in await cur.fetchall()}

    async def _upsert_ranks(self, cur: psycopg.AsyncCursor, fresh: list) -> None:
        """One upsert row per (job, rank): seen times, finished flag, health deltas summed."""
        merged: dict[tuple[int, int], list] = {}
        for (job_id, rank, _), f in fresh:
            h = f.header
            health = f.tables.get("health")
            dropped = [int(health[name].sum()) if health is not None else 0 for name in _HEALTH]
            row = merged.get((job_id, rank))
            if row is None:
                merged[(job_id, rank)] = [
                    job_id, rank, h.host, h.pid, h.interval_start_ns, h.interval_end_ns,
                    h.frame_type == FrameType.FINAL, *dropped,
                ]  # fmt: skip
                continue
            row[4] = min(row[4], h.interval_start_ns)
            row[5] = max(row[5], h.interval_end_ns)
            row[6] = row[6] or h.frame_type == FrameType.FINAL
            for i, value in enumerate(dropped, start=7):
                row[i] += value
        if merged:
            # ON CONFLICT DO UPDATE may not touch a row twice: hence one row per key.
            await cur.execute(_UPSERT_RANKS, [list(c) for c in zip(*merged.values(), strict=True)])

    async def _copy_deltas(self, cur: psycopg.AsyncCursor, fresh: list, table: DeltaTable) -> None:
        """COPY one wire table of all fresh frames (a row per frame, or per record)."""
        parts = [
            (k, f, f.tables[table.wire]) for k, f in fresh if len(f.tables.get(table.wire, ()))
        ]
        if not parts:
            return
        interval = {
            "job_id": [k[0] for k, _, _ in parts],
            "world_rank": [k[1] for k, _, _ in parts],
            "t_start_ns": [f.header.interval_start_ns for _, f, _ in parts],
            "t_end_ns": [f.header.interval_end_ns for _, f, _ in parts],
        }
        if table.arrays:
            heads = {name: np.asarray(values, dtype=np.int64) for name, values in interval.items()}
            fields = [[records[name] for _, _, records in parts] for name, _ in table.fields]
        else:
            counts = [len(records) for _, _, records in parts]
            heads = {
                name: np.repeat(np.asarray(values, dtype=np.int64), counts)
                for name, values in interval.items()
            }
            records = np.concatenate([r for _, _, r in parts])
            fields = [records[name] for name, _ in table.fields]
        payload = binary_copy(
            [(kind, heads[name]) for name, kind in INTERVAL_COLUMNS]
            + list(zip(table.copy_types, fields, strict=True))
        )
        async with cur.copy(table.copy_statement) as copy:
            await copy.write(payload)
        self.stats.rows[table.view or table.sql] += sum(len(r) for _, _, r in parts)
