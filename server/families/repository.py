"""Queries of the families domain: a job's (or run's) communicator descriptions and the
traffic rows the families are summed from. Routes call the service, never these.

Descriptions are read whatever the window (a communicator made before the window carries
traffic in it); traffic rows are those of intervals that ended in the window
(server/jobs/repository.Scope). Reads go through the owner filter like every job read.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.families.model import Description
from server.jobs import series
from server.jobs.repository import Scope, coll_sums, p2p_sums
from server.query_params import ALL_TIME
from stacklens import rails
from stacklens.mpi_ops import op_categories
from stacklens.rails import Binding
from stacklens.schema import (
    CallsitePath,
    CommMade,
    CommP2PDelta,
    Rank,
)


def descriptions(session: Session, scope: Scope) -> list[Description]:
    """The latest description of every (run, rank, communicator) of the scope's job or run."""
    c = CommMade
    query = (
        select(c.run_id, c.world_rank, c.comm_id, c.parent_id, c.family_id, c.made,
               c.comm_size, c.comm_rank, c.color, c.key, c.kept, c.grid, c.site_module,
               c.site_offset, c.name)
        .where(*Scope(scope.job_id, scope.run_id, ALL_TIME).rows(c))
        .distinct(c.run_id, c.world_rank, c.comm_id)
        .order_by(c.run_id, c.world_rank, c.comm_id, c.t_end_ns.desc())
    )  # fmt: skip
    return [Description(*row) for row in session.execute(query).all()]  # type: ignore[call-arg]


def collectives(session: Session, scope: Scope) -> list[tuple[int, ...]]:
    """(run, rank, communicator id, size, op id, root, calls, bytes, time_ns) over the
    window, summed (from the rollups where they hold the window: jobs.repository.coll_sums)."""
    keys = ("run_id", "world_rank", "comm_id", "comm_size", "op_id", "root")
    sums = coll_sums([scope.job_id], *keys, run_id=scope.run_id, window=scope.window)
    query = select(*(sums.c[k] for k in keys), sums.c.calls, sums.c.bytes, sums.c.time_ns)
    return [tuple(int(v) for v in row) for row in session.execute(query)]


def comm_messages(session: Session, scope: Scope) -> list[tuple[int, ...]]:
    """(run, rank, communicator id, op id, peer, received, messages, bytes, time_ns) of the
    point-to-point traffic on communicators other than the world, over the window."""
    c = CommP2PDelta
    keys = (c.run_id, c.world_rank, c.comm_id, c.op_id, c.peer, c.received)
    query = (
        select(*keys, func.sum(c.msgs), func.sum(c.bytes), func.sum(c.time_ns))
        .where(*scope.rows(c))
        .group_by(*keys)
    )
    return [tuple(int(v) for v in row) for row in session.execute(query)]


def pair_bytes(session: Session, scope: Scope) -> dict[tuple[int, int, int], int]:
    """(run, rank, peer) -> point-to-point bytes sent over the window (every communicator),
    from the minute rollups where they hold the window's minutes (jobs.repository.p2p_sums)."""
    sums = p2p_sums([scope.job_id], "run_id", "world_rank", "peer", run_id=scope.run_id,
                    window=scope.window)  # fmt: skip
    query = select(sums.c.run_id, sums.c.world_rank, sums.c.peer, sums.c.bytes)
    found = session.execute(query.where(sums.c.bytes > 0))
    return {(int(r), int(a), int(b)): int(n) for r, a, b, n in found}


def p2p_ops(session: Session, scope: Scope) -> dict[int, tuple[int, int, int]]:
    """op id -> (calls, bytes, time_ns) of the point-to-point ops with calls over the window
    (from the rollups where they serve it: jobs.series.op_totals)."""
    wanted = {i for i, cat in enumerate(op_categories()) if cat == "mpi_p2p"}
    return {op: (calls, nbytes, ns) for op, calls, nbytes, ns, _ranks
            in series.op_totals(session, scope) if op in wanted}  # fmt: skip


def hosts(session: Session, scope: Scope) -> dict[tuple[int, int], tuple[str, Binding]]:
    """(run, rank) -> the host it reported and its binding to that host's rails
    (stacklens/rails.py), for every rank of the scope's job or run."""
    query = select(Rank.run_id, Rank.world_rank, Rank.host, Rank.net_devices).where(
        Rank.job_id == scope.job_id
    )
    if scope.run_id is not None:
        query = query.where(Rank.run_id == scope.run_id)
    rows = [(int(run), int(rank), host, net) for run, rank, host, net in session.execute(query)]
    bound = rails.bindings(rows)
    return {(run, rank): (host, bound[(run, rank)]) for run, rank, host, _ in rows}


def module_build_ids(session: Session, scope: Scope) -> dict[tuple[int, str], str]:
    """(run, module path) -> the GNU build-id its ranks saw, from the call-site frames of
    the scope's job or run whatever the window (a module without one is left out)."""
    p = CallsitePath
    query = (
        select(p.run_id, p.module, p.build_id)
        .where(*Scope(scope.job_id, scope.run_id, ALL_TIME).rows(p), p.build_id != "")
        .distinct()
    )
    return {(int(run), module): bid for run, module, bid in session.execute(query)}
