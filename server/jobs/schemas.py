"""Response models of the jobs API (bytes, ns since the Unix epoch)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RunSummary(BaseModel):
    """One run (launch) of a job."""

    run: int = Field(description="ordinal in the job, 1, 2, ... in first-seen order; ?run=")
    kind: str = Field(
        description="mpi (one mpirun / srun step) or processes (the job's programs without "
        "MPI, one run per job; its 'ranks' are the processes, numbered as first seen)"
    )
    label: str | None = Field(description="SLURM_STEP_ID of an MPI run, when set")
    world_size: int = Field(description="ranks of an MPI run; processes seen of a processes run")
    command: str
    user: str
    status: str = Field(
        description="running; finished (every rank, or every process seen, sent its final "
        "frame); killed (an MPI rank ended by a signal: SIGTERM, SIGINT; for processes: one "
        "did and all have ended); lost (nothing arrived for STACKLENS_JOB_LOST_AFTER_S, "
        "running again if a frame arrives)"
    )
    started_ns: int
    last_seen_ns: int
    finished_ns: int | None
    ranks_seen: int = Field(description="ranks (or processes) that reported")


class JobSummary(BaseModel):
    """One job in the job list."""

    job: str
    world_size: int = Field(description="the largest world size of its runs")
    command: str = Field(description="of its first run")
    user: str
    status: str = Field(
        description="its runs' statuses aggregated: running if one is, else lost if one is, "
        "else killed if one is, else finished"
    )
    started_ns: int
    last_seen_ns: int
    ranks_seen: int = Field(description="ranks and processes of all its runs")
    bytes_sent: int
    messages_sent: int
    runs: list[RunSummary] = Field(description="by ordinal")


class JobRuns(BaseModel):
    """The runs of a job by ordinal."""

    job: str
    runs: list[RunSummary]


class JobScoped(BaseModel):
    """What every per-job answer starts with: the job, and the run asked for."""

    job: str
    run: int | None = Field(description="the run asked for (?run=), null = the whole job")


class MatrixCell(BaseModel):
    """Point-to-point traffic from one source rank to one destination rank."""

    src: int
    dst: int
    bytes: int
    messages: int


class Matrix(JobScoped):
    """A job's rank x rank point-to-point matrix (only non-zero pairs are listed)."""

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


class JobOps(JobScoped):
    """A job's MPI operations (only those called, heaviest time first) and the totals per
    category (every category, in a fixed order, zeros included)."""

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


class JobIo(JobScoped):
    """A job's file-system I/O per (layer, path), most bytes (read + written) first."""

    files: list[FileIo]


class CollectiveTotal(BaseModel):
    """One collective operation on one communicator with one root, summed over the ranks
    and intervals of a job."""

    op: str = Field(description="MPI function name, e.g. MPI_Allreduce")
    comm_id: int = Field(
        description="communicator id, the same on every member; 4294967295 = the overflow key "
        "(communicators beyond STACKLENS_MAX_KEYS folded together)"
    )
    comm_size: int = Field(description="ranks in the communicator")
    root: int = Field(description="world rank of the root, -1 when the op has none")
    ranks: int = Field(description="ranks that called it")
    calls: int = Field(description="calls summed over ranks (one collective = comm_size calls)")
    bytes: int = Field(description="payload bytes the ranks handed to the calls")
    time_ns: int = Field(description="wall time inside the calls, summed over ranks")


class CommunicatorTotal(BaseModel):
    """All the collective calls on one communicator of a job."""

    comm_id: int
    comm_size: int
    overflow: bool = Field(description="the overflow key, not one communicator")
    ranks: int = Field(description="ranks that called a collective on it")
    ops: int = Field(description="distinct (op, root) rows on it")
    calls: int
    bytes: int
    time_ns: int


class JobCollectives(JobScoped):
    """A job's collectives per (communicator, op, root), heaviest time first, and a summary
    per communicator, heaviest time first."""

    communicators: list[CommunicatorTotal]
    collectives: list[CollectiveTotal]


class SizeBucket(BaseModel):
    """Messages in one log2 size bucket: `lower_bytes` <= size < `upper_bytes`."""

    bucket: int = Field(description="0 = empty messages, b = [2^(b-1), 2^b) bytes")
    lower_bytes: int
    upper_bytes: int = Field(description="exclusive")
    count: int


class OpSizes(BaseModel):
    """The message-size histogram of one MPI operation (only buckets with messages)."""

    op: str
    category: str
    messages: int
    buckets: list[SizeBucket]


class JobSizes(JobScoped):
    """A job's message-size histograms, summed over ranks and intervals; the op with the
    most messages first."""

    ops: list[OpSizes]


class RmaOp(BaseModel):
    """One-sided calls and bytes of one op (for a pair of ranks, or for the whole job)."""

    op: str
    calls: int
    bytes: int


class RmaCell(BaseModel):
    """One-sided traffic from one origin rank to one target rank, over the whole job."""

    origin: int
    target: int
    calls: int
    bytes: int
    ops: list[RmaOp] = Field(description="per op, by name")


class JobRma(JobScoped):
    """A job's one-sided (RMA) traffic per (origin, target) pair with calls (by origin, then
    target) and per op (most bytes first)."""

    world_size: int
    ops: list[RmaOp]
    cells: list[RmaCell]


class RankInfo(BaseModel):
    """Where one rank of a job ran and what the hook library could not account for."""

    run: int = Field(description="ordinal of its run")
    rank: int = Field(description="world rank; a process's number in a processes run")
    host: str
    pid: int
    first_seen_ns: int
    last_seen_ns: int
    finished: bool = Field(description="its final frame was stored")
    killed: bool = Field(description="its final frame says it ended by a signal")
    status: str = Field(description="running | finished | killed, from the two flags")
    keys_dropped: int = Field(
        description="new keys folded into an overflow key (STACKLENS_MAX_KEYS): counts kept, "
        "but no longer per peer / file / communicator"
    )
    frames_dropped: int = Field(description="frames lost by the sender: their counts are gone")
    frames_spooled: int = Field(description="frames that went through the spool directory")


class JobRanks(JobScoped):
    """The ranks of a job that reported, by world rank."""

    world_size: int
    ranks: list[RankInfo]
