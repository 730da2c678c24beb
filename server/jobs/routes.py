"""HTTP routes of the jobs domain."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from sqlalchemy.orm import Session

from server.deps import SessionDep
from server.jobs import repository
from server.jobs.schemas import (
    CategoryTotal,
    FileIo,
    JobIo,
    JobOps,
    JobSummary,
    Matrix,
    MatrixCell,
    OpTotal,
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
    bytes first."""
    found = _job_or_404(session, job)
    files = [FileIo(**row) for row in repository.job_io(session, found.id)]
    return JobIo(job=found.job_key, files=files)


def _job_or_404(session: Session, job: str) -> Job:
    found = repository.get_job(session, job)
    if found is None:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}")
    return found
