"""HTTP routes of the jobs domain. Every `/api/jobs/{job}/...` endpoint answers for the whole
job (all its runs summed) or, with `?run=<ordinal>`, for one run; and for the intervals
that ended in the window `from`/`to` (server.query_params; default: the whole job). A job
is its owner's and its id: `?owner=<user>` (the job list's `user`) names whose job of that
id is meant; without it the id alone must name one job the viewer may read, else the
answer is a 409 listing the owners (an admin, or a viewer of several owners' jobs, can see
two jobs of one id). An unknown job or run is a 404, a window that cannot be read or is
inverted a 422. The table endpoints and the series answer CSV or Parquet files too
(`?format=`, server.export)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from server import export, paging
from server.callsites import service as callsite_service
from server.deps import SessionDep
from server.errors import error_responses
from server.export import FILE_RESPONSES, FormatParam, model_table
from server.jobs import placement, repository, sections, series, target
from server.paging import CursorParam, PageSizes
from server.query_params import TEXT_PATTERN, OwnerParam, RunParam, WindowDep, step_query
from server.shared import SharedAnswers
from stacklens.api_models import (
    CollectiveTotal,
    FileIo,
    JobCollectives,
    JobIo,
    JobList,
    JobOps,
    JobPlacement,
    JobRanks,
    JobRma,
    JobRuns,
    JobSizes,
    JobSummary,
    Matrix,
    MatrixCell,
    OpSizes,
    OpTotal,
    Overview,
    RankInfo,
    RankShare,
    RmaCell,
    Series,
    SlowRanks,
)

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
overview_router = APIRouter(prefix="/api", tags=["jobs"])

#: Page size of the job list (a job's lists: server/jobs/sections.py).
JOB_LIMITS = PageSizes(default=100, maximum=1000)


#: The `owner` query parameter of every job endpoint (docs/access.md, "Job URLs").

#: The `limit` query parameter of each list.
JobLimit = Annotated[int, Query(ge=1, le=JOB_LIMITS.maximum, description=JOB_LIMITS.help("jobs"))]
PairLimit = Annotated[
    int,
    Query(
        ge=1, le=sections.PAIR_LIMITS.maximum, description=sections.PAIR_LIMITS.help("rank pairs")
    ),
]
FileLimit = Annotated[
    int,
    Query(
        ge=1,
        le=sections.FILE_LIMITS.maximum,
        description=sections.FILE_LIMITS.help("(layer, path) rows"),
    ),
]
RankLimit = Annotated[
    int,
    Query(ge=1, le=sections.RANK_LIMITS.maximum, description=sections.RANK_LIMITS.help("ranks")),
]

#: The latest time a query can name (ns; the stored times' type).
MAX_NS = 2**63 - 1

#: What a job's status can be (JobSummary.status).
JobStatus = Literal["running", "finished", "failed", "killed", "aborted", "lost"]


@dataclass(frozen=True)
class JobQuery:
    """The job list's query parameters: which jobs (the filter) and which page."""

    where: repository.JobFilter
    limit: int
    cursor: str | None


def job_query(
    q: Annotated[
        str | None,
        Query(
            max_length=200,
            pattern=TEXT_PATTERN,
            description="case-insensitive part of the job id, user or command",
        ),
    ] = None,
    status: Annotated[JobStatus | None, Query(description="jobs with this status")] = None,
    user: Annotated[
        str | None, Query(max_length=200, pattern=TEXT_PATTERN, description="jobs of this user")
    ] = None,
    started_from: Annotated[
        int | None,
        Query(ge=0, le=MAX_NS, description="jobs started at or after (ns since the epoch)"),
    ] = None,
    started_to: Annotated[
        int | None, Query(ge=0, le=MAX_NS, description="jobs started before (ns since the epoch)")
    ] = None,
    limit: JobLimit = JOB_LIMITS.default,
    cursor: CursorParam = None,
) -> JobQuery:
    """The job list's query parameters (GET /api/jobs and /api/overview)."""
    where = repository.JobFilter(q or None, status, user, started_from, started_to)
    return JobQuery(where, limit, cursor)


JobQueryDep = Annotated[JobQuery, Depends(job_query)]
T = TypeVar("T")


