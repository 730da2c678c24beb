"""HTTP routes of the jobs domain."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy.orm import Session

from server.deps import SessionDep
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
from stacklens.schema import Job

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.get("", response_model=list[JobSummary])
def list_jobs(session: SessionDep) -> list[JobSummary]:
    """All jobs seen by the collectors, newest first."""
    return [JobSummary(**row) for row in repository.list_jobs(session)]


@router.get("/{job:path}/matrix", response_model=Matrix)
def job_matrix(job: str, session: SessionDep) -> Matrix:
    """Point-to-point bytes and messages per (source rank, destination rank) of a job."""
    found = _job_or_404(session, job)
    cells = [MatrixCell(**row) for row in repository.p2p_matrix(session, found.id)]
    return Matrix(job=found.job_key, world_size=found.world_size, cells=cells)


@router.get("/{job:path}/ops", response_model=JobOps)
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


@router.get("/{job:path}/io", response_model=JobIo)
def job_io(job: str, session: SessionDep) -> JobIo:
    """File-system I/O of a job per (layer, path), summed over ranks and intervals, most
    bytes first: the program's, and apart from it the start-up I/O (before MPI_Init)."""
    found = _job_or_404(session, job)
    files, startup = ([FileIo(**row) for row in repository.job_io(session, found.id, phase)]
                      for phase in (0, 1))  # fmt: skip
    return JobIo(job=found.job_key, files=files, startup_files=startup)


@router.get("/{job:path}/collectives", response_model=JobCollectives)
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


@router.get("/{job:path}/sizes", response_model=JobSizes)
def job_sizes(job: str, session: SessionDep) -> JobSizes:
    """Message-size histogram (log2 buckets with their byte ranges) per MPI operation of a
    job, summed over ranks and intervals; only buckets with messages."""
    found = _job_or_404(session, job)
    return JobSizes(
        job=found.job_key, ops=[OpSizes(**row) for row in repository.job_sizes(session, found.id)]
    )


@router.get("/{job:path}/rma", response_model=JobRma)
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


@router.get("/{job:path}/ranks", response_model=JobRanks)
def job_ranks(job: str, session: SessionDep) -> JobRanks:
    """Every rank of a job that reported: host, pid, first and last seen, status, and the
    health counters (keys folded into overflow keys, frames lost or spooled)."""
    found = _job_or_404(session, job)
    ranks = [RankInfo(**row) for row in repository.job_ranks(session, found)]
    return JobRanks(job=found.job_key, world_size=found.world_size, ranks=ranks)


def _job_or_404(session: Session, job: str) -> Job:
    found = repository.get_job(session, job)
    if found is None:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}")
    return found
