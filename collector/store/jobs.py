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

#: Creates or extends the jobs of rows (owner, key, world size, command, user, status, start,
#: end; one array each): the largest world, the earliest start, the latest end, the first
#: command and user; the status is JOB_STATUS's to set. Returns their ids.
UPSERT_JOBS = """
INSERT INTO jobs (owner_uid, job_key, world_size, command, "user", status, started_ns,
                  last_seen_ns)
SELECT * FROM unnest(%b::bigint[], %b::text[], %b::int[], %b::text[], %b::text[], %b::text[],
                     %b::bigint[], %b::bigint[])
ON CONFLICT (owner_uid, job_key) DO UPDATE SET
    world_size = GREATEST(jobs.world_size, EXCLUDED.world_size),
    started_ns = LEAST(jobs.started_ns, EXCLUDED.started_ns),
    last_seen_ns = GREATEST(jobs.last_seen_ns, EXCLUDED.last_seen_ns),
    command = COALESCE(jobs.command, EXCLUDED.command),
    "user" = COALESCE(jobs."user", EXCLUDED."user")
RETURNING id
"""

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
