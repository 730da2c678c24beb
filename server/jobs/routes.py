"""HTTP routes of the jobs domain."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy.orm import Session

from server.deps import SessionDep
from server.errors import error_responses
from server.jobs import repository
from server.jobs.schemas import (
    CategoryTotal,
    CollectiveTotal,
    CommunicatorTotal,
    FileIo,
    JobCollectives,
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
    RankInfo,
    RmaCell,
    RmaOp,
)
from stacklens import wire
from stacklens.schema import Job

#: Bytes of the wire's job id field: no stored job has a longer id.
JOB_ID_BYTES = wire.HEADER_DTYPE.fields["job_id"][0].itemsize

router = APIRouter(prefix="/api/jobs", tags=["jobs"])

#: Every per-job route answers 404 for an unknown job (or an id no job can have).
_NOT_FOUND = error_responses(404)


@router.get("", response_model=list[JobSummary])
def list_jobs(session: SessionDep) -> list[JobSummary]:
    """All jobs seen by the collectors, newest first."""
    return [JobSummary(**row) for row in repository.list_jobs(session)]


@router.get("/{job:path}/matrix", response_model=Matrix, responses=_NOT_FOUND)
def job_matrix(job: str, session: SessionDep) -> Matrix:
    """Point-to-point bytes and messages per (source rank, destination rank) of a job."""
    found = _job_or_404(session, job)
    cells = [MatrixCell(**row) for row in repository.p2p_matrix(session, found.id)]
    return Matrix(job=found.job_key, world_size=found.world_size, cells=cells)


@router.get("/{job:path}/ops", response_model=JobOps, responses=_NOT_FOUND)
def job_ops(job: str, session: SessionDep) -> JobOps:
    """Calls, bytes and time inside per MPI operation of a job (summed over ranks and
    intervals, heaviest time first), and the totals per traffic category."""
    found = _job_or_404(session, job)
    ops = repository.job_ops(session, found.id)
    return JobOps(
        job=found.job_key,
        categories=[CategoryTotal(**row) for row in repository.category_totals(ops)],
        ops=[OpTotal(**row) for row in ops],
    )


@router.get("/{job:path}/io", response_model=JobIo, responses=_NOT_FOUND)
def job_io(job: str, session: SessionDep) -> JobIo:
    """File-system I/O of a job per (layer, path), summed over ranks and intervals, most
    bytes first."""
    found = _job_or_404(session, job)
    files = [FileIo(**row) for row in repository.job_io(session, found.id)]
    return JobIo(job=found.job_key, files=files)


@router.get("/{job:path}/collectives", response_model=JobCollectives, responses=_NOT_FOUND)
def job_collectives(job: str, session: SessionDep) -> JobCollectives:
    """Collective calls, bytes and time per (communicator, op, root) of a job, summed over
    ranks and intervals, heaviest time first; and the same per communicator."""
    found = _job_or_404(session, job)
    return JobCollectives(
        job=found.job_key,
        communicators=[
            CommunicatorTotal(**row) for row in repository.communicator_totals(session, found.id)
        ],
        collectives=[
            CollectiveTotal(**row) for row in repository.job_collectives(session, found.id)
        ],
    )


@router.get("/{job:path}/sizes", response_model=JobSizes, responses=_NOT_FOUND)
def job_sizes(job: str, session: SessionDep) -> JobSizes:
    """Message-size histogram (log2 buckets with their byte ranges) per MPI operation of a
    job, summed over ranks and intervals; only buckets with messages."""
    found = _job_or_404(session, job)
    return JobSizes(
        job=found.job_key, ops=[OpSizes(**row) for row in repository.job_sizes(session, found.id)]
    )


@router.get("/{job:path}/rma", response_model=JobRma, responses=_NOT_FOUND)
def job_rma(job: str, session: SessionDep) -> JobRma:
    """One-sided (RMA) calls and bytes of a job per (origin rank, target rank) and per op,
    summed over intervals."""
    found = _job_or_404(session, job)
    ops, cells = repository.job_rma(session, found.id)
    return JobRma(
        job=found.job_key,
        world_size=found.world_size,
        ops=[RmaOp(**row) for row in ops],
        cells=[RmaCell(**row) for row in cells],
    )


@router.get("/{job:path}/ranks", response_model=JobRanks, responses=_NOT_FOUND)
def job_ranks(job: str, session: SessionDep) -> JobRanks:
    """Every rank of a job that reported: host, pid, first and last seen, status, and the
    health counters (keys folded into overflow keys, frames lost or spooled)."""
    found = _job_or_404(session, job)
    ranks = [RankInfo(**row) for row in repository.job_ranks(session, found.id)]
    return JobRanks(job=found.job_key, world_size=found.world_size, ranks=ranks)


def _job_or_404(session: Session, job: str) -> Job:
    """The job with id `job`; 404 if there is none, also for an id that no job can have
    (ingest refuses them: longer than the wire field, not UTF-8 text, control characters),
    which is never sent to the database."""
    if len(job.encode("utf-8", "surrogatepass")) > JOB_ID_BYTES or not wire.clean_text(job):
        raise HTTPException(
            status_code=404,
            detail=f"unknown job {job!r}: a job id is 1 to {JOB_ID_BYTES} bytes of UTF-8 "
            "text without control characters",
        )
    found = repository.get_job(session, job)
    if found is None:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}")
    return found
