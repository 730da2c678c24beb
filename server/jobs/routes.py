"""HTTP routes of the jobs domain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from sqlalchemy.orm import Session

from server.deps import SessionDep
from server.jobs import repository
from stacklens.api_models import (
    CategoryTotal,
    CollectiveTotal,
    CommunicatorTotal,
    FileIo,
    JobCollectives,
    JobDetails,
    JobIo,
    JobOps,
    JobRanks,
    JobRma,
    JobSizes,
    JobSummary,
    Matrix,
    MatrixCell,
    OpSizes,
    OpTotal,
    Overview,
    RankInfo,
    RmaCell,
    RmaOp,
)
from stacklens.schema import Job

router = APIRouter(prefix="/api/jobs", tags=["jobs"])
overview_router = APIRouter(prefix="/api", tags=["jobs"])

#: Jobs listed by the overview unless `limit` says otherwise (the Jobs page's table).
OVERVIEW_JOBS = 20


@router.get("", response_model=list[JobSummary])
def list_jobs(session: SessionDep) -> list[JobSummary]:
    """All jobs seen by the collectors, newest first."""
    return [JobSummary(**row) for row in repository.list_jobs(session)]


@overview_router.get("/overview", response_model=Overview)
def overview(
    session: SessionDep,
    job: Annotated[str | None, Query(description="the job to detail; default: the newest")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="newest jobs to list")] = OVERVIEW_JOBS,
) -> Overview:
    """What the Jobs page shows, in one answer: the newest `limit` jobs (and `job`, if
    older), how many jobs there are, and all the details of `job` (or of the newest job
    when `job` is absent or unknown)."""
    jobs = [JobSummary(**row) for row in repository.list_jobs(session, limit, include=job)]
    known = {j.job for j in jobs}
    shown = job if job in known else jobs[0].job if jobs else None
    found = repository.get_job(session, shown) if shown is not None else None
    return Overview(
        jobs=jobs,
        jobs_total=repository.count_jobs(session),
        shown=None if found is None else _details(session, found),
    )


@router.get("/{job:path}/matrix", response_model=Matrix)
def job_matrix(job: str, session: SessionDep) -> Matrix:
    """Point-to-point bytes and messages per (source rank, destination rank) of a job."""
    return _matrix(session, _job_or_404(session, job))


@router.get("/{job:path}/ops", response_model=JobOps)
def job_ops(job: str, session: SessionDep) -> JobOps:
    """Calls, bytes and time inside per MPI operation of a job (summed over ranks and
    intervals, heaviest time first), and the totals per traffic category."""
    return _ops(session, _job_or_404(session, job))


@router.get("/{job:path}/io", response_model=JobIo)
def job_io(job: str, session: SessionDep) -> JobIo:
    """File-system I/O of a job per (layer, path), summed over ranks and intervals, most
    bytes first: the program's, and apart from it the start-up I/O (before MPI_Init)."""
    return _io(session, _job_or_404(session, job))


@router.get("/{job:path}/collectives", response_model=JobCollectives)
def job_collectives(job: str, session: SessionDep) -> JobCollectives:
    """Collective calls, bytes and time per (communicator, op, root) of a job, summed over
    ranks and intervals, heaviest time first; and the same per communicator."""
    return _collectives(session, _job_or_404(session, job))


@router.get("/{job:path}/sizes", response_model=JobSizes)
def job_sizes(job: str, session: SessionDep) -> JobSizes:
    """Message-size histogram (log2 buckets with their byte ranges) per MPI operation of a
    job, summed over ranks and intervals; only buckets with messages."""
    return _sizes(session, _job_or_404(session, job))


@router.get("/{job:path}/rma", response_model=JobRma)
def job_rma(job: str, session: SessionDep) -> JobRma:
    """One-sided (RMA) calls and bytes of a job per (origin rank, target rank) and per op,
    summed over intervals."""
    return _rma(session, _job_or_404(session, job))


@router.get("/{job:path}/ranks", response_model=JobRanks)
def job_ranks(job: str, session: SessionDep) -> JobRanks:
    """Every rank of a job that reported: host, pid, first and last seen, status, and the
    health counters (keys folded into overflow keys, frames lost or spooled)."""
    return _ranks(session, _job_or_404(session, job))


def _job_or_404(session: Session, job: str) -> Job:
    found = repository.get_job(session, job)
    if found is None:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}")
    return found


def _details(session: Session, job: Job) -> JobDetails:
    return JobDetails(
        job=job.job_key,
        matrix=_matrix(session, job),
        ops=_ops(session, job),
        io=_io(session, job),
        collectives=_collectives(session, job),
        sizes=_sizes(session, job),
        rma=_rma(session, job),
        ranks=_ranks(session, job),
    )


def _matrix(session: Session, job: Job) -> Matrix:
    cells = [MatrixCell(**row) for row in repository.p2p_matrix(session, job.id)]
    return Matrix(job=job.job_key, world_size=job.world_size, cells=cells)


def _ops(session: Session, job: Job) -> JobOps:
    ops = repository.job_ops(session, job.id)
    return JobOps(
        job=job.job_key,
        categories=[CategoryTotal(**row) for row in repository.category_totals(ops)],
        ops=[OpTotal(**row) for row in ops],
    )


def _io(session: Session, job: Job) -> JobIo:
    files, startup = ([FileIo(**row) for row in repository.job_io(session, job.id, phase)]
                      for phase in (0, 1))  # fmt: skip
    return JobIo(job=job.job_key, files=files, startup_files=startup)


def _collectives(session: Session, job: Job) -> JobCollectives:
    return JobCollectives(
        job=job.job_key,
        communicators=[
            CommunicatorTotal(**row) for row in repository.communicator_totals(session, job.id)
        ],
        collectives=[CollectiveTotal(**row) for row in repository.job_collectives(session, job.id)],
    )


def _sizes(session: Session, job: Job) -> JobSizes:
    return JobSizes(
        job=job.job_key, ops=[OpSizes(**row) for row in repository.job_sizes(session, job.id)]
    )


def _rma(session: Session, job: Job) -> JobRma:
    ops, cells = repository.job_rma(session, job.id)
    return JobRma(
        job=job.job_key,
        world_size=job.world_size,
        ops=[RmaOp(**row) for row in ops],
        cells=[RmaCell(**row) for row in cells],
    )


def _ranks(session: Session, job: Job) -> JobRanks:
    ranks = [RankInfo(**row) for row in repository.job_ranks(session, job)]
    return JobRanks(job=job.job_key, world_size=job.world_size, ranks=ranks)
