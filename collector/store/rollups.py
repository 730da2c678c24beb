"""Rollups, kept consistent with the raw deltas (exact sums of the intervals that ended in
their minute or second), for the sums and series of any window:

- from the raw deltas: point-to-point traffic per rank, peer and minute (`p2p_minutes`);
  MPI operations per op and second summed over a run's ranks (`op_seconds`); file I/O per
  phase, layer, path and second summed over a run's ranks (`io_seconds`); per rank and
  minute the time its intervals cover (`rank_minutes`), its MPI operations
  (`rank_op_minutes`) and collectives per communicator, op and root (`coll_minutes`);
- from those, in the same pass: traffic per destination rank and minute (`peer_minutes`),
  and per rank and minute what a by-rank series point holds (`rank_value_minutes`);
- from the per-rank minute rollups, in the same pass: the same per UTC five minutes
  (`rank_fives`, `rank_op_fives`, `coll_fives`, `peer_fives`, `rank_value_fives`), for
  per-rank readings at steps of whole five minutes (a 1,024-rank job's hour: 5x fewer rows);
  and from these the slow-rank profile's shares per rank and five minutes
  (`rank_share_fives`).

Every commit of the writer marks the (run, minute) buckets its frames fall in as dirty
(`rollup_dirty`, same transaction as the data). A rollup pass claims the dirty buckets
and recomputes each one from the raw deltas in one transaction: delete the bucket's rollup
rows (its minute, and its minute's seconds), insert the sums. A frame that arrives late
(resent, replayed from a spool) marks its old minute dirty again, so rollups never drift
from the raw data; data committed during a pass marks its bucket again and is picked up by
the next pass. A bucket whose sums do not fit their columns (a sender's counters near 2^63:
a poison that would fail every pass, for every user) fails the pass; it is then done run by
run, and a run that fails on its own has its marks quarantined (`rollup_dirty.quarantined`:
never claimed again, still dirty, so its minutes are read from the raw deltas, exact),
logged and counted, while every other run is rolled up. Several collectors may run passes
at once: each claims different buckets; the five minutes holding them may overlap, so the
five-minute rollups are recomputed under a transaction lock (FIVES_LOCK), from the minute
rollups as committed before it. A reader takes a five-minute row only when none of its
minutes is dirty.
"""

from __future__ import annotations

import logging

import psycopg

from stacklens.constants import (
    FILE_IO_LAYERS,
    FIVE_NS,
    MINUTE_NS,
    MPI_CATEGORIES,
    P2P_COUNTERS,
    SECOND_NS,
)
from stacklens.mpi_ops import op_classes
from stacklens.schema import SHARE_CLASSES

log = logging.getLogger(__name__)

MARK_DIRTY = """
INSERT INTO rollup_dirty (run_id, minute_ns, job_id)
SELECT DISTINCT * FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[]) ORDER BY 1, 2
ON CONFLICT DO NOTHING
"""

_CLAIM = "DELETE FROM rollup_dirty WHERE NOT quarantined RETURNING job_id, run_id, minute_ns"
_CLAIM_RUN = (
    "DELETE FROM rollup_dirty WHERE NOT quarantined AND run_id = %s "
    "RETURNING job_id, run_id, minute_ns"
)
_DIRTY_RUNS = "SELECT DISTINCT run_id FROM rollup_dirty WHERE NOT quarantined ORDER BY 1"
_QUARANTINE = """
WITH q AS (UPDATE rollup_dirty SET quarantined = true WHERE run_id = %s AND NOT quarantined
           RETURNING run_id)
SELECT j.owner_uid, j.job_key, r.ordinal, (SELECT count(*) FROM q)
FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = %s
"""

#: The buckets of a pass, joined to the rows they recompute. (The job id lets the scans
#: use the delta tables' (job_id, t_end_ns) index.)
_BUCKETS = "unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)"
_MINUTE = f"d.t_end_ns / {MINUTE_NS} * {MINUTE_NS}"
# The minute as a join key: a pass over many minutes of a job hashes each row to its
# bucket (compared with every bucket of its run, an hour of a 1,024-rank job made 221 M
# comparisons per table); the range lets a pass over a few minutes use the index.
_IN_BUCKET = (
    f"d.job_id = c.job_id AND d.run_id = c.run_id AND {_MINUTE} = c.minute_ns "
    f"AND d.t_end_ns >= c.minute_ns AND d.t_end_ns < c.minute_ns + {MINUTE_NS}"
)
_SECOND = f"d.t_end_ns / {SECOND_NS} * {SECOND_NS}"

