# server/compare/service.py — one run against another (or its history's median), built.
"""The comparison of run b with run a, or with the median of the earlier runs of b's
program, as GET /api/compare answers it and the comparison report (server/reports) shows
it: the pure server/compare/diff.py over the reads of server/compare/repository.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from sqlalchemy.orm import Session

from presentation.components import callsite_path
from server.compare import context, diff, repository
from server.families import service as families
from server.jobs.repository import Scope
from server.jobs.target import find_job
from server.query_params import ALL_TIME, Window
from server.traffic.repository import TrafficConfig
from server.traffic.service import AttributionCache
from stacklens.api_models import (
    Callsite,
    ClassDifference,
    ComparedRun,
    Comparison,
    FamilyDifference,
    FileDifference,
    HistoryRun,
    RunContext,
    RunDifference,
    RunHistory,
    SiteDifference,
    SizeDifference,
)
from stacklens.schema import Job, Run

#: Runs of a program's history read at most, and by default.
MAX_HISTORY, DEFAULT_HISTORY = 50, 10


@dataclass(frozen=True)
class Side:
    """A run as the comparison names it: job id, run ordinal (None: the job's newest MPI
    run), owner (None: the id names one job the viewer may read), and the window of it
    compared (its intervals that ended in it; ALL_TIME: the run's whole life)."""

    job: str
    run: int | None = None
    owner: str | None = None
    window: Window = ALL_TIME


@dataclass(frozen=True)
class Around:
    """What the comparison reads of the fabric: the app's attribution cache (its fabric
    read once per discovery) and its traffic settings (how the fabric forwards)."""

    cache: AttributionCache
    traffic: TrafficConfig


def around(state: Any) -> Around:
    """The app's fabric context (`request.app.state`: its attribution cache and traffic
    settings)."""
    return Around(state.attributions, state.traffic)


def find(session: Session, job: str, run: int | None, owner: str | None) -> tuple[Job, Run]:
    """The job and run named; 404 when either is unknown (or not the viewer's)."""
    found = find_job(session, job, owner)
    chosen = repository.find_run(session, found, run)
    if chosen is None:
        raise HTTPException(status_code=404, detail=f"job {job!r} has no run {run}")
    return found, chosen


def _side(summary: dict[str, Any], prof: dict[str, Any], ctx: dict[str, Any],
          window: Window) -> ComparedRun:  # fmt: skip
    """One run as a side: its summary, its profile (with its late rank) and context, and
    the window compared."""
    return ComparedRun(
        job=summary["job"], owner=summary["owner"], run=summary["run"], runs=1,
        command=summary["command"], exe_path=summary["exe_path"],
        build_id=summary["build_id"], world_size=summary["world_size"],
        status=summary["status"], started_ns=summary["started_ns"],
        from_ns=window.from_ns, to_ns=window.to_ns,
        elapsed_ns=summary["elapsed_ns"], hosts=summary["hosts"], parts=prof["parts"],
        context=RunContext(**ctx), late=prof["late"],
    )  # fmt: skip


def _site_path(site: dict[str, Any]) -> str:
    """A site's frames in full, as the job page's Call sites card shows them."""
    return callsite_path(Callsite(**site))


def run_families(session: Session, around: Around, job: Job, run: Run,
                 window: Window = ALL_TIME) -> dict[str, Any]:  # fmt: skip
    """The run's communicator families over `window` (its whole life by default) by label
    (diff.family_totals), as its job page's Communicator families card lists them."""
    rows = families.job_families(session, around.cache, around.traffic.paths,
                                 Scope(job.id, run.id, window))  # fmt: skip
    return diff.family_totals(rows)


def run_context(session: Session, around: Around, job: Job, run: Run,
                summary: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The run's placement, the load of its links and the incidents during it
    (server/compare/context.py) over the time its summary covers (its own, or the part of
    it a window holds)."""
    return context.run_context(session, around.cache, around.traffic, job, run,
                               summary["from_ns"], summary["to_ns"])  # fmt: skip


def compare(session: Session, b: Side, a: Side | None, last: int, sites: int,
            around: Around) -> Comparison:  # fmt: skip
    """Run `b` against run `a`, or, when `a` is None, against the median of the `last`
    runs of b's program before it (404 when there are none); the `sites` call sites whose
    time changed most listed, `sites_total` counting them all; every communicator family,
    message-size bucket and file of either run; each side's late rank. Each run named is
    read over its side's window (the median's runs over their whole lives)."""
    job_b, run_b = find(session, b.job, b.run, b.owner)
    summary_b = repository.run_summary(session, job_b, run_b, b.window)
    prof_b = diff.profile(summary_b)
    prof_b["late"] = repository.run_late(session, job_b, run_b, b.window)
    if a is not None:
        job_a, run_a = find(session, a.job, a.run, a.owner)
        summary_a = repository.run_summary(session, job_a, run_a, a.window)
        prof_a = diff.profile(summary_a)
        prof_a["late"] = repository.run_late(session, job_a, run_a, a.window)
        context_a = run_context(session, around, job_a, run_a, summary_a)
        side_a = _side(summary_a, prof_a, context_a, a.window)
        sites_a = repository.run_sites(session, job_a, run_a, a.window)
        families_a = run_families(session, around, job_a, run_a, a.window)
        sizes_a = diff.size_counts(repository.run_sizes(session, job_a, run_a, a.window))
        files_a = summary_a["files"]
    else:
        before = repository.same_program(session, run_b, last)
        if not before:
            raise HTTPException(
                status_code=404,
                detail=f"run {run_b.ordinal} of job {b.job!r} has no earlier run of the same "
                "program (executable, arguments, world size and build) to compare with",
            )
        summaries = [(j, r, repository.run_summary(session, j, r)) for j, r in before]
        prof_a = diff.median_profile([diff.profile(summary) for _, _, summary in summaries])
        middle = sorted(summaries, key=lambda e: e[2]["elapsed_ns"])[(len(summaries) - 1) // 2]
        prof_a["late"] = repository.run_late(session, middle[0], middle[1])
        context_a = run_context(session, around, *middle)
        side_a = ComparedRun(
            job=None, owner=None, run=None, runs=len(before), command=summary_b["command"],
            exe_path=summary_b["exe_path"], build_id=prof_a["build_id"],
            world_size=summary_b["world_size"], status=None, started_ns=None,
            elapsed_ns=prof_a["elapsed_ns"], hosts=prof_a["hosts"], parts=prof_a["parts"],
            context=RunContext(**context_a), late=prof_a["late"],
        )  # fmt: skip
        sites_a = diff.median_sites([repository.run_sites(session, j, r) for j, r in before])
        families_a = diff.median_families([run_families(session, around, j, r)
                                           for j, r in before])  # fmt: skip
        sizes_a = diff.median_sizes([diff.size_counts(repository.run_sizes(session, j, r))
                                     for j, r in before])  # fmt: skip
        files_a = diff.median_files([summary["files"] for _, _, summary in summaries])
    context_b = run_context(session, around, job_b, run_b, summary_b)
    rows = diff.differences(prof_a, prof_b)
    site_rows = diff.site_differences(
        sites_a, repository.run_sites(session, job_b, run_b, b.window), _site_path
    )
    return Comparison(
        finding=diff.finding(prof_a, prof_b, rows, diff.fabric_changes(context_a, context_b)),
        a=side_a,
        b=_side(summary_b, prof_b, context_b, b.window),
        differences=[RunDifference(**row) for row in rows],
        classes=[ClassDifference(**row) for row in diff.class_differences(prof_a, prof_b)],
        sites=[SiteDifference(**row) for row in site_rows[:sites]],
        sites_total=len(site_rows),
        families=[FamilyDifference(**row) for row in diff.family_differences(
            families_a, run_families(session, around, job_b, run_b, b.window))],
        sizes=[SizeDifference(**row) for row in diff.size_differences(
            sizes_a, diff.size_counts(repository.run_sizes(session, job_b, run_b,
                                                           b.window)))],
        files=[FileDifference(**row) for row in diff.file_differences(
            files_a, summary_b["files"])],
        late_moved=diff.late_moved(prof_a["late"], prof_b["late"]),
    )  # fmt: skip


def _same_build(x: str | None, y: str | None) -> bool:
    """Two runs' executables are of one build: the same build-id, or either unknown."""
    return x is None or y is None or x == y


def history(session: Session, run: Side, last: int) -> RunHistory:
    """The run and the `last` runs of the same program before it (the same executable,
    arguments and world size, every build, among the runs the viewer may read), newest first:
    elapsed time and the shares of MPI and file I/O in it, per rank on average; each run's
    build-id, whether it is of the run's build and whether it is the first of a new build
    (its build-id not that of the program's run before it, both known)."""
    found, chosen = find(session, run.job, run.run, run.owner)
    before = repository.same_program(session, chosen, last + 1, any_build=True)
    runs = [(found, chosen), *before]
    listed = []
    for i, (j, r) in enumerate(runs[: last + 1]):
        summary = repository.run_summary(session, j, r)
        prof = diff.profile(summary)
        elapsed = max(1, summary["elapsed_ns"])
        mpi = sum(ns for name, ns in prof["parts"].items() if prof["kinds"][name] == "op")
        io = sum(ns for name, ns in prof["parts"].items() if prof["kinds"][name] == "file")
        previous = runs[i + 1][1].exe_build_id if i + 1 < len(runs) else None
        listed.append(HistoryRun(
            job=summary["job"], owner=summary["owner"], run=summary["run"],
            status=summary["status"], started_ns=summary["started_ns"],
            elapsed_ns=summary["elapsed_ns"], mpi_share=mpi / elapsed, io_share=io / elapsed,
            build_id=r.exe_build_id, same_build=_same_build(r.exe_build_id, chosen.exe_build_id),
            rebuilt=not _same_build(r.exe_build_id, previous),
        ))  # fmt: skip
    return RunHistory(command=chosen.command or "", exe_path=chosen.exe_path,
                      world_size=chosen.world_size, build_id=chosen.exe_build_id,
                      runs=listed)  # fmt: skip
