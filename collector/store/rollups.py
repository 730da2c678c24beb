"""Rollups, kept consistent with the raw deltas: point-to-point traffic per rank, peer and
minute (`p2p_minutes`), MPI operations per op and second summed over a run's ranks
(`op_seconds`), and per rank and minute the time its intervals cover (`rank_minutes`), MPI
operations (`rank_op_minutes`) and collectives per communicator (`coll_minutes`).

Every commit of the writer marks the (run, minute) buckets its frames fall in as dirty
(`rollup_dirty`, same transaction as the data). A rollup pass claims the dirty buckets
and recomputes each one from the raw deltas in one transaction: delete the bucket's rollup
rows (its minute, and its minute's seconds), insert the sums. A frame that arrives late
(resent, replayed from a spool) marks its old minute dirty again, so rollups never drift
from the raw data; data committed during a pass marks its bucket again and is picked up by
the next pass. Several collectors may run passes at once: each claims different buckets.
"""

from __future__ import annotations

import psycopg

from stacklens.constants import P2P_COUNTERS

MINUTE_NS = 60 * 10**9

MARK_DIRTY = """
INSERT INTO rollup_dirty (run_id, minute_ns, job_id)
SELECT DISTINCT * FROM unnest(%b::bigint[], %b::bigint[], %b::bigint[]) ORDER BY 1, 2
ON CONFLICT DO NOTHING
"""

_CLAIM = "DELETE FROM rollup_dirty RETURNING job_id, run_id, minute_ns"

_CLEAR = """
DELETE FROM p2p_minutes m
USING unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)
WHERE m.run_id = c.run_id AND m.minute_ns = c.minute_ns
"""

# The job id lets the scan use the delta tables' (job_id, t_end_ns) index.
_RECOMPUTE = f"""
INSERT INTO p2p_minutes (job_id, run_id, minute_ns, world_rank, peer, {", ".join(P2P_COUNTERS)})
SELECT d.job_id, d.run_id, d.t_end_ns / {MINUTE_NS} * {MINUTE_NS}, d.world_rank, d.peer,
       {", ".join(f"sum(d.{c})" for c in P2P_COUNTERS)}
FROM p2p_deltas d
JOIN unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)
    ON d.job_id = c.job_id AND d.run_id = c.run_id
   AND d.t_end_ns >= c.minute_ns AND d.t_end_ns < c.minute_ns + {MINUTE_NS}
GROUP BY 1, 2, 3, 4, 5
"""


SECOND_NS = 10**9

_CLEAR_SECONDS = f"""
DELETE FROM op_seconds s
USING unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)
WHERE s.run_id = c.run_id AND s.second_ns >= c.minute_ns AND s.second_ns < c.minute_ns + {MINUTE_NS}
"""

_RECOMPUTE_SECONDS = f"""
INSERT INTO op_seconds (job_id, run_id, second_ns, op_id, calls, bytes, time_ns)
SELECT d.job_id, d.run_id, d.t_end_ns / {SECOND_NS} * {SECOND_NS}, d.op_id,
       sum(d.calls), sum(d.bytes), sum(d.time_ns)
FROM op_deltas d
JOIN unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)
    ON d.job_id = c.job_id AND d.run_id = c.run_id
   AND d.t_end_ns >= c.minute_ns AND d.t_end_ns < c.minute_ns + {MINUTE_NS}
GROUP BY 1, 2, 3, 4
"""


#: The buckets of a pass, joined to the rows they recompute.
_BUCKETS = "unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS c(job_id, run_id, minute_ns)"
_IN_BUCKET = (
    "d.job_id = c.job_id AND d.run_id = c.run_id "
    f"AND d.t_end_ns >= c.minute_ns AND d.t_end_ns < c.minute_ns + {MINUTE_NS}"
)
_MINUTE = f"d.t_end_ns / {MINUTE_NS} * {MINUTE_NS}"

#: The per-rank minute rollups: table, and the SELECT of its rows from the deltas `d`.
_RANK_MINUTES = {
    "rank_minutes": f"""
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, min(d.t_start_ns), max(d.t_end_ns)
FROM (SELECT job_id, run_id, world_rank, t_start_ns, t_end_ns FROM op_frames
      UNION ALL SELECT job_id, run_id, world_rank, t_start_ns, t_end_ns FROM io_deltas) d
JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4""",
    "rank_op_minutes": f"""
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, d.op_id, sum(d.calls), sum(d.time_ns)
FROM op_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5""",
    "coll_minutes": f"""
SELECT d.job_id, d.run_id, {_MINUTE}, d.world_rank, d.comm_id, d.comm_size, d.op_id,
       sum(d.calls), sum(d.time_ns)
FROM coll_deltas d JOIN {_BUCKETS} ON {_IN_BUCKET}
GROUP BY 1, 2, 3, 4, 5, 6, 7""",
}


#: The per-rank minute rollup tables (retention deletes their old minutes).
ROLLED_PER_RANK = tuple(_RANK_MINUTES)


def minute_of(ns: int) -> int:
    """Start (ns) of the UTC minute containing `ns`."""
    return ns // MINUTE_NS * MINUTE_NS


async def rollup_pass(conn: psycopg.AsyncConnection) -> int:
    """Recompute every dirty bucket in one transaction; returns the rollup rows written."""
    async with conn.transaction():
        claimed = await (await conn.execute(_CLAIM)).fetchall()
        if not claimed:
            return 0
        buckets = tuple(list(column) for column in zip(*claimed, strict=True))
        await conn.execute(_CLEAR, buckets)
        await conn.execute(_CLEAR_SECONDS, buckets)
        rows = (await conn.execute(_RECOMPUTE, buckets)).rowcount
        rows += (await conn.execute(_RECOMPUTE_SECONDS, buckets)).rowcount
        for table, select in _RANK_MINUTES.items():
            await conn.execute(
                f"DELETE FROM {table} m USING {_BUCKETS} "
                "WHERE m.run_id = c.run_id AND m.minute_ns = c.minute_ns",
                buckets,
            )
            rows += (await conn.execute(f"INSERT INTO {table} {select}", buckets)).rowcount
        return rows