#: The per-rank minute rollups from the raw deltas: table, and its columns and the SELECT of
#: its rows from the deltas `d`.
_RANK_MINUTES = {
    "rank_minutes": f"""
(job_id, run_id, minute_ns, world_rank, first_start_ns, last_end_ns)
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, min(d.t_start_ns), max(d.t_end_ns)
FROM (SELECT job_id, run_id, world_rank, t_start_ns, t_end_ns FROM op_frames
      UNION ALL SELECT job_id, run_id, world_rank, t_start_ns, t_end_ns FROM io_deltas) d
JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4""",
    "rank_op_minutes": f"""
(job_id, run_id, minute_ns, world_rank, op_id, calls, time_ns)
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, d.op_id, sum(d.calls), sum(d.time_ns)
FROM op_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5""",
    "coll_minutes": f"""
(job_id, run_id, minute_ns, world_rank, comm_id, comm_size, op_id, root, calls, time_ns,
 bytes)
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, d.comm_id, d.comm_size, d.op_id, d.root,
       sum(d.calls), sum(d.time_ns), sum(d.bytes)
FROM coll_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8""",
}

#: The rollups summed from the raw deltas: table, its time column (a minute's rows or its
#: seconds' rows are deleted), and its columns and the SELECT of its rows from the deltas `d`.
_FROM_RAW = {
    "p2p_minutes": (
        "minute_ns",
        f"""
(job_id, run_id, minute_ns, world_rank, peer, {", ".join(P2P_COUNTERS)})
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, d.peer,
       {", ".join(f"sum(d.{c})" for c in P2P_COUNTERS)}
FROM p2p_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5""",
    ),
    "op_seconds": (
        "second_ns",
        f"""
(job_id, run_id, second_ns, op_id, calls, bytes, time_ns)
SELECT d.job_id, d.run_id, {_SECOND}, d.op_id, sum(d.calls), sum(d.bytes), sum(d.time_ns)
FROM op_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4""",
    ),
    **{table: ("minute_ns", select) for table, select in _RANK_MINUTES.items()},
    "io_seconds": (
        "second_ns",
        f"""
(job_id, run_id, second_ns, phase, layer, path, reads, writes, bytes_read, bytes_written, time_ns)
SELECT d.job_id, d.run_id, {_SECOND}, d.phase, d.layer, d.path,
       sum(d.reads), sum(d.writes), sum(d.bytes_read), sum(d.bytes_written),
       sum(d.read_time_ns + d.write_time_ns + d.meta_time_ns)
FROM io_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5, 6""",
    ),
}


#: The same bucket's rows of a rollup `m` written just before.
_IN_ROLLED = "m.run_id = c.run_id AND m.minute_ns = c.minute_ns"

#: The rollups summed from other rollups of the same buckets, written after them.
_FROM_ROLLUPS = {
    "peer_minutes": f"""
(job_id, run_id, minute_ns, peer, bytes_sent, msgs_sent)
SELECT m.job_id, m.run_id, m.minute_ns, m.peer, sum(m.bytes_sent), sum(m.msgs_sent)
FROM p2p_minutes m JOIN {_BUCKETS} ON {_IN_ROLLED}
GROUP BY 1, 2, 3, 4""",
    "rank_value_minutes": f"""
(job_id, run_id, minute_ns, world_rank, mpi_calls, mpi_time_ns, bytes_sent, io_bytes,
 io_time_ns, file_io_ns)
WITH c AS (SELECT * FROM {_BUCKETS})
SELECT job_id, run_id, minute_ns, world_rank, sum(calls), sum(time_ns), sum(sent), sum(io_bytes),
       sum(io_ns), sum(file_ns)
FROM (SELECT m.job_id, m.run_id, m.minute_ns, m.world_rank, m.calls, m.time_ns, 0 AS sent,
             0 AS io_bytes, 0 AS io_ns, 0 AS file_ns
      FROM rank_op_minutes m JOIN c ON {_IN_ROLLED}
      UNION ALL
      SELECT m.job_id, m.run_id, m.minute_ns, m.world_rank, 0, 0, m.bytes_sent, 0, 0, 0
      FROM p2p_minutes m JOIN c ON {_IN_ROLLED}
      UNION ALL
      SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, 0, 0, 0,
             d.bytes_read + d.bytes_written, d.read_time_ns + d.write_time_ns + d.meta_time_ns,
             CASE WHEN d.layer IN ({", ".join(map(str, FILE_IO_LAYERS))})
                  THEN d.read_time_ns + d.write_time_ns + d.meta_time_ns ELSE 0 END
      FROM io_deltas d JOIN c ON {_IN_BUCKET} WHERE d.phase = 0) u
GROUP BY 1, 2, 3, 4""",
}

