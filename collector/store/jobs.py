"""Status changes that no frame brings: a running run that went silent is lost.

A run is `running` until its ranks' final frames say it ended (`finished`, `killed`,
`aborted`; the frame writer sets those, collector/store/writer.py) or its launch record
does (`failed` too: collector/store/launches.py). When every rank
vanished without one (all SIGKILLed, a node lost, the spool gone), no frame ever says so:
a running run from which nothing has arrived for `lost_after` is marked `lost`, and so is
its job unless another of its runs is still running (a job's status aggregates its runs':
JOB_STATUS). A frame arriving later puts the run, and its job, back to `running` (the
writer's upserts).
"""

from __future__ import annotations

import psycopg

#: Sets the status of the jobs %s (an array of ids) from their runs' statuses: running if
#: one run is, else lost, else aborted, else killed, else failed, else finished;
#: finished_ns is the latest run end.
JOB_STATUS = """
UPDATE jobs SET status = agg.status,
    finished_ns = CASE WHEN agg.status = 'running' THEN NULL ELSE agg.finished_ns END
FROM (SELECT job_id,
             CASE WHEN bool_or(status = 'running') THEN 'running'
                  WHEN bool_or(status = 'lost') THEN 'lost'
                  WHEN bool_or(status = 'aborted') THEN 'aborted'
                  WHEN bool_or(status = 'killed') THEN 'killed'
                  WHEN bool_or(status = 'failed') THEN 'failed'
                  ELSE 'finished' END AS status,
             max(finished_ns) AS finished_ns
      FROM runs WHERE job_id = ANY(%s::bigint[]) GROUP BY job_id) agg
WHERE jobs.id = agg.job_id
  AND (jobs.status <> agg.status OR jobs.finished_ns IS DISTINCT FROM agg.finished_ns)
"""

_MARK_LOST = """
UPDATE runs SET status = 'lost' WHERE status = 'running' AND last_seen_ns < %s
RETURNING job_id
"""


async def mark_lost_jobs(conn: psycopg.AsyncConnection, cutoff_ns: int) -> int:
    """Mark `lost` every running run whose newest interval ended before `cutoff_ns`, and
    update its job's status; returns how many runs."""
    async with conn.transaction():
        jobs = [row[0] for row in await (await conn.execute(_MARK_LOST, (cutoff_ns,))).fetchall()]
        if jobs:
            await conn.execute(JOB_STATUS, (sorted(set(jobs)),))
        return len(jobs)
