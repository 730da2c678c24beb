"""The reads run comparison is made of: a run's summary (elapsed time, time per MPI
operation, file I/O per file, hosts), its message sizes, its late rank and the runs of the
same program; each over the run's whole life or a window of it (the intervals that ended
in the window, as the job pages read a window). Every query runs on the viewer's session,
so the owner filter (server/access/owner.py) decides which runs exist."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, func, literal, or_, select
from sqlalchemy.orm import Session

from server.callsites import service as callsites
from server.jobs import repository, sections, series, target
from server.jobs.repository import Scope
from server.query_params import ALL_TIME, Window
from stacklens.schema import IoDelta, Job, Rank, Run

#: The program phase of the I/O tables (1 = start-up, before MPI_Init).
_PROGRAM_PHASE = 0

#: A command line's arguments: what follows its first word (argv[0], as typed), the space
#: before them included; "" for a command of one word.
_ARGUMENTS = "^[^ ]*(.*)$"


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


def run_summary(session: Session, job: Job, run: Run, window: Window = ALL_TIME
                ) -> dict[str, Any]:  # fmt: skip
    """What a comparison reads of one run over `window`: identity (its executable's
    path and build-id too), times (`from_ns`/`to_ns`: the part of the run's life inside the window,
    its length the elapsed time), its ops (with category, calls, bytes and time summed over
    ranks), its program-phase file I/O per path (every layer; time = read + write +
    metadata, bytes read and written, read and write calls, summed over ranks) and its
    hosts (those of the ranks seen in the window)."""
    scope = Scope(job.id, run.id, window)
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
    lo = run.started_ns if window.from_ns is None else max(run.started_ns, window.from_ns)
    hi = ended if window.to_ns is None else min(ended, window.to_ns)
    return {
        "job": job.job_key,
        "owner": job.user or "",
        "run": run.ordinal,
        "command": run.command or "",
        "exe_path": run.exe_path,
        "build_id": run.exe_build_id,
        "world_size": run.world_size,
        "status": run.status,
        "started_ns": run.started_ns,
        "ended_ns": ended,
        "from_ns": lo,
        "to_ns": max(lo, hi),
        "elapsed_ns": max(0, hi - lo),
        "ops": ops,
        "files": {
            path: {"time_ns": int(t), "bytes": int(b), "calls": int(c)} for path, t, b, c in io
        },  # fmt: skip
        "hosts": [h["host"] for h in repository.rank_hosts(session, scope)],
    }


def _arguments(command: Any) -> ColumnElement[str]:
    """The arguments of a command line (a column or a value): all but its first word."""
    return func.substring(func.coalesce(command, ""), _ARGUMENTS)


def same_executable(run: Run) -> ColumnElement[bool]:
    """Runs of `run`'s executable with its arguments: the same executable path (the target
    of /proc/self/exe; argv[0] as typed does not count, so `./a` and `/home/u/a` of one
    binary are one program and two binaries named `a` in two directories are two) and the
    same arguments (for an interpreter, python3, they name the script). A run whose path
    is not known (sent before the hooks reported it) matches by its whole command line."""
    if run.exe_path is None:
        return Run.command == run.command
    return or_(
        and_(Run.exe_path == run.exe_path,
             _arguments(Run.command) == _arguments(literal(run.command))),
        and_(Run.exe_path.is_(None), Run.command == run.command),
    )  # fmt: skip


def same_program(
    session: Session, run: Run, last: int, *, any_build: bool = False
) -> list[tuple[Job, Run]]:
    """The newest `last` runs of the same program as `run` that started before it, newest
    first, among the runs the viewer may read: the same executable and arguments
    (same_executable), world size and kind, and, when `run`'s executable has a build-id, a
    run of that build or of none known (`any_build`: of every build, the runs before a
    rebuild too)."""
    where = [
        same_executable(run),
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


def run_sites(session: Session, job: Job, run: Run, window: Window = ALL_TIME
              ) -> list[dict[str, Any]]:  # fmt: skip
    """The run's call sites over `window` (its whole life by default), as its job page's
    Call sites card shows them (dicts of the API's `Callsite` fields,
    server/callsites/service.py)."""
    scope = Scope(job.id, run.id, window)
    sites: list[dict[str, Any]] = callsites.job_callsites(session, scope)["sites"]
    return sites


def run_sizes(session: Session, job: Job, run: Run, window: Window = ALL_TIME
              ) -> list[dict[str, Any]]:  # fmt: skip
    """The run's message-size histograms over `window` (its whole life by default) as its
    job page's card shows them (GET /api/jobs/{job}/sizes?run=&from=&to=): dicts of the
    API's `OpSizes` fields."""
    answer = sections.sizes(session, target.of_run(job, run, window))
    return [op.model_dump() for op in answer.ops]


def run_late(session: Session, job: Job, run: Run, window: Window = ALL_TIME
             ) -> dict[str, Any] | None:  # fmt: skip
    """The late rank named first over `window` (the run's whole life by default), as GET
    /api/jobs/{job}/profile?run=&from=&to= names it (its step chosen as there;
    server/jobs/profile.py), with the host it ran on; None when no rank is late."""
    t = target.of_run(job, run, window)
    steps = target.steps(t, window, None, series.profile_max_steps(t.world_size),
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