#: The per-rank minute rollup tables (retention deletes their old minutes).
ROLLED_PER_RANK = (*_RANK_MINUTES, "peer_minutes", "rank_value_minutes")


def _fives(minutes: str, keys: tuple[str, ...], values: dict[str, str]) -> str:
    """The columns and SELECT of a five-minute rollup's rows from the minute rollup
    `minutes` (rows `m`) for the pass's five minutes `c`: `keys` after the run and time,
    then each value column from its aggregate (`agg`, of m.<column>)."""
    return f"""
(job_id, run_id, minute_ns, {", ".join(keys)}, {", ".join(values)})
SELECT m.job_id, m.run_id, c.minute_ns, {", ".join(f"m.{k}" for k in keys)},
       {", ".join(f"{agg}(m.{v})" for v, agg in values.items())}
FROM {minutes} m JOIN {_BUCKETS} ON m.run_id = c.run_id AND m.minute_ns >= c.minute_ns
     AND m.minute_ns < c.minute_ns + {FIVE_NS}
GROUP BY 1, 2, 3, {", ".join(str(4 + i) for i in range(len(keys)))}"""


def _sums(*columns: str) -> dict[str, str]:
    return dict.fromkeys(columns, "sum")


#: The five-minute rollups summed from the minute rollups: table -> its columns and SELECT.
_FIVES = {
    "rank_fives": _fives("rank_minutes", ("world_rank",),
                         {"first_start_ns": "min", "last_end_ns": "max"}),
    "rank_op_fives": _fives("rank_op_minutes", ("world_rank", "op_id"),
                            _sums("calls", "time_ns")),
    "coll_fives": _fives("coll_minutes", ("world_rank", "comm_id", "comm_size", "op_id", "root"),
                         _sums("calls", "time_ns", "bytes")),
    "peer_fives": _fives("peer_minutes", ("peer",), _sums("bytes_sent", "msgs_sent")),
    "rank_value_fives": _fives("rank_value_minutes", ("world_rank",), _sums(
        "mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes", "io_time_ns", "file_io_ns")),
}  # fmt: skip

#: SQL: the class (op_class) of the op of a row `m`.
_CLASS = (f"coalesce(('{{{','.join(map(str, op_classes()))}}}'::int2[])[m.op_id + 1], "
          f"{MPI_CATEGORIES.index('other')})")  # fmt: skip
_IN_FIVE = "m.job_id = c.job_id AND m.minute_ns = c.minute_ns"
_SAME_RANK = (
    "{t}.run_id = r.run_id AND {t}.minute_ns = r.minute_ns AND {t}.world_rank = r.world_rank"
)
_FILE_IO = SHARE_CLASSES.index("io_ns")

#: The slow-rank profile's shares per rank and five minutes of the pass's five minutes'
#: jobs (every run of the job in them summed), from the five-minute rollups just written
#: (rank_fives, rank_op_fives, rank_value_fives): read instead of pivoting them at each
#: reading. First the clearing, then the columns and SELECT of the rows.
_CLEAR_SHARES = (
    f"DELETE FROM rank_share_fives m USING {_BUCKETS} WHERE m.job_id = c.job_id "
    "AND m.minute_ns = c.minute_ns"
)
_SHARES = f"""
(job_id, minute_ns, world_rank, elapsed_ns, {", ".join(SHARE_CLASSES)})
WITH c AS (SELECT DISTINCT job_id, minute_ns FROM {_BUCKETS}),
o AS (SELECT m.run_id, m.minute_ns, m.world_rank, {_CLASS} AS cls, m.time_ns
      FROM rank_op_fives m JOIN c ON {_IN_FIVE}),
per_run AS (
  SELECT r.job_id, r.minute_ns, r.world_rank, r.last_end_ns - r.first_start_ns AS elapsed_ns,
         {
    ", ".join(
        f"coalesce(sum(o.time_ns) FILTER (WHERE o.cls = {k}), 0)"
        + (" + coalesce(v.file_io_ns, 0)" if k == _FILE_IO else "")
        + f" AS {name}"
        for k, name in enumerate(SHARE_CLASSES)
    )
}
  FROM rank_fives r JOIN c ON r.job_id = c.job_id AND r.minute_ns = c.minute_ns
  LEFT JOIN o ON {_SAME_RANK.format(t="o")}
  LEFT JOIN rank_value_fives v ON {_SAME_RANK.format(t="v")}
  GROUP BY r.job_id, r.run_id, r.minute_ns, r.world_rank, r.first_start_ns, r.last_end_ns,
           v.file_io_ns)
SELECT job_id, minute_ns, world_rank, {
    ", ".join(f"sum({n})" for n in ("elapsed_ns", *SHARE_CLASSES))
}
FROM per_run GROUP BY 1, 2, 3"""

