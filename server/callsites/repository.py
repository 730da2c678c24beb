"""Queries of the call-sites domain: a job's (or run's) call sites per rank as the hooks kept
them (wire tables callsite and callsite_frame), with their calls, bytes, time and size
buckets over a window. Routes call the service, never these.

Counters are those of intervals that ended in the window (server/jobs/repository.Scope);
frames are read whatever the window (a site described before the window has calls in it).
Reads go through the owner filter like every job read (find_target gives the scope).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.jobs.repository import Scope
from server.query_params import ALL_TIME
from stacklens.mpi_ops import io_function_names, op_names
from stacklens.schema import CallsiteDelta, CallsitePath

#: site_id of the call sites beyond the hooks' bound (wire bound overflow_site): no frames.
OVERFLOW_SITE = 2**32 - 1
#: comm_id of a call that is not a collective (wire bound no_comm).
NO_COMM = 2**32 - 1


def op_label(layer: int, op_id: int) -> str:
    """The function of an op id at a call-site layer (0: an MPI op id; 1 POSIX, 2 stdio: an
    index of contract/io_functions.spec); "io#<n>" for an I/O id this server does not know
    (a newer hook library)."""
    names = op_names() if layer == 0 else io_function_names()
    return names[op_id] if op_id < len(names) else f"io#{op_id}"


def _counters(session: Session, scope: Scope) -> list[tuple[int, ...]]:
    """(run, rank, site id, layer, op id, comm id, bucket, calls, bytes, time_ns) over the
    window, summed."""
    c = CallsiteDelta
    keys = (c.run_id, c.world_rank, c.site_id, c.layer, c.op_id, c.comm_id, c.bucket)
    query = (
        select(*keys, func.sum(c.calls), func.sum(c.bytes), func.sum(c.time_ns))
        .where(*scope.rows(c))
        .group_by(*keys)
    )
    return [tuple(int(v) for v in row) for row in session.execute(query)]


def _frames(session: Session, scope: Scope) -> dict[tuple[int, int, int], list[dict[str, Any]]]:
    """(run, rank, site id) -> its frames in order, each {frame, module, build_id, offset}
    (one per frame: a resent frame's repeat is left out), whatever the window."""
    p = CallsitePath
    query = (
        select(p.run_id, p.world_rank, p.site_id, p.frame, p.module, p.build_id, p.site_offset)
        .where(*Scope(scope.job_id, scope.run_id, ALL_TIME).rows(p))
        .distinct(p.run_id, p.world_rank, p.site_id, p.frame)
        .order_by(p.run_id, p.world_rank, p.site_id, p.frame)
    )
    out: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for run, rank, site, frame, module, build_id, offset in session.execute(query):
        out.setdefault((int(run), int(rank), int(site)), []).append(
            {"frame": int(frame), "module": module, "build_id": build_id, "offset": int(offset)}
        )
    return out


def callsite_rows(session: Session, scope: Scope) -> list[dict[str, Any]]:
    """The scope's call sites per rank over its window: one row per (run, rank, site, layer,
    op, communicator) with {run_id, rank, site_id (OVERFLOW_SITE: the sites beyond the
    bound), overflow, layer (0 MPI, 1 POSIX, 2 stdio), op_id, op (the function's name),
    comm_id (a collective's communicator, None otherwise), calls, bytes, time_ns, buckets
    {log2 size bucket: calls}, frames [{frame, module, build_id, offset}] (innermost first;
    empty for the overflow site)}. Heaviest time first, then by key."""
    paths = _frames(session, scope)
    rows: dict[tuple[int, ...], dict[str, Any]] = {}
    for run, rank, site, layer, op, comm, bucket, calls, nbytes, ns in _counters(session, scope):
        key = (run, rank, site, layer, op, comm)
        row = rows.get(key)
        if row is None:
            row = rows[key] = {
                "run_id": run, "rank": rank, "site_id": site, "overflow": site == OVERFLOW_SITE,
                "layer": layer, "op_id": op, "op": op_label(layer, op),
                "comm_id": None if comm == NO_COMM else comm, "calls": 0, "bytes": 0,
                "time_ns": 0, "buckets": {}, "frames": paths.get((run, rank, site), []),
            }  # fmt: skip
        row["calls"] += calls
        row["bytes"] += nbytes
        row["time_ns"] += ns
        row["buckets"][bucket] = row["buckets"].get(bucket, 0) + calls
    return sorted(rows.values(), key=lambda r: (-r["time_ns"], *_key(r)))


def _key(row: dict[str, Any]) -> tuple[int, ...]:
    """A row's (run, rank, site, layer, op, communicator): its order after the time."""
    comm = -1 if row["comm_id"] is None else row["comm_id"]
    return (row["run_id"], row["rank"], row["site_id"], row["layer"], row["op_id"], comm)
