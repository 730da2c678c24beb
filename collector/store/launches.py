"""Launch records (frames of type launch, sent by `stacklens run` after its command ended):
how a launch ended, stored on the runs its ranks made, or as a run of its own.

The ranks of a launch carry its id (rank_info.launch_id, stored as runs.launch_key), so a
launch record finds its runs exactly. Each gets the launch's exit status, signal, the ranks
it asked for and the launcher's last lines; a run still `running` or `lost` then ends with
the launch: `killed` when a signal ended the command (or `stacklens run` forwarded one),
`failed` on a non-zero exit, `finished` on 0 (the launcher waited for every rank). A launch
none of whose ranks ever reported (they crashed before their first frame, the binary was
missing, the launcher refused its command line) becomes a run of its own (run key: the
launch id, no ranks), so the job is listed with that status and the launcher's words.
The call sites the launch's node resolved (wire table site_symbol, in the same frame) are
stored for the sending owner (collector/store/symbols.store_node_symbols).

The frame writer (collector/store/writer.py) stores a batch's launch records after its
other frames; the replay sends a job's launch records after its ranks' frames
(stacklens_cli/replay.py). Ranks' frames may still come after their launch record (another
node's spool replayed later, a resend): the first run registered with the launch's id takes
over the run the record made (collector/store/writer.py, _ADOPT_LAUNCH_RUN: its key, size
and command become the ranks', its ordinal, the launch's columns and end stay), and a later
run of the same launch copies the launch's columns (_LAUNCH_SIBLINGS), so either order gives
the same runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import psycopg

from collector.codec import FrameBatch
from collector.store.jobs import JOB_STATUS, UPSERT_JOBS
from collector.store.symbols import store_node_symbols

#: The launch's outcome on the runs its ranks made; a run still running or lost ends with it.
_ON_RUNS = """
UPDATE runs SET ranks_expected = %(ranks)s, exit_code = %(code)s, exit_signal = %(signal)s,
    forwarded_signal = %(forwarded)s, launch_output = %(output)s,
    status = CASE WHEN status IN ('running', 'lost') THEN %(status)s ELSE status END,
    finished_ns = CASE WHEN status IN ('running', 'lost')
                       THEN GREATEST(last_seen_ns, %(ended)s) ELSE finished_ns END,
    last_seen_ns = CASE WHEN status IN ('running', 'lost')
                        THEN GREATEST(last_seen_ns, %(ended)s) ELSE last_seen_ns END
WHERE job_id = %(job)s AND launch_key = %(launch)s AND run_key <> %(launch)s
RETURNING id
"""

#: A launch none of whose ranks reported: a run of its own (a record sent twice: the same).
_OWN_RUN = """
INSERT INTO runs (job_id, run_key, ordinal, kind, label, world_size, command, "user", status,
                  started_ns, last_seen_ns, finished_ns, launch_key, ranks_expected,
                  exit_code, exit_signal, forwarded_signal, launch_output)
SELECT %(job)s, %(launch)s, COALESCE(max(ordinal), 0) + 1, 'mpi', NULL, %(size)s,
       %(command)s, %(user)s, %(status)s, %(started)s, %(ended)s, %(ended)s, %(launch)s,
       %(ranks)s, %(code)s, %(signal)s, %(forwarded)s, %(output)s
FROM runs WHERE job_id = %(job)s
ON CONFLICT (job_id, run_key) DO NOTHING
"""


@dataclass(frozen=True)
class LaunchRecord:
    """One launch record as received: its job (owner, job key), launch id (two's
    complement), times and the launch table's values."""

    owner: int
    job_key: str
    user: str | None
    launch_key: int
    started_ns: int
    ended_ns: int
    ranks_expected: int | None
    exit_code: int | None
    exit_signal: int | None
    forwarded: int | None
    command: str
    output: str
    #: The call sites resolved on the launch's node: (build-id, offset, answer fields of
    #: collector/store/symbols.ANSWER), one per frame (wire table site_symbol).
    sites: tuple[tuple[str, int, dict[str, object]], ...] = ()

    @property
    def status(self) -> str:
        """How the launch ended: killed (a signal ended it, or one was forwarded to it),
        failed (non-zero exit) or finished."""
        if self.exit_signal or self.forwarded:
            return "killed"
        return "failed" if self.exit_code else "finished"


