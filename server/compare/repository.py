"""The reads run comparison is made of: a run's summary (elapsed time, time per MPI
operation, file I/O per file, hosts), its message sizes, its late rank and the runs of the
same program. Every query runs on
the viewer's session, so the owner filter (server/access/owner.py) decides which runs exist."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from server.callsites import service as callsites
from server.jobs import repository, sections, series, target
from server.jobs.repository import Scope
from server.query_params import ALL_TIME
from stacklens.schema import IoDelta, Job, Rank, Run

#: The program phase of the I/O tables (1 = start-up, before MPI_Init).
_PROGRAM_PHASE = 0


def find_run(session: Session, job: Job, ordinal: int | None) -> Run | None:
    """Run `ordinal` of the job, or its newest MPI run (else its newest run) when None."""
    if ordinal is not None:
        return repository.get_run(session, job.id, ordinal)
    query = (
        select(Run)
        .where(Run.job_id == job.id)
        .order_by((Run.kind == "mpi").desc(), Run.ordinal.desc())
        .limit(1)
    )
    return session.scalars(query).first()


def run_summary(session: Session, job: Job, run: Run) -> dict[str, Any]:
    """What a comparison reads of one run: identity (its executable's build-id too), times,
    its ops (with category, calls, bytes and time summed over ranks), its program-phase
    file I/O per path (every layer; time = read + write + metadata, bytes read and
    written, read and write calls, summed over ranks) and its hosts."""
    scope = Scope(job.id, run.id)
    ops = repository.job_ops(series.op_totals(session, scope))
    io = session.execute(
        select(
            IoDelta.path,
            func.sum(IoDelta.read_time_ns + IoDelta.write_time_ns + IoDelta.meta_time_ns),
            func.sum(IoDelta.bytes_read + IoDelta.bytes_written),
            func.sum(IoDelta.reads + IoDelta.writes),
        )
        .where(*scope.rows(IoDelta), IoDelta.phase == _PROGRAM_PHASE)
        .group_by(IoDelta.path)
    ).all()
    ended = run.finished_ns if run.finished_ns is not None else run.last_seen_ns
    return {
        "job": job.job_key,
        "owner": job.user or "",
        "run": run.ordinal,
        "command": run.command or "",
        "build_id": run.exe_build_id,
        "world_size": run.world_size,
        "status": run.status,
        "started_ns": run.started_ns,
        "ended_ns": ended,
        "elapsed_ns": max(0, ended - run.started_ns),
        "ops": ops,
        "files": {
            path: {"time_ns": int(t), "bytes": int(b), "calls": int(c)} for path, t, b, c in io
        },  # fmt: skip
        "hosts": [h["host"] for h in repository.rank_hosts(session, scope)],
    }


def same_program(
    session: Session, run: Run, last: int, *, any_build: bool = False
) -> list[tuple[Job, Run]]:
    """The newest `last` runs of the same program as `run` that started before it, newest
    first, among the runs the viewer may read: the same command line (executable and
    arguments), world size and kind, and, when `run`'s executable has a build-id, a run
    of that build or of none known (`any_build`: of every build, the runs before a rebuild
    too)."""
    where = [
        Run.command == run.command,
        Run.world_size == run.world_size,
        Run.kind == run.kind,
        Run.started_ns < run.started_ns,
    ]
    if not any_build and run.exe_build_id is not None:
        where.append(or_(Run.exe_build_id == run.exe_build_id, Run.exe_build_id.is_(None)))
    query = (
        select(Job, Run)
        .join(Run, Run.job_id == Job.id)
        .where(*where)
        .order_by(Run.started_ns.desc(), Run.id.desc())
        .limit(last)
    )
    return [(job, found) for job, found in session.execute(query).tuples()]


def run_sites(session: Session, job: Job, run: Run) -> list[dict[str, Any]]:
    """The run's call sites over its whole life, as its job page's Call sites card shows
    them (dicts of the API's `Callsite` fields, server/callsites/service.py)."""
    sites: list[dict[str, Any]] = callsites.job_callsites(session, Scope(job.id, run.id))["sites"]
    return sites


def run_sizes(session: Session, job: Job, run: Run) -> list[dict[str, Any]]:
    """The run's message-size histograms over its whole life as its job page's card shows
    them (GET /api/jobs/{job}/sizes?run=): dicts of the API's `OpSizes` fields."""
    answer = sections.sizes(session, target.of_run(job, run, ALL_TIME))
    return [op.model_dump() for op in answer.ops]


def run_late(session: Session, job: Job, run: Run) -> dict[str, Any] | None:
    """The late rank named first over the run's whole life, as GET
    /api/jobs/{job}/profile?run= names it (its step chosen as there; server/jobs/profile.py),
    with the host it ran on; None when no rank is late."""
    t = target.of_run(job, run, ALL_TIME)
    steps = target.steps(t, ALL_TIME, None, series.profile_max_steps(t.world_size),
                         per_rank=True)  # fmt: skip
    found = series.profile_rows(session, t.scope, steps).slow_ranks(
        callsites.site_finder(session, t.scope)
    )
    late = next((o for o in found["outliers"] if o["role"] == "late"), None)
    if late is None:
        return None
    host = session.scalar(
        select(Rank.host).where(*t.scope.rows(Rank), Rank.world_rank == late["rank"]).limit(1)
    )
    fields = ("rank", "op", "site", "excess_ns", "share", "ranks", "text")
    return {**{k: late[k] for k in fields}, "host": host}
