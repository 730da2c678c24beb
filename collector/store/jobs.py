"""Job status changes that no frame brings: a running job that went silent is lost.

A job is `running` until its ranks' final frames say it ended (`finished`, `killed`; the
frame writer sets those, collector/store/writer.py). When every rank vanished without one
(all SIGKILLed, a node lost, the spool gone), no frame ever says so: a running job from
which nothing has arrived for `lost_after` is marked `lost`. A frame arriving later puts it
back to `running` (the writer's job upsert).
"""

from __future__ import annotations

import psycopg

_MARK_LOST = """
UPDATE jobs SET status = 'lost' WHERE status = 'running' AND last_seen_ns < %s
"""


async def mark_lost_jobs(conn: psycopg.AsyncConnection, cutoff_ns: int) -> int:
    """Mark `lost` every running job whose newest interval ended before `cutoff_ns`;
    returns how many."""
    async with conn.transaction():
        cur = await conn.execute(_MARK_LOST, (cutoff_ns,))
        return cur.rowcount