#: Every per-job route answers 404 for an unknown job (or an id no job can have), the
#: paged ones also for a cursor they did not make (it names no page).
_NOT_FOUND = error_responses(404)
#: ... and the routes with a window 409 (the id names jobs of several owners and no `owner`
#: says which) and 422 for a window that cannot be read or is inverted.
_WINDOWED = error_responses(404, 409, **{"422": "unknown query parameter, or a bad window"})
#: ... and the table routes their files (?format=csv|parquet).
_TABLE = {**_WINDOWED, **FILE_RESPONSES}


@router.get("", response_model=JobList, responses=_NOT_FOUND)
def list_jobs(session: SessionDep, request: Request, query: JobQueryDep) -> JobList:
    """A page of the jobs seen by the collectors, newest first, each with its runs: all of
    them or those the filters select (`q` searches the job id, the user and the command;
    `status`, `user` and the start time narrow)."""
    return _job_list(session, query, request.app.state.job_answers)


def _job_list(session: Session, query: JobQuery, shared: SharedAnswers) -> JobList:
    """A page of the job list; the rows of its jobs computed once for every viewer while
    none of those jobs changed (`shared`: the app's, by the page's job ids)."""
    after = paging.decode("job", query.cursor, (int, int))

    def rows(ids: list[int]) -> list[dict[str, Any]]:
        return shared.get(("list", *ids), repository.jobs_version(session, ids),
                          lambda: repository.job_rows(session, ids))  # fmt: skip

    found, total = repository.list_jobs(session, query.where, query.limit, after, rows)
    kept, page = paging.page("job", found, query.limit, total, lambda r: r["key"])
    return JobList(jobs=[JobSummary(**sections.without_key(r)) for r in kept], page=page)


@overview_router.get("/overview", response_model=Overview, responses=_WINDOWED)
def overview(
    session: SessionDep,
    request: Request,
    query: JobQueryDep,
    window: WindowDep,
    job: Annotated[
        str | None, Query(description="the job to detail; absent: the first of the list")
    ] = None,
    run: RunParam = None,
    owner: OwnerParam = None,
) -> Overview:
    """What a jobs view shows, in one answer: a page of the job list (as GET /api/jobs
    answers with the same parameters) and the first page of every section of `job` of
    `owner` (or, when `job` is absent, of the first job of that page) over the window
    (default: the whole job), for its run `run` if it has one of that ordinal (else the
    whole job); `shown` is null for a job that is unknown; 409 when `job` names jobs of
    several owners and `owner` does not say which."""
    jobs = _job_list(session, query, request.app.state.job_answers)
    if job is None and jobs.jobs:
        job, owner = jobs.jobs[0].job, jobs.jobs[0].user
    if job is None or not target.possible_id(job):
        return Overview(jobs=jobs, shown=None)
    try:
        found = target.find_job(session, job, owner)
    except HTTPException as refused:
        if refused.status_code == 404:
            return Overview(jobs=jobs, shown=None)
        raise
    chosen = None if run is None else repository.get_run(session, found.id, run)
    t = target.whole(found, window) if chosen is None else target.of_run(found, chosen, window)
    cache, paths = request.app.state.attributions, request.app.state.traffic.paths
    return Overview(jobs=jobs, shown=sections.details(session, t, cache, paths))


#: The `step` query parameter of the series and the profile.
StepParam = Annotated[
    float | None,
    step_query(
        "seconds per step; default: chosen from the window (1, 2, 5, 10, 15, "
        "30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 6, 24 h: the smallest that keeps it within "
        f"{series.MAX_AUTO_STEPS} steps and, for a series, {series.MAX_POINTS:,} points)"
    ),
]


@router.get("/{job:path}/runs", response_model=JobRuns, responses=_WINDOWED)
def job_runs(job: str, session: SessionDep, window: WindowDep, owner: OwnerParam = None) -> JobRuns:
    """The runs (launches) of a job by ordinal: kind, label, size, status, times; with a
    window, the runs seen during it (started before its end, last seen at or after its
    start)."""
    return sections.runs(session, target.find_target(session, job, owner, None, window))


def _per_job(session: Session, request: Request, t: target.Target, key: tuple[Any, ...],
             build: Callable[[], T]) -> T:  # fmt: skip
    """`build()`'s answer about the target (a job, or one of its runs, over a window; the
    viewer may read it) for `key` (a route and its parameters), computed once for every
    viewer of the job while nothing stored about it changed (`repository.jobs_version`);
    the answer is shared: read, never changed."""
    shared: SharedAnswers = request.app.state.job_answers
    version = repository.jobs_version(session, [t.scope.job_id])
    return shared.get((t.scope, t.job, t.run, *key), version, build)