def _text(raw: np.ndarray) -> str:
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace")


def _sites(records: np.ndarray) -> tuple[tuple[str, int, dict[str, object]], ...]:
    """A launch frame's site_symbol records as (build-id, offset, answer), one per frame
    (a frame named twice: the last record)."""
    found: dict[tuple[str, int], dict[str, object]] = {}
    for r in records:
        line = int(r["quality"]) == 1
        function = _text(r["function"]) or None
        found[(_text(r["build_id"]).lower(), int(r["site_offset"]))] = {
            "quality": "line" if line else "function+offset",
            "function": function,
            "function_offset": int(r["function_offset"]) if function else None,
            "file": _text(r["file"]) if line else None,
            "line": int(r["line"]) if line else None,
            "reason": "" if line else "no DWARF line information covers it (on the node)",
        }
    return tuple((bid, offset, answer) for (bid, offset), answer in found.items() if bid)


def launch_records(
    batch: FrameBatch, which: np.ndarray, user_of: Callable[[int], str]
) -> list[LaunchRecord]:
    """The launch records of the frames `which` (indices) of `batch`; `user_of(uid)` names
    the owner (a launch record claims no user)."""
    found = []
    for i in which.tolist():
        record = batch.records(i, "launch")[0]
        info = batch.info[i]
        code = int(record["exit_code"])
        signal = int(record["exit_signal"])
        found.append(
            LaunchRecord(
                owner=batch.owner,
                job_key=bytes(info["job"]).split(b"\0", 1)[0].decode("utf-8", "replace"),
                user=user_of(batch.owner),
                launch_key=int(np.uint64(info["run_id"]).astype(np.int64)),
                started_ns=int(info["t_start"]),
                ended_ns=int(info["t_end"]),
                ranks_expected=int(record["ranks_expected"]) or None,
                exit_code=None if signal else code - (1 << 32) if code >> 31 else code,
                exit_signal=signal or None,
                forwarded=int(record["forwarded"]) or None,
                command=_text(record["command"]),
                output=_text(record["output"]),
                sites=_sites(batch.records(i, "site_symbol")),
            )
        )
    return found


async def store_launches(conn: psycopg.AsyncConnection, launches: list[LaunchRecord]) -> None:
    """Store launch records in one transaction (module doc); jobs are locked in key order,
    as the frame writer locks them."""
    ordered = sorted(launches, key=lambda r: (r.owner, r.job_key.encode()))
    async with conn.transaction(), conn.cursor() as cur:
        for r in ordered:
            # the job's row, locked until the commit (as the writer's registrations lock it)
            await cur.execute(
                UPSERT_JOBS,
                ([r.owner], [r.job_key], [r.ranks_expected or 0], [r.command], [r.user],
                 [r.status], [r.started_ns], [r.ended_ns]),
            )  # fmt: skip
            row = await cur.fetchone()
            assert row is not None  # RETURNING id of the one row
            values = {
                "job": row[0], "launch": r.launch_key, "ranks": r.ranks_expected,
                "code": r.exit_code, "signal": r.exit_signal, "forwarded": r.forwarded,
                "output": r.output, "status": r.status, "started": r.started_ns,
                "ended": r.ended_ns, "size": r.ranks_expected or 0, "command": r.command,
                "user": r.user,
            }  # fmt: skip
            await cur.execute(_ON_RUNS, values)
            if not await cur.fetchall():
                await cur.execute(_OWN_RUN, values)
            await cur.execute(JOB_STATUS, ([row[0]],))
            # the call sites its node named: for this owner's jobs only (symbols.py)
            await store_node_symbols(cur, r.owner, r.sites)
