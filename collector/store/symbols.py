# collector/store/symbols.py — stored call-site resolutions: what is pending, what is known.
"""The rows behind a call site's name (docs/callsites.md, "Where it is resolved"):

- `callsite_symbols`: answers read by the collector's resolver from the module file that
  ran (quality `line` or `function+offset`), one per (module path, build-id, offset),
  serving every job whose frame names that path: never a frame of another path, since a
  build-id is a note any user can copy into a file of their own (issue #26);
- `callsite_node_symbols`: answers `stacklens run` read on the compute node, sent in its
  launch frame (wire table site_symbol), one per (owner, build-id, offset): they label
  only the jobs of the owner whose credential sent them;
- `callsite_fallbacks`: frames the resolver could not read (module missing, unreadable,
  not readable by the job's owner, rebuilt since the run, stripped of every symbol), with
  the reason and when it was tried, per (owner, module path, build-id, offset), so reads
  say why: a reason is read from the file as one owner may see it (stacklens/symbols.
  owner_access), so it is shown to that owner's jobs only, and another owner's frame of
  the same file is resolved for its own owner. A fallback stands until it is older than
  the resolver's retry period: then its frame is pending again (the file may have
  appeared, been restored or become readable); an answer replaces it (every owner's
  fallback row of the frame is deleted: the answer serves every job naming the path) and
  is never tried again, so a frame is never downgraded.

The resolver (collector/resolver.py) asks `pending` for the frames of the jobs that just
received call sites and stores with `store_resolved`; the launch writer stores a node's
answers with `store_node_symbols` (async, in its transaction).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

#: A frame `p` (callsite_paths) of job `j` with a build-id, a module and a known offset that
#: no stored row answers: a node's answer for the job's owner, the resolver's answer for
#: that path, or its fallback for that path and the job's owner tried since
#: %(retry_before)s. A Python frame (build-id 'py:...')
#: names itself: never pending.
_UNANSWERED = """p.build_id <> '' AND p.module <> '' AND p.site_offset <> 0
  AND p.build_id NOT LIKE 'py:%%'
  AND NOT EXISTS (SELECT 1 FROM callsite_symbols s
                  WHERE s.module = p.module AND s.build_id = p.build_id
                    AND s.site_offset = p.site_offset)
  AND NOT EXISTS (SELECT 1 FROM callsite_node_symbols n
                  WHERE n.owner_uid = j.owner_uid AND n.build_id = p.build_id
                    AND n.site_offset = p.site_offset)
  AND NOT EXISTS (SELECT 1 FROM callsite_fallbacks f
                  WHERE f.owner_uid = j.owner_uid AND f.module = p.module
                    AND f.build_id = p.build_id AND f.site_offset = p.site_offset
                    AND f.resolved_ns >= %(retry_before)s)
"""

#: The unanswered frames of the jobs given, with their jobs' owners; at most %(limit)s of
#: them a pass.
_PENDING = f"""
SELECT DISTINCT j.owner_uid, p.module, p.build_id, p.site_offset
FROM callsite_paths p JOIN jobs j ON j.id = p.job_id
WHERE p.job_id = ANY(%(jobs)s) AND {_UNANSWERED}
ORDER BY j.owner_uid, p.module, p.build_id, p.site_offset
LIMIT %(limit)s
"""

#: Jobs seen since %(since)s with an unanswered frame (the resolver's catch-up at start).
_JOBS_PENDING = f"""
SELECT DISTINCT p.job_id
FROM callsite_paths p JOIN jobs j ON j.id = p.job_id
WHERE j.last_seen_ns >= %(since)s AND {_UNANSWERED}
"""

_INSERT_SYMBOLS = """
INSERT INTO callsite_symbols (module, build_id, site_offset, quality, function,
                              function_offset, file, line, reason, resolved, resolved_ns)
SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[],
                     %s::bigint[], %s::text[], %s::int[], %s::text[], %s::text[], %s::bigint[])
ON CONFLICT (module, build_id, site_offset) DO NOTHING
"""

#: The fallbacks of frames now answered, every owner's.
_DELETE_FALLBACKS = """
DELETE FROM callsite_fallbacks f
USING unnest(%s::text[], %s::text[], %s::bigint[]) AS a(module, build_id, site_offset)
WHERE f.module = a.module AND f.build_id = a.build_id AND f.site_offset = a.site_offset
"""

_INSERT_FALLBACKS = """
INSERT INTO callsite_fallbacks (owner_uid, module, build_id, site_offset, reason, resolved_ns)
SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::bigint[], %s::text[],
                     %s::bigint[])
