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


class OpTotal(BaseModel):
    """One MPI operation of a job, summed over all its ranks and intervals."""

    op: str = Field(description="MPI function name, e.g. MPI_Send")
    category: str = Field(
        description="traffic category: mpi_p2p, mpi_completion, mpi_coll, mpi_rma, io, other"
    )
    calls: int
    bytes: int = Field(description="payload bytes handed to the call (send side, or received)")
    time_ns: int = Field(description="wall time inside the call, summed over ranks")
    ranks: int = Field(description="ranks that called it")


class CategoryTotal(BaseModel):
    """Calls, bytes and time of all the MPI operations of one traffic category."""

    category: str
    calls: int
    bytes: int
    time_ns: int


class JobOps(BaseModel):
    """A job's MPI operations (only those called, heaviest time first) and the totals per
    category (every category, in a fixed order, zeros included)."""

    job: str
    categories: list[CategoryTotal]
    ops: list[OpTotal]


class FileIo(BaseModel):
    """File-system I/O of a job on one file through one layer, summed over ranks and
    intervals."""

    layer: str = Field(description='"POSIX", "stdio" or "MPI-IO"')
    path: str = Field(description='absolute path; "<other>" = files beyond the key limit')
    mount: str = Field(description="mount point of the file")
    fstype: str = Field(description="file-system type of that mount (ext4, lustre, ...)")
    ranks: int = Field(description="ranks that touched the file through this layer")
    opens: int
    reads: int
    writes: int
    bytes_read: int
    bytes_written: int
    read_time_ns: int
    write_time_ns: int
    meta_time_ns: int = Field(description="time in open/close/seek/sync calls")


class JobIo(BaseModel):
    """A job's file-system I/O per (layer, path), most bytes (read + written) first."""

    job: str
    files: list[FileIo]