#: The per-rank five-minute rollup tables (retention deletes the five minutes that end
#: before its cutoff).
ROLLED_PER_FIVE = (*_FIVES, "rank_share_fives")

#: The transaction lock (pg_advisory_xact_lock) of the five-minute part of a pass: two
#: passes whose minutes share five minutes recompute them one after the other, the second
#: from the minute rollups the first committed.
FIVES_LOCK = 0x5F1E5

#: The per-second rollup tables (retention deletes their old seconds).
ROLLED_PER_SECOND = ("op_seconds", "io_seconds")

#: Planner settings of a pass: its sums are hashed in memory (an hour of a 1,024-rank job
#: groups ~190,000 rank x op x minute keys, ~55 MB). The planner underestimates the rows a
#: join with the buckets keeps (its three keys are not independent) and chose to sort the
#: 11 M unnested records of such an hour on disk instead (external merge, 0.7 GB): 3-4x
#: slower (bench/RESULTS.md).
PASS_SETTINGS = ("SET LOCAL work_mem = '256MB'", "SET LOCAL enable_sort = off")


def minute_of(ns: int) -> int:
    """Start (ns) of the UTC minute containing `ns`."""
    return ns // MINUTE_NS * MINUTE_NS


async def rollup_pass(conn: psycopg.AsyncConnection, quarantined: list[int] | None = None) -> int:
    """Recompute every dirty bucket in one transaction; returns the rollup rows written.

    If that fails for a value out of range, the buckets are recomputed run by run and the
    marks of a run that fails on its own are quarantined (see the module doc); its id is
    appended to `quarantined`."""
    try:
        return await _recompute(conn, None)
    except psycopg.errors.DataError as exc:
        log.warning("rollup pass failed (%s); rolling up run by run", exc)
    rows = 0
    async with conn.transaction():
        runs = [run for (run,) in await (await conn.execute(_DIRTY_RUNS)).fetchall()]
    for run in runs:
        try:
            rows += await _recompute(conn, run)
        except psycopg.errors.DataError as exc:
            async with conn.transaction():
                found = await (await conn.execute(_QUARANTINE, (run, run))).fetchone()
            owner, job, ordinal, marks = found if found is not None else (None, None, None, 0)
            log.error("rollups of run %s of job %r of uid %s quarantined (%d minutes, read "
                      "from the raw deltas from now on): %s", ordinal, job, owner, marks,
                      exc)  # fmt: skip
            if quarantined is not None:
                quarantined.append(run)
    return rows


async def _recompute(conn: psycopg.AsyncConnection, run: int | None) -> int:
    """Recompute the dirty buckets (of the run `run`, or all), not quarantined, in one
    transaction; returns the rollup rows written."""
    async with conn.transaction():
        claim = (_CLAIM, ()) if run is None else (_CLAIM_RUN, (run,))
        claimed = await (await conn.execute(*claim)).fetchall()
        if not claimed:
            return 0
        for setting in PASS_SETTINGS:
            await conn.execute(setting)
        buckets = tuple(list(column) for column in zip(*claimed, strict=True))
        rows = 0
        for table, (time, select) in _FROM_RAW.items():
            await conn.execute(
                f"DELETE FROM {table} m USING {_BUCKETS} WHERE m.run_id = c.run_id "
                f"AND m.{time} >= c.minute_ns AND m.{time} < c.minute_ns + {MINUTE_NS}",
                buckets,
            )
            rows += (await conn.execute(f"INSERT INTO {table} {select}", buckets)).rowcount
        for table, select in _FROM_ROLLUPS.items():
            clear = f"DELETE FROM {table} m USING {_BUCKETS} WHERE {_IN_ROLLED}"
            await conn.execute(clear, buckets)
            rows += (await conn.execute(f"INSERT INTO {table} {select}", buckets)).rowcount
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (FIVES_LOCK,))
        fives = sorted({(job, r, minute // FIVE_NS * FIVE_NS) for job, r, minute in claimed})
        five_buckets = tuple(list(column) for column in zip(*fives, strict=True))
        for table, select in _FIVES.items():
            clear = f"DELETE FROM {table} m USING {_BUCKETS} WHERE {_IN_ROLLED}"
            await conn.execute(clear, five_buckets)
            rows += (await conn.execute(f"INSERT INTO {table} {select}", five_buckets)).rowcount
        await conn.execute(_CLEAR_SHARES, five_buckets)
        shares = await conn.execute(f"INSERT INTO rank_share_fives {_SHARES}", five_buckets)
        return rows + shares.rowcount
