"""Response models of the jobs API (bytes, ns since the Unix epoch)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class JobSummary(BaseModel):
    """One job in the job list."""

    job: str
    world_size: int
    command: str
    user: str
    status: str = Field(
        description="running; finished (every rank sent its final frame); killed (a rank "
        "ended by a signal: SIGTERM, SIGINT)"
    )
    started_ns: int
    last_seen_ns: int
    ranks_seen: int
    bytes_sent: int
    messages_sent: int


class MatrixCell(BaseModel):
    """Point-to-point traffic from one source rank to one destination rank."""

    src: int
    dst: int
    bytes: int
    messages: int


class Matrix(BaseModel):
    """A job's rank x rank point-to-point matrix (only non-zero pairs are listed)."""

    job: str
    world_size: int
    cells: list[MatrixCell]
