"""HTTP routes of the jobs domain."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from server.deps import SessionDep
from server.jobs import repository
from server.jobs.schemas import JobSummary, Matrix, MatrixCell

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.get("", response_model=list[JobSummary])
def list_jobs(session: SessionDep) -> list[JobSummary]:
    """All jobs seen by the collectors, newest first."""
    return [JobSummary(**row) for row in repository.list_jobs(session)]


@router.get("/{job:path}/matrix", response_model=Matrix)
def job_matrix(job: str, session: SessionDep) -> Matrix:
    """Point-to-point bytes and messages per (source rank, destination rank) of a job."""
    found = repository.get_job(session, job)
    if found is None:
        raise HTTPException(status_code=404, detail=f"unknown job {job!r}")
    cells = [MatrixCell(**row) for row in repository.p2p_matrix(session, found.id)]
    return Matrix(job=found.job_key, world_size=found.world_size, cells=cells)