@router.get("/{job:path}/matrix", response_model=Matrix, responses=_TABLE)
def job_matrix(
    job: str, session: SessionDep, request: Request, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    limit: PairLimit = sections.PAIR_LIMITS.default, cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> Matrix | Response:  # fmt: skip
    """Point-to-point bytes and messages per (source rank, destination rank) of a job: a page
    of the pairs, and the whole matrix summed over blocks of ranks (at most 128 x 128)
    (files: the page of pairs)."""
    t = target.find_target(session, job, owner, run, window)
    answer = _per_job(session, request, t, ("matrix", limit, cursor),
                      lambda: sections.matrix(session, t, limit, cursor))  # fmt: skip
    return answer if fmt == "json" else model_table(answer.cells, MatrixCell, fmt, "matrix")


@router.get("/{job:path}/ops", response_model=JobOps, responses=_TABLE)
def job_ops(
    job: str, session: SessionDep, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "json",
) -> JobOps | Response:  # fmt: skip
    """Calls, bytes and time inside per MPI operation of a job (summed over ranks and
    intervals, heaviest time first), and the totals per traffic category (files: the
    ops)."""
    answer = sections.ops(session, target.find_target(session, job, owner, run, window))
    return answer if fmt == "json" else model_table(answer.ops, OpTotal, fmt, "ops")


@router.get("/{job:path}/io", response_model=JobIo, responses=_TABLE)
def job_io(
    job: str, session: SessionDep, request: Request, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    phase: Annotated[
        Literal["program", "startup"],
        Query(description="program: the I/O from MPI_Init on; startup: the I/O before it"),
    ] = "program",
    limit: FileLimit = sections.FILE_LIMITS.default, cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> JobIo | Response:  # fmt: skip
    """A page of the file-system I/O of a job per (layer, path), summed over ranks and
    intervals, most bytes first, of one phase; and the totals of the start-up I/O (before
    MPI_Init) (files: the page)."""
    t = target.find_target(session, job, owner, run, window)
    answer = _per_job(session, request, t, ("io", phase, limit, cursor),
                      lambda: sections.io(session, t, phase, limit, cursor))  # fmt: skip
    return answer if fmt == "json" else model_table(answer.files, FileIo, fmt, "io")


@router.get("/{job:path}/collectives", response_model=JobCollectives, responses=_TABLE)
def job_collectives(
    job: str, session: SessionDep, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "json",
) -> JobCollectives | Response:  # fmt: skip
    """Collective calls, bytes and time per (communicator, op, root) of a job, summed over
    ranks and intervals, heaviest time first; and the same per communicator (files: per
    communicator, op and root)."""
    answer = sections.collectives(session, target.find_target(session, job, owner, run, window))
    if fmt == "json":
        return answer
    return model_table(answer.collectives, CollectiveTotal, fmt, "collectives")


@router.get("/{job:path}/sizes", response_model=JobSizes, responses=_TABLE)
def job_sizes(
    job: str, session: SessionDep, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "json",
) -> JobSizes | Response:  # fmt: skip
    """Message-size histogram (log2 buckets with their byte ranges) per MPI operation of a
    job, summed over ranks and intervals; only buckets with messages (files: one row per
    op, its buckets as JSON)."""
    answer = sections.sizes(session, target.find_target(session, job, owner, run, window))
    return answer if fmt == "json" else model_table(answer.ops, OpSizes, fmt, "sizes")


@router.get("/{job:path}/rma", response_model=JobRma, responses=_TABLE)
def job_rma(
    job: str, session: SessionDep, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    limit: PairLimit = sections.PAIR_LIMITS.default, cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> JobRma | Response:  # fmt: skip
    """One-sided (RMA) calls and bytes of a job per op, and a page of them per (origin rank,
    target rank), summed over intervals (files: the page of pairs)."""
    answer = sections.rma(
        session, target.find_target(session, job, owner, run, window), limit, cursor
    )
    return answer if fmt == "json" else model_table(answer.cells, RmaCell, fmt, "rma")


@router.get("/{job:path}/ranks", response_model=JobRanks, responses=_TABLE)
def job_ranks(
    job: str, session: SessionDep, request: Request, window: WindowDep, run: RunParam = None,
    owner: OwnerParam = None,
    limit: RankLimit = sections.RANK_LIMITS.default, cursor: CursorParam = None,
    fmt: FormatParam = "json",
) -> JobRanks | Response:  # fmt: skip
    """A page of the ranks (or non-MPI processes) of a job that reported, with their run
    and its kind: host, pid, first and last seen, status, and the health counters (keys
    folded into overflow keys, frames lost or spooled); how many MPI ranks and how many
    processes reported (all pages), every host with its number of ranks, and the health
    counters over all the ranks (files: the page of ranks)."""
    t = target.find_target(session, job, owner, run, window)
    answer = _per_job(session, request, t, ("ranks", limit, cursor),
                      lambda: sections.ranks(session, t, limit, cursor))  # fmt: skip
    return answer if fmt == "json" else model_table(answer.ranks, RankInfo, fmt, "ranks")


@router.get("/{job:path}/placement", response_model=JobPlacement, responses=_WINDOWED)
def job_placement(
    job: str,
    session: SessionDep,
    window: WindowDep,
    run: RunParam = None,
    owner: OwnerParam = None,
) -> JobPlacement:
    """Where a job runs on the current fabric: its hosts with their ranks, their HCA ports
    and how each was matched (node GUID read by the hooks from sysfs, else the host name in
    a node description; unmatched hosts listed with no ports), and the links they sit on
    plus the switch-to-switch links their inter-host traffic can cross (topological
    candidates: every shortest path between the hosts' switches, not a per-flow route),
    each with its utilisation and PortXmitWait over the window (default: the job's, from
    its first interval start to its last interval end; the fabric samples overlapping
    it)."""
    t = target.find_target(session, job, owner, run, window)
    lo = t.started_ns if window.from_ns is None else window.from_ns
    hi = t.last_seen_ns + 1 if window.to_ns is None else window.to_ns
    placed = placement.job_placement(session, t.scope, lo, hi)
    return JobPlacement(job=t.job, from_ns=lo, to_ns=hi, crossed=placement.CROSSED_BASIS,
                        run=t.run, **placed)  # fmt: skip


@router.get("/{job:path}/series", response_model=Series, responses=_TABLE)
def job_series(
    job: str,
    session: SessionDep,
    window: WindowDep,
    by: Annotated[
        Literal["category", "op", "rank", "file", "peer"],
        Query(description="what each value is of: an MPI traffic category (and fs:<layer> "
              "for file I/O), an MPI operation, a rank, a file (layer:path) or a "
              "destination peer rank"),
    ] = "category",
    step: StepParam = None,
    run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "json",
) -> Series | Response:  # fmt: skip
    """Values per step of a job over the window (default: the whole job, from its first
    interval start to its last interval end): the intervals whose end lies in a step are
    summed into it (exact integers). Metrics per `by`: category and op: calls, bytes,
    time_ns; rank: mpi_calls, mpi_time_ns, bytes_sent (point-to-point), io_bytes,
    io_time_ns; file: reads, writes, bytes_read, bytes_written, time_ns; peer: bytes_sent,
    msgs_sent (to it). Files: one row per step and key (t_ns, key, then the metrics).

    An answer holds at most 16,384 points (steps x keys with values); the chosen step keeps
    it within that (a 1,024-rank job's hour by rank or peer: 5-minute steps); a given step
    that would exceed it is refused with 422 naming the smallest step that fits (by rank
    and by peer counted as the job's ranks x steps, before any query); more keys with
    values than points fit no step: 422 saying so, step given or not."""
    t = target.find_target(session, job, owner, run, window)
    ranks = max(t.world_size, 1) if by in ("rank", "peer") else 1
    steps = target.steps(t, window, step, series.series_max_steps(ranks), by in ("rank", "peer"))
    try:
        if by in ("rank", "peer") and ranks * steps.count > series.MAX_POINTS:
            bound = series.TooLarge(by, steps, ranks * steps.count, ranks, counted=False)
            if step is None or steps.step_ns < bound.chosen_ns:  # else: the ranks with values
                raise bound
        return _series(session, t, steps, by, fmt)
    except series.TooLarge as large:
        if step is None:  # chosen too fine for the keys found (op, file): one that fits them
            try:
                coarser = series.Steps(steps.from_ns, steps.to_ns, large.chosen_ns)
                return _series(session, t, coarser, by, fmt)
            except series.TooLarge as still:
                large = still
        raise HTTPException(status_code=422, detail=str(large)) from None


def _series(
    session: Session, t: target.Target, steps: series.Steps, by: str, fmt: export.Format
) -> Response:
    """The series answer (JSON built around the database's text of its points, or a file)."""
    metrics = list(series.METRICS[by])
    if fmt == "csv":
        text = series.series_csv(session, t.scope, steps, by)
        return export.file(text.encode(), fmt, f"series-by-{by}")
    if fmt != "json":
        rows = [dict(zip(["t_ns", "key", *metrics], r, strict=True))
                for r in series.series_rows(session, t.scope, steps, by)]  # fmt: skip
        return export.table(rows, ["t_ns", "key", *metrics], fmt, f"series-by-{by}")
    points = series.series_json(session, t.scope, steps, by)
    head = export.plain_json({
        "job": t.job, "by": by, "from_ns": steps.from_ns, "to_ns": steps.to_ns,
        "step_ns": steps.step_ns, "metrics": metrics, "run": t.run,
    }).body  # fmt: skip
    body = bytes(head[:-1]) + b',"points":' + points.encode() + b"}"
    return Response(body, media_type="application/json")


@router.get("/{job:path}/profile", response_model=SlowRanks, responses=_TABLE)
def job_profile(
    job: str,
    session: SessionDep,
    window: WindowDep,
    step: StepParam = None,
    run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "json",
) -> SlowRanks | Response:
    """The slow rank: per rank and step, time inside MPI by traffic category, in file I/O
    (POSIX, stdio and MPI-IO calls), start-up (MPI_Init*) and shutdown (MPI_Finalize,
    MPI_Abort) apart, and computation (the rest of the time its intervals cover);
    the late ranks (far more time outside MPI than the other ranks: the others wait for
    them) first, then the waiting ones (far more time inside MPI), each in one sentence
    (server/jobs/profile.py); per communicator and collective op whose rank with the least
    time inside stands out, how unevenly its ranks' time inside was spread (that rank
    arrives last). Steps as in the series (files: the
    shares). At most 16,384 rank x step cells: the chosen step keeps within that (a
    1,024-rank job's hour: 5-minute steps); a given step beyond it is refused with 422
    naming the smallest step that fits (for a job of more ranks than cells: one step over
    the window, which is taken)."""
    t = target.find_target(session, job, owner, run, window)
    steps = target.steps(t, window, step, series.profile_max_steps(t.world_size), per_rank=True)
    cells = max(t.world_size, 1) * steps.count
    fits = series.auto_step_ns(steps.to_ns - steps.from_ns, series.profile_max_steps(t.world_size))
    # a step no finer than the one chosen without it is taken (the chosen one for a job of
    # over MAX_PROFILE_CELLS ranks is one step: more cells than that, and yet answered)
    if step is not None and cells > series.MAX_PROFILE_CELLS and steps.step_ns < fits:
        span = (steps.to_ns - steps.from_ns) / 1e9
        raise HTTPException(
            status_code=422,
            detail=f"step={step:g} s over {span:g} s is {cells:,} rank x step cells "
            f"({t.world_size:,} ranks), more than {series.MAX_PROFILE_CELLS:,}: ask for "
            f"step >= {fits / 1e9:g} s or a shorter window, or leave step out",
        )
    rows = series.profile_rows(session, t.scope, steps)
    if fmt != "json":
        shares = [RankShare(**s) for s in json.loads(rows.shares)]
        return export.model_table(shares, RankShare, fmt, "profile")
    found = rows.slow_ranks(callsite_service.site_finder(session, t.scope))
    head = export.plain_json({
        "job": t.job, "from_ns": steps.from_ns, "to_ns": steps.to_ns,
        "step_ns": steps.step_ns, **found, "run": t.run,
    }).body  # fmt: skip
    body = bytes(head[:-1]) + b',"shares":' + rows.shares.encode() + b"}"
    return Response(body, media_type="application/json")


@router.get("/{job}", response_model=JobSummary, responses=error_responses(404, 409))
def get_job(job: str, session: SessionDep, owner: OwnerParam = None) -> JobSummary:
    """One job as the job list shows it (ranks seen, traffic sent, status, its runs); 404
    for an unknown job, 409 when the id names jobs of several owners and `owner` does not
    say which. (One path segment: the other `/api/jobs/{job}/...` routes keep theirs; a
    job id with `/` is read through the list, `?q=`.)"""
    found = target.find_job(session, job, owner)
    return JobSummary(**repository.job_row(session, found.id))