ON CONFLICT (owner_uid, module, build_id, site_offset)
DO UPDATE SET reason = EXCLUDED.reason, resolved_ns = EXCLUDED.resolved_ns
"""

_INSERT_NODE = """
INSERT INTO callsite_node_symbols (owner_uid, build_id, site_offset, quality, function,
                                   function_offset, file, line, reason, resolved_ns)
SELECT * FROM unnest(%s::bigint[], %s::text[], %s::bigint[], %s::text[], %s::text[],
                     %s::bigint[], %s::text[], %s::int[], %s::text[], %s::bigint[])
ON CONFLICT (owner_uid, build_id, site_offset) DO UPDATE SET
    quality = EXCLUDED.quality, function = EXCLUDED.function,
    function_offset = EXCLUDED.function_offset, file = EXCLUDED.file, line = EXCLUDED.line,
    reason = EXCLUDED.reason, resolved_ns = EXCLUDED.resolved_ns
"""

#: The fields of an answer (a stacklens.symbols.Site's, as rows carry them).
ANSWER = ("quality", "function", "function_offset", "file", "line", "reason")


def pending(
    conn: psycopg.Connection, jobs: Sequence[int], retry_before_ns: int, limit: int = 100_000
) -> list[tuple[int, str, str, int]]:
    """(owner uid, module, build-id, offset) of the jobs' frames that no stored row answers
    yet for the owner of a job naming them (a fallback tried before `retry_before_ns`
    answers no more)."""
    if not jobs:
        return []
    params = {"jobs": list(jobs), "limit": limit, "retry_before": retry_before_ns}
    rows = conn.execute(_PENDING, params).fetchall()
    return [(int(u), str(m), str(b), int(o)) for u, m, b, o in rows]


def jobs_pending(conn: psycopg.Connection, since_ns: int, retry_before_ns: int) -> list[int]:
    """Jobs seen since `since_ns` with frames no stored row answers (work left over by a
    collector that stopped, or fallbacks tried before `retry_before_ns`)."""
    params = {"since": since_ns, "retry_before": retry_before_ns}
    return [int(r[0]) for r in conn.execute(_JOBS_PENDING, params).fetchall()]


def store_resolved(
    conn: psycopg.Connection,
    answers: Iterable[tuple[str, str, int, dict[str, Any]]],
    fallbacks: Iterable[tuple[int, str, str, int, str]],
) -> None:
    """Store the resolver's answers ((module, build-id, offset, ANSWER fields): what the
    file at that path said), deleting their frames' fallbacks (every owner's), and
    fallbacks ((owner uid, module, build-id, offset, reason): for that owner's jobs only,
    replacing an older fallback's reason and time); an answer stored before stays (the
    same file gives the same answer)."""
    now = time.time_ns()
    a = list(answers)
    answered = {x[:3] for x in a}
    f = [x for x in fallbacks if x[1:4] not in answered]  # another owner's read answered it
    if a:
        conn.execute(_INSERT_SYMBOLS, (
            [x[0] for x in a], [x[1] for x in a], [x[2] for x in a],
            *([x[3][k] for x in a] for k in ANSWER),
            ["server"] * len(a), [now] * len(a)))  # fmt: skip
        conn.execute(_DELETE_FALLBACKS, ([x[0] for x in a], [x[1] for x in a], [x[2] for x in a]))
    if f:
        conn.execute(_INSERT_FALLBACKS, (
            [x[0] for x in f], [x[1] for x in f], [x[2] for x in f], [x[3] for x in f],
            [x[4] for x in f], [now] * len(f)))  # fmt: skip


async def store_node_symbols(
    cur: psycopg.AsyncCursor[Any], owner: int, answers: Sequence[tuple[str, int, dict[str, Any]]]
) -> None:
    """Store answers a compute node resolved ((build-id, offset, ANSWER fields)) for the
    jobs of `owner`; a later answer for the same frame replaces the earlier one."""
    if not answers:
        return
    now = time.time_ns()
    await cur.execute(_INSERT_NODE, (
        [owner] * len(answers), [x[0] for x in answers], [x[1] for x in answers],
        *([x[2][k] for x in answers] for k in ANSWER), [now] * len(answers)))  # fmt: skip
