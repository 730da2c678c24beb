# server/jobs/target.py — what a job request reads: the job (and run) asked for, its window's steps.
"""Finding the job (of an owner) and run a request names, as every job route, the overview
and the reports do: `find_target` gives the `Target` (key, run, world size, repository
scope, times); `steps` cuts its window into the steps of a series or a profile."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException
from sqlalchemy.orm import Session

from server.jobs import repository, series
from server.jobs.repository import Scope
from server.query_params import ALL_TIME, Window
from stacklens import wire
from stacklens.constants import MINUTE_NS
from stacklens.schema import Job, Run

#: Bytes of the wire's job id field: no stored job has a longer id.
JOB_ID_BYTES = int(wire.fields_of(wire.HEADER_DTYPE)["job_id"][0].itemsize)


@dataclass(frozen=True)
class Target:
    """What a request reads: the job's key, the run's ordinal (None = whole job), the world
    size of that scope, and the repository scope."""

    job: str
    run: int | None
    world_size: int
    scope: Scope
    started_ns: int
    last_seen_ns: int


def whole(job: Job, window: Window) -> Target:
    scope = Scope(job.id, None, window)
    return Target(job.job_key, None, job.world_size, scope, job.started_ns, job.last_seen_ns)


def possible_id(job: str) -> bool:
    """Whether a job could have this id (the ingest's rule: at most the wire field's bytes
    of UTF-8 text without control characters)."""
    return len(job.encode("utf-8", "surrogatepass")) <= JOB_ID_BYTES and wire.clean_text(job)


def find_target(
    session: Session, job: str, owner: str | None, run: int | None, window: Window = ALL_TIME
) -> Target:
    """The job (of `owner`, if given) and run asked for; 404 if either is unknown, also for
    an id that no job can have (ingest refuses them: longer than the wire field, not UTF-8
    text, control characters), which is never sent to the database; 409 if the id names
    jobs of several owners and `owner` does not say which."""
    found = find_job(session, job, owner)
    if run is None:
        return whole(found, window)
    chosen = repository.get_run(session, found.id, run)
    if chosen is None:
        raise HTTPException(status_code=404, detail=f"job {job!r} has no run {run}")
    return of_run(found, chosen, window)


def find_job(session: Session, job: str, owner: str | None) -> Job:
    """The one job the viewer may read with this id (and owner, if given): 404 if none, 409
    listing the owners if several."""
    of = "" if owner is None else f" of owner {owner!r}"
    if not possible_id(job):
        raise HTTPException(
            status_code=404,
            detail=f"unknown job {job!r}{of}: a job id is 1 to {JOB_ID_BYTES} bytes of UTF-8 "
            "text without control characters",
        )
    found = repository.find_jobs(session, job, owner)
    if not found:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}{of}")
    if len(found) > 1:
        raise HTTPException(status_code=409, detail=_ambiguous(job, owner, found))
    return found[0]


def filter_jobs(session: Session, job: str, owner: str | None) -> list[int]:
    """The ids of the jobs a list filtered by job id (and `owner`, if given) matches: the
    viewer's readable jobs of that id, none for an id no job has or the viewer may not
    read (an empty list, not a 404); a 409 listing the owners, as `find_job`, if the id
    names jobs of several owners and `owner` does not say which. Jobs of one owner that
    cannot be told apart (stored before owners were recorded) all match."""
    if not possible_id(job):
        return []
    found = repository.find_jobs(session, job, owner)
    if len({j.user or "" for j in found}) > 1:
        raise HTTPException(status_code=409, detail=_ambiguous(job, owner, found))
    return [j.id for j in found]


def _ambiguous(job: str, owner: str | None, found: list[Job]) -> str:
    """Why an id (and owner) names several jobs, and how to name one."""
    if owner is None:
        owners = sorted({j.user or "" for j in found})
        if len(owners) > 1:
            named = ", ".join(repr(o) for o in owners)
            return (f"job {job!r} is the id of jobs of {len(owners)} owners ({named}): "
                    f"name one with ?owner=<user>, e.g. ?owner={owners[0]}")  # fmt: skip
    who = f" of owner {found[0].user or ''!r}"
    return (f"job {job!r}{who} names {len(found)} jobs (some stored before owners were "
            "recorded, migration 0011); they cannot be told apart by URL")  # fmt: skip


def of_run(job: Job, run: Run, window: Window) -> Target:
    scope = Scope(job.id, run.id, window)
    return Target(job.job_key, run.ordinal, run.world_size, scope, run.started_ns, run.last_seen_ns)


def steps(
    t: Target,
    window: Window,
    step_s: float | None,
    max_auto: int = series.MAX_AUTO_STEPS,
    per_rank: bool = False,
) -> series.Steps:
    """The window of a series (its bounds, or the scope's first interval start and last
    interval end) cut into steps (chosen: at most `max_auto`; for a reading `per_rank`,
    whole minutes when series.minute_steps says so); without `from`, the first step starts
    at a multiple of the step since the epoch at or before the first interval start (whole
    seconds, whole minutes: the steps the rollups serve). 422 for over MAX_STEPS steps."""
    lo = t.started_ns if window.from_ns is None else window.from_ns
    hi = t.last_seen_ns + 1 if window.to_ns is None else window.to_ns
    hi = max(hi, lo + 1)
    if step_s is None:
        step_ns = series.auto_step_ns(hi - lo, max_auto)
        if per_rank and series.minute_steps(t.world_size, hi - lo):
            step_ns = max(step_ns, MINUTE_NS)
    else:
        step_ns = round(step_s * 10**9)
    if window.from_ns is None:
        lo = lo // step_ns * step_ns
    if -(-(hi - lo) // step_ns) > series.MAX_STEPS:
        raise HTTPException(
            status_code=422,
            detail=f"step={step_s} s cuts the window into more than {series.MAX_STEPS} steps",
        )
    return series.Steps(lo, hi, step_ns)
