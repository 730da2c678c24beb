"""The HTTP API's response models: the one contract of the server's routes and the
frontend's client.

The server's routes declare these as their `response_model`; the frontend's client
(`frontend/api.py`) parses every answer into the same classes, so both sides cannot drift
apart (tests/test_api_contract.py). Pure data: no database, collector or server imports.

Units: bytes, bytes/s, ns since the Unix epoch (UTC). Fabric GUIDs are strings `0x` + 16
lowercase hex digits (the 64-bit GUID, unsigned), the form fabric events use too: JSON
numbers cannot carry 64 bits exactly in a browser. A counter that is unknown (no sample,
first sample, counter reset) is `null`, never 0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from stacklens.constants import CATEGORIES, IO_LAYERS, OVERFLOW_COMM_ID


class ApiModel(BaseModel):
    """Base of the response models: immutable once parsed."""

    model_config = ConfigDict(frozen=True)


# ---------------------------------------------------------------------------------------
# jobs: /api/jobs...
# ---------------------------------------------------------------------------------------
class PageInfo(ApiModel):
    """Where a paged list stands: every list answer holds at most `limit` rows; the next
    page is asked with `?cursor=<next_cursor>` (opaque; the same filters)."""

    total: int = Field(description="rows of the list in all its pages (with its filters)")
    limit: int = Field(description="the most rows this page could hold")
    next_cursor: str | None = Field(description="cursor of the next page; null: the last page")


class RunSummary(ApiModel):
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
        "did and all have ended); aborted (an MPI rank called MPI_Abort); lost (nothing "
        "arrived for STACKLENS_JOB_LOST_AFTER_S, running again if a frame arrives); failed "
        "(its launch by `stacklens run` ended with a non-zero exit status and no rank said "
        "otherwise, or no rank ever reported)"
    )
    started_ns: int
    last_seen_ns: int
    finished_ns: int | None
    ranks_seen: int = Field(description="ranks (or processes) that reported")
    ranks_expected: int | None = Field(
        default=None, description="the ranks its launch asked for (`stacklens run`: -np, -n)"
    )
    exit_code: int | None = Field(
        default=None,
        description="its launch's exit status (`stacklens run`); null without a launch "
        "record or when a signal ended the launcher",
    )
    exit_signal: str | None = Field(
        default=None, description="the signal that ended its launcher, e.g. SIGKILL"
    )
    forwarded_signal: str | None = Field(
        default=None,
        description="the signal `stacklens run` forwarded to the launcher (SIGTERM, SIGINT)",
    )
    launch_output: str | None = Field(
        default=None,
        description="the last lines its launcher printed (stdout and stderr, at most 4 KiB)",
    )


class JobSummary(ApiModel):
    """One job in the job list."""

    job: str
    world_size: int = Field(description="the largest world size of its runs")
    command: str = Field(description="of its first run")
    user: str
    status: str = Field(
        description="its runs' statuses aggregated: running if one is, else lost if one is, "
        "else aborted if one is (a rank called MPI_Abort), else killed if one is (a rank ended "
        "by a signal: SIGTERM, SIGINT), else failed if one is, else finished"
    )
    started_ns: int
    last_seen_ns: int
    ranks_seen: int = Field(description="ranks and processes of all its runs")
    bytes_sent: int
    messages_sent: int
    runs: list[RunSummary] = Field(description="by ordinal")


class JobList(ApiModel):
    """A page of the job list (`GET /api/jobs`), newest first."""

    jobs: list[JobSummary]
    page: PageInfo


class JobRuns(ApiModel):
    """The runs of a job by ordinal."""

    job: str
    runs: list[RunSummary]


def _run_asked() -> Any:
    """The `run` field of every per-job answer (the last field: positional use unchanged)."""
    return Field(default=None, description="the run asked for (?run=), null = the whole job")


class MatrixCell(ApiModel):
    """Point-to-point traffic from one source rank to one destination rank."""

    src: int
    dst: int
    bytes: int
    messages: int


class Matrix(ApiModel):
    """A job's rank x rank point-to-point matrix: a page of its non-zero (source,
    destination) pairs by source then destination, and the whole matrix summed over blocks
    of `block_ranks` x `block_ranks` ranks (the heat map's data: at most 128 x 128 blocks,
    sized by the highest rank that sent or received, whatever the world size)."""

    job: str
    world_size: int
    cells: list[MatrixCell]
    run: int | None = _run_asked()
    page: PageInfo
    block_ranks: int = Field(description="ranks per block side (1: every block is one pair)")
    blocks: list[MatrixCell] = Field(
        description="non-zero blocks: src/dst = block index, i.e. ranks "
        "[index * block_ranks, (index + 1) * block_ranks)"
    )


class OpTotal(ApiModel):
    """One MPI operation of a job, summed over all its ranks and intervals."""

    op: str = Field(description="MPI function name, e.g. MPI_Send")
    category: str = Field(
        description=f"traffic category: one of {', '.join(CATEGORIES)} (mpi_startup: "
        "MPI_Init*, MPI_Finalize, MPI_Abort)"
    )
    received: bool = Field(description="its bytes are received (receives, reads, RMA gets)")
    calls: int
    bytes: int = Field(description="payload bytes handed to the call (sent), or received")
    time_ns: int = Field(description="wall time inside the call, summed over ranks")
    ranks: int = Field(description="ranks that called it")


class CategoryTotal(ApiModel):
    """Calls, bytes and time of all the MPI operations of one traffic category."""

    category: str
    calls: int
    bytes_sent: int = Field(
        description="bytes sent or handed to MPI: point-to-point sends, collective "
        "contributions, RMA puts and accumulates, MPI-IO writes (each message once)"
    )
    bytes_received: int = Field(
        description="bytes received: point-to-point receives (the same messages as the "
        "senders' bytes_sent, not added to them), RMA gets, MPI-IO reads"
    )
    time_ns: int = Field(description="wall time inside the calls, summed over ranks")
    communication: bool = Field(
        description="its time is communication: every category but mpi_startup (time inside "
        "MPI_Init*, MPI_Finalize and MPI_Abort is start-up, shown apart)"
    )


class JobOps(ApiModel):
    """A job's MPI operations (only those called, heaviest time first) and the totals per
    category (every category, in a fixed order, zeros included)."""

    job: str
    categories: list[CategoryTotal]
    ops: list[OpTotal]
    run: int | None = _run_asked()


class FileIo(ApiModel):
    """File-system I/O of a job on one file through one layer, summed over ranks and
    intervals."""

    layer: str = Field(description=" or ".join(f'"{name}"' for name in IO_LAYERS.values()))
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


class IoTotals(ApiModel):
    """Files and bytes of one phase of a job's I/O, summed over its (layer, path) rows."""

    files: int = Field(description="(layer, path) rows")
    bytes_read: int
    bytes_written: int


class JobIo(ApiModel):
    """A page of a job's file-system I/O per (layer, path), most bytes (read + written)
    first, of one phase: the program's (default), or the I/O its ranks did before MPI_Init
    (`?phase=startup`: the loader's and an interpreter's imports); and the start-up I/O's
    totals."""

    job: str
    files: list[FileIo]
    startup: IoTotals = Field(description="all the I/O before MPI_Init, summed")
    run: int | None = _run_asked()
    page: PageInfo


class CollectiveTotal(ApiModel):
    """One collective operation on one communicator with one root, summed over the ranks
    and intervals of a job."""

    op: str = Field(description="MPI function name, e.g. MPI_Allreduce")
    comm_id: int = Field(
        description=f"communicator id, the same on every member; {OVERFLOW_COMM_ID} = the "
        "overflow key (communicators beyond STACKLENS_MAX_KEYS folded together)"
    )
    comm_size: int = Field(description="ranks in the communicator")
    root: int = Field(description="world rank of the root, -1 when the op has none")
    ranks: int = Field(description="ranks that called it")
    calls: int = Field(description="calls summed over ranks (one collective = comm_size calls)")
    bytes: int = Field(description="payload bytes the ranks handed to the calls")
    time_ns: int = Field(description="wall time inside the calls, summed over ranks")


class CommunicatorTotal(ApiModel):
    """All the collective calls on one communicator of a job."""

    comm_id: int
    comm_size: int
    overflow: bool = Field(description="the overflow key, not one communicator")
    ranks: int = Field(description="ranks that called a collective on it")
    ops: int = Field(description="distinct (op, root) rows on it")
    calls: int
    bytes: int
    time_ns: int


class JobCollectives(ApiModel):
    """A job's collectives per (communicator, op, root), heaviest time first, and a summary
    per communicator, heaviest time first."""

    job: str
    communicators: list[CommunicatorTotal]
    collectives: list[CollectiveTotal]
    run: int | None = _run_asked()


class SizeBucket(ApiModel):
    """Messages in one log2 size bucket: `lower_bytes` <= size < `upper_bytes`."""

    bucket: int = Field(description="0 = empty messages, b = [2^(b-1), 2^b) bytes")
    lower_bytes: int
    upper_bytes: int = Field(description="exclusive")
    count: int


class OpSizes(ApiModel):
    """The message-size histogram of one MPI operation (only buckets with messages)."""

    op: str
    category: str
    messages: int
    buckets: list[SizeBucket]


class JobSizes(ApiModel):
    """A job's message-size histograms, summed over ranks and intervals; the op with the
    most messages first."""

    job: str
    ops: list[OpSizes]
    run: int | None = _run_asked()


class RmaOp(ApiModel):
    """One-sided calls and bytes of one op (for a pair of ranks, or for the whole job)."""

    op: str
    calls: int
    bytes: int


class RmaCell(ApiModel):
    """One-sided traffic from one origin rank to one target rank, over the whole job."""

    origin: int
    target: int
    calls: int
    bytes: int
    ops: list[RmaOp] = Field(description="per op, by name")


class JobRma(ApiModel):
    """A job's one-sided (RMA) traffic per (origin, target) pair with calls (by origin, then
    target) and per op (most bytes first)."""

    job: str
    world_size: int
    ops: list[RmaOp]
    cells: list[RmaCell]
    run: int | None = _run_asked()
    page: PageInfo = Field(description="the page of `cells` (ops: all of them)")


class RankInfo(ApiModel):
    """Where one rank of a job ran and what the hook library could not account for; or one
    non-MPI process of its processes run (`kind`), told apart from the ranks by its run."""

    rank: int = Field(description="world rank; a process's number in a processes run")
    host: str
    pid: int
    first_seen_ns: int
    last_seen_ns: int
    finished: bool = Field(description="its final frame was stored")
    killed: bool = Field(description="its final frame says it ended by a signal")
    aborted: bool = Field(description="its final frame says it called MPI_Abort")
    unfinalized: bool = Field(
        description="its final frame says its process ended without MPI_Finalize (returned "
        "from main, exit, _exit)"
    )
    abort_code: int | None = Field(description="the error code it passed to MPI_Abort")
    status: str = Field(
        description="aborted | killed | exited (ended without MPI_Finalize) | finished (from "
        "its final frame), else running while "
        "its run runs, lost once the run ended without this rank's final frame"
    )
    keys_dropped: int = Field(
        description="new keys folded into an overflow key (STACKLENS_MAX_KEYS): counts kept, "
        "but no longer per peer / file / communicator"
    )
    frames_dropped: int = Field(
        description="frames lost: dropped by the sender (queue and spool full) or rejected by "
        "the collector (kept in the spool's rejected/ folder); their counts are missing"
    )
    frames_spooled: int = Field(description="frames that went through the spool directory")
    run: int | None = Field(default=None, description="ordinal of its run")
    kind: str = Field(
        description="its run's kind: mpi (an MPI rank) or processes (a non-MPI process of the "
        "job's processes run, `rank` its number: a batch script's shell, say)"
    )


class HostRanks(ApiModel):
    """How many ranks (or processes) of a job ran on one host."""

    host: str
    ranks: int


class RankHealth(ApiModel):
    """The ranks of a job whose counts were folded or lost, over all of its ranks."""

    ranks_folded: int = Field(description="ranks with keys_dropped > 0")
    keys_dropped: int
    ranks_lost: int = Field(description="ranks with frames_dropped > 0")
    frames_dropped: int


class JobRanks(ApiModel):
    """A page of the ranks of a job that reported, by run and world rank, and its hosts."""

    job: str
    world_size: int
    ranks: list[RankInfo]
    run: int | None = _run_asked()
    page: PageInfo
    ranks_reported: int = Field(
        description="MPI ranks that reported, of every MPI run asked (all pages)"
    )
    processes_reported: int = Field(
        description="non-MPI processes that reported (the processes run's; all pages); "
        "page.total = ranks_reported + processes_reported"
    )
    hosts: list[HostRanks] = Field(description="every host, most ranks first (then by name)")
    health: RankHealth = Field(description="the health counters over all the ranks")


CallsiteQuality = Literal["line", "python", "function+offset", "module+offset"]


class CallsiteFrame(ApiModel):
    """One frame of a call site (frame 0: the caller of the MPI or I/O function), as the
    hooks captured it and as it resolved (docs/callsites.md)."""

    frame: int
    module: str = Field(description="the module's path where it ran (empty: unknown)")
    build_id: str = Field(
        description="its GNU build-id when it ran, hex (empty: none); a Python frame "
        "(quality 'python'): 'py:' and its function, its module the Python file"
    )
    offset: int = Field(
        description="the return address minus the module's load bias (a Python frame: its line)"
    )
    quality: CallsiteQuality
    function: str | None = None
    function_offset: int | None = Field(
        default=None, description="the return address's offset in the function"
    )
    file: str | None = None
    line: int | None = None
    reason: str = Field(default="", description="why the quality is not `line`")
    resolved: Literal["server", "node", "hooks", "pending", ""] = Field(
        default="",
        description="where it was resolved: by the collector's resolver ('server'), on "
        "the compute node by stacklens run ('node'), by the hooks from the Python "
        "interpreter (a Python frame, 'hooks'), 'pending' (not resolved yet: "
        "module+offset until the resolver has read the module), or '' (it could not be: "
        "the reason says why)",
    )


class Callsite(ApiModel):
    """One call site of a job over the window, across its ranks: the calls of one operation
    made from one place in the program (its frames joined across ranks by build-id and
    offset, never by the ranks' own site ids)."""

    key: str = Field(description="the site's stable key: layer, op and its frames")
    label: str = Field(
        description="where, in short: 'solver.c:212', 'solve+0x1f', "
        "'libfoo.so+0x1234', 'libfoo.so+0x1234 (not resolved yet)', or "
        "'<other call sites>' (the overflow)"
    )
    layer: Literal["mpi", "posix", "stdio"]
    op: str
    frames: list[CallsiteFrame] = Field(description="empty for the overflow")
    calls: int
    bytes: int
    time_ns: int
    share: float = Field(
        description="of the job's time in its layer over the window (MPI "
        "time for an MPI site, file I/O time for a POSIX or stdio site)"
    )
    mean_bytes: float = Field(description="bytes per call")
    min_bytes: int = Field(description="the smallest call's size bucket, its lower bound")
    max_bytes: int = Field(description="the largest call's size bucket, its upper bound")
    ranks: int = Field(description="ranks that called from this site")
    most_time_rank: int = Field(description="the rank with the most time at this site")
    most_time_ns: int
    imbalance: float = Field(
        description="the most time of a rank over the mean time of the "
        "ranks that called from here (1 = even)"
    )


class JobCallsites(ApiModel):
    """A job's call sites over the window, heaviest time first (one page)."""

    job: str
    from_ns: int | None
    to_ns: int | None
    mpi_time_ns: int = Field(description="the job's time inside MPI at every site")
    io_time_ns: int = Field(description="the job's time in POSIX and stdio calls at every site")
    sites: list[Callsite]
    page: PageInfo
    run: int | None = _run_asked()


class SeriesPoint(ApiModel):
    """The values of one key (a rank, op, category, file or peer) in one step."""

    t_ns: int = Field(description="start of the step: from_ns + i * step_ns")
    key: str = Field(description="rank number, op name, category, 'layer:path' or peer rank")
    values: list[int] = Field(description="one per name of the series' `metrics`")


class Series(ApiModel):
    """Values per step of a job over a window (`GET /api/jobs/{job}/series`): every
    interval whose end lies in [t, t + step) is in the step starting at t; sums are exact
    (integers); keys with nothing in a step are left out of it."""

    job: str
    by: str = Field(description="what the keys are: rank, op, category, file or peer")
    from_ns: int = Field(description="start of the first step (the window's start)")
    to_ns: int = Field(description="end of the window (exclusive)")
    step_ns: int
    metrics: list[str] = Field(description="names of each point's values, in order")
    points: list[SeriesPoint] = Field(description="by step, then key")
    run: int | None = _run_asked()


class RankShare(ApiModel):
    """Where one rank's time went during one step (ns): inside MPI by category, in file
    I/O, and the rest (computation); start-up (MPI_Init*) and shutdown (MPI_Finalize)
    apart."""

    t_ns: int
    rank: int
    elapsed_ns: int = Field(description="the time the rank's intervals ending in the step cover")
    mpi_ns: dict[str, int] = Field(description="per traffic category, start-up excluded")
    io_ns: int = Field(description="POSIX and stdio read, write and metadata time")
    startup_ns: int = Field(
        description="inside MPI_Init / MPI_Init_thread: before the rank's first interval "
        "(its clock starts once MPI_Init has returned), so not part of elapsed_ns"
    )
    shutdown_ns: int = Field(description="inside MPI_Finalize")
    compute_ns: int = Field(
        description="elapsed - MPI - I/O - shutdown (0 when they exceed it: time inside a "
        "call is counted in the interval it returns in)"
    )


class Outlier(ApiModel):
    """A rank that stands out over the window (server/jobs/profile.py): *late* (far more
    time outside MPI than the other ranks: it arrives last, the others wait for it) or
    *waiting* (far more time inside MPI)."""

    rank: int
    role: Literal["late", "waiting"]
    what: str = Field(
        description="where the excess lies: 'computation' or 'file I/O' (late), "
        "'inside MPI' (waiting)"
    )
    time_ns: int = Field(description="the rank's time there over the window")
    median_ns: int = Field(description="the median of the other ranks' time there")
    excess_ns: int = Field(description="time_ns - median_ns")
    share: float = Field(description="excess_ns over the window's elapsed time (median rank)")
    op: str | None = Field(
        description="late: the operation it arrives last at (where the others' median time "
        "inside exceeds its own most); waiting: the operation holding most of its excess"
    )
    ranks: list[int] = Field(
        description="late: the ranks that wait for it in `op`; waiting: the late ranks it "
        "waits for (empty: none is late)"
    )
    peak_t_ns: int | None = Field(
        description="the step in which it was furthest above the others; null when no step "
        "holds a share (its intervals stored no MPI call or file I/O)"
    )
    site: str | None = Field(
        default=None,
        description="the call site of `op` (late: where the ranks waiting for it wait; "
        "waiting: its own), e.g. 'solver.c:212'; null: no call sites recorded",
    )
    site_key: str | None = Field(default=None, description="that site's key in /callsites")
    text: str = Field(
        description='in one sentence, e.g. "rank 3 arrives last at MPI_Allreduce: 1.90 s '
        "more computing than the median rank (48% of the elapsed time); ranks 0–2, 4–7 "
        'wait for it"'
    )


class CommImbalance(ApiModel):
    """How unevenly the ranks of one communicator waited in its collectives."""

    comm_id: int
    comm_size: int
    op: str
    ranks: int
    min_ns: int = Field(description="least time in the op of one of its ranks")
    median_ns: int
    max_ns: int
    max_rank: int = Field(description="the rank with max_ns: it waits longest")
    min_rank: int = Field(
        description="the rank with min_ns: the least time inside, so it arrives last"
    )
    text: str = Field(description="in plain words")


class SlowRanks(ApiModel):
    """Where each rank's time went, step by step, and the ranks that stand out
    (`GET /api/jobs/{job}/profile`)."""

    job: str
    from_ns: int
    to_ns: int
    step_ns: int
    shares: list[RankShare] = Field(description="by step, then rank")
    outliers: list[Outlier] = Field(
        description="the late ranks first, then the waiting ones; each by excess, most first"
    )
    imbalance: list[CommImbalance] = Field(
        description="per communicator and op whose rank with the least time inside stands "
        "out below the others, widest first"
    )
    run: int | None = _run_asked()


# ---------------------------------------------------------------------------------------
# fabric: /api/fabric...
# ---------------------------------------------------------------------------------------


class FabricNode(ApiModel):
    """A switch, HCA or router, as last discovered."""

    guid: str = Field(description="node GUID, e.g. 0x0002c90300000001")
    name: str = Field(description="NodeDescription, e.g. leaf01 or host07")
    type: Literal["switch", "hca", "router"]
    nports: int
    lid: int
    gone: bool = Field(description="missing from the latest discovery")
    gone_ns: int | None = Field(description="when it went missing; null while present")
    last_seen_ns: int


class LinkEnd(ApiModel):
    """One end of a link: a port of a node."""

    guid: str
    port: int
    name: str = Field(description="the node's name ('' if the node is unknown)")

    def label(self) -> str:
        """`name[port]`, as fabric events write an end (the GUID if the name is unknown)."""
        return f"{self.name or self.guid}[{self.port}]"


class FabricLink(ApiModel):
    """A cable between two ports (a < b by GUID, then port)."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: Literal["up", "down"] = Field(description="down: missing from the latest discovery")
    down_ns: int | None = Field(description="when it went down; null while up")
    capacity_bytes_per_s: int | None = Field(
        description="data capacity (active width x speed; the smaller of the two ends known); "
        "null if unknown"
    )


class Topology(ApiModel):
    """Everything needed to draw the fabric: nodes (by GUID) and links (up and down)."""

    nodes: list[FabricNode]
    links: list[FabricLink]


class PortSample(ApiModel):
    """The latest counter sample of one end of a link, as stored (deltas since the
    previous sample of that port)."""

    ts_ns: int = Field(description="end of the sweep that read it")
    dt_ns: int | None = Field(description="time since the port's previous sample; null: first")
    xmit_bytes: int | None
    rcv_bytes: int | None
    xmit_pkts: int | None = Field(description="packets sent (PortXmitPkts delta)")
    rcv_pkts: int | None = Field(description="packets received (PortRcvPkts delta)")
    xmit_wait: int | None = Field(description="ticks the port had data but could not send")
    errors: dict[str, int | None] = Field(description="delta of each error counter")
    saturated: list[str] = Field(
        description="counters stuck at their maximum: their delta is unknown (null)"
    )
    reset: list[str] = Field(description="counters that went down (reset): delta unknown")


class LinkLoad(ApiModel):
    """Load and errors of one link: live (no window asked) in the latest sample of each of its
    two ends; over a window, summed over the samples of its ends whose sweep ended in it."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: Literal["up", "down"] = Field(
        description="live: as discovered last (a down link has no rate); over a window: "
        "down if it was down at the window's end"
    )
    capacity_bytes_per_s: int | None
    ts_ns: int | None = Field(description="newest sample time of the two ends; null: none")
    samples: int = Field(description="samples of its two ends used (live: 0, 1 or 2)")
    a_to_b_bytes: int | None = Field(
        description="bytes a sent (a's PortXmitData deltas summed); null if unknown"
    )
    b_to_a_bytes: int | None
    a_to_b_bytes_per_s: float | None = Field(
        description="a_to_b_bytes / the sampled time that knows them (mean rate); null if unknown"
    )
    b_to_a_bytes_per_s: float | None
    a_to_b_pkts_per_s: float | None = Field(
        description="packets a sent / the sampled time (a's PortXmitPkts); null if unknown"
    )
    b_to_a_pkts_per_s: float | None
    utilisation: float | None = Field(
        description="the busier direction's bytes/s / capacity (0..1); null if unknown"
    )
    errors: dict[str, int | None] = Field(
        description="each error counter's deltas summed over both ends; null if either end "
        "has no known delta or the counter is saturated at either end"
    )
    errors_total: int = Field(description="sum of the known error deltas")
    saturated: list[str] = Field(
        description="counters stuck at their maximum at either end (no longer counting: "
        "their errors are unknown, shown as saturated)"
    )
    unknown: list[str] = Field(
        description="counters (error counters, xmit_wait, a_to_b/b_to_a bytes) whose value "
        "is unknown"
    )
    xmit_wait: int | None = Field(description="PortXmitWait ticks of both ends; null if unknown")
    xmit_wait_per_s: float | None = Field(
        description="PortXmitWait ticks per second, both ends' rates summed; null if unknown"
    )
    a_sample: PortSample | None = Field(
        default=None,
        description="live only: latest sample of end a; null: none; left out with "
        "samples=false and over a window",
    )
    b_sample: PortSample | None = Field(default=None, description="the same of end b")


class Freshness(ApiModel):
    """How old the fabric's data is. The fabric is stale when its last sweep ended more than
    `stale_after_ns` ago: STALE_SWEEPS (3) sweep intervals (as the samples measured them; 1 s
    before any is known). A port whose newest sample is that much older than the last sweep
    stopped answering: it has no current load (null), never its last one."""

    last_sweep_ns: int | None = Field(description="end of the newest sweep; null: none yet")
    sweep_interval_ns: int | None = Field(
        description="the sweeps' interval (median of the newest samples' dt); null: unknown"
    )
    stale_after_ns: int = Field(description="the age beyond which the data is stale")
    stale: bool = Field(description="the last sweep ended more than stale_after_ns ago")


class LinkPage(ApiModel):
    """A page of the links by load or errors (`GET /api/fabric/links`), live or over a
    window."""

    links: list[LinkLoad]
    page: PageInfo
    sort: Literal["utilisation", "errors"]
    from_ns: int | None = Field(description="the window's start; null: live (newest sweep)")
    to_ns: int | None = Field(description="the window's end (exclusive); null: live")
    freshness: Freshness


class LinkStates(ApiModel):
    """Every link's state in the newest sweep, in columns (one entry per link, in the
    topology's link order)."""

    id: list[int] = Field(description="link ids, as in the topology")
    utilisation: list[float | None] = Field(description="as LinkLoad.utilisation")
    bytes_per_s: list[float | None] = Field(description="the busier direction's bytes/s")
    errors: list[int] = Field(description="as LinkLoad.errors_total")
    flags: list[int] = Field(
        description="bit 1: down; bit 2: an error counter saturated; bit 4: an error "
        "counter's delta unknown"
    )
    xmit_wait_per_s: list[float | None] = Field(
        description="as LinkLoad.xmit_wait_per_s: both ends' PortXmitWait ticks per second "
        "(congestion: data waiting to be sent); null = unknown"
    )


class FabricSummary(ApiModel):
    """Counts of the current fabric and its newest sweep."""

    nodes: int
    switches: int
    hcas: int
    gone: int = Field(description="nodes missing from the latest discovery")
    links: int
    down: int
    erroring: int = Field(description="links with errors in the last sweep")
    busiest: float | None = Field(description="highest utilisation; null: none known")


class FabricState(ApiModel):
    """What a view of the fabric needs every tick (`GET /api/fabric/state`): live (no window
    asked), computed once per sweep for every viewer (ETag: unchanged between sweeps and
    until the data turns stale); over a window, the links' loads summed over it (as
    LinkLoad over a window), e.g. a playback frame."""

    topology_etag: str = Field(
        description="ETag of GET /api/fabric/topology: changes only at a re-discovery"
    )
    ts_ns: int | None = Field(description="newest sample time used; null: no sample")
    from_ns: int | None = Field(description="the window's start; null: live")
    to_ns: int | None = Field(description="the window's end (exclusive); null: live")
    links: LinkStates
    summary: FabricSummary
    freshness: Freshness


class FabricEvent(ApiModel):
    """A fault or topology change seen by the fabric sampler, with its start and end:
    link_down (until the link is back), node_gone (until the node is back), error_burst
    (error-counter deltas > 0 at a port on consecutive sweeps; details: `counts` per error
    counter, `sweeps`, `last_ns`); link_up and node_new, a link or node seen for the first
    time, are points (end = start)."""

    id: int
    kind: Literal["link_down", "node_gone", "error_burst", "link_up", "node_new"]
    subject: str = Field(description="e.g. 'host17[1] - leaf03[1]', 'leaf03[1]' or 'host17'")
    start_ns: int = Field(description="when it began (a burst: its first erring interval's start)")
    end_ns: int | None = Field(
        description="when it ended (a burst: its last erring sweep's end); null: still open"
    )
    link_id: int | None = Field(description="the link it concerns (a burst: its port's link)")
    details: dict[str, Any]


class FabricEvents(ApiModel):
    """A page of the fabric events overlapping a window, newest start first
    (`GET /api/fabric/events`): open ones included."""

    events: list[FabricEvent]
    page: PageInfo
    from_ns: int
    to_ns: int


class FabricSeries(ApiModel):
    """Values per step of a link, a port or a node over a window (`GET /api/fabric/series`):
    each sample is in the step its sweep end lies in; bytes and error deltas are exact sums
    of the samples; rates are those bytes over the sampled time that knows them; only steps
    with a sample are listed (an empty window has none). In columns: `t_ns[i]` and
    `columns[name][i]` are step i.

    Columns of a link: samples, a_to_b_bytes, b_to_a_bytes, a_to_b_bytes_per_s,
    b_to_a_bytes_per_s, utilisation (the busier direction / capacity), xmit_wait (both
    ends), xmit_wait_per_s, then each error counter (both ends summed). Of a port or a node
    (its ports summed): samples, xmit_bytes, rcv_bytes, xmit_bytes_per_s, rcv_bytes_per_s,
    utilisation (the busier direction / capacity; a node: of its ports' capacities
    summed), xmit_wait, xmit_wait_per_s, then each error counter. Null: unknown, never 0."""

    subject: Literal["link", "port", "node"]
    name: str = Field(description="'a[p] - b[q]', 'name[port]' or the node's name")
    link_id: int | None
    guid: str | None = Field(description="the port's or node's GUID; null for a link")
    port: int | None
    capacity_bytes_per_s: int | None
    from_ns: int = Field(description="start of the first step (the window's start)")
    to_ns: int = Field(description="end of the window (exclusive)")
    step_ns: int
    resolution: Literal["samples", "10 s", "minutes"] = Field(
        description="samples: summed from the raw sweep samples; minutes (10 s): from the "
        "exact per-minute (per-10-second) rollups, and the finer rollups and raw samples "
        "of a last, partial minute (10 s)"
    )
    metrics: list[str] = Field(description="the column names, in order")
    t_ns: list[int] = Field(description="start of each step listed")
    columns: dict[str, list[int | float | None]]


# ---------------------------------------------------------------------------------------
# groups of parallel links: /api/fabric/groups (server/fabric/groups.py)
# ---------------------------------------------------------------------------------------
class GroupMember(ApiModel):
    """A member link of a group of parallel links, with its load over the window."""

    link_id: int
    name: str = Field(description="'a[p] – b[q]'")
    a: LinkEnd
    b: LinkEnd
    capacity_bytes_per_s: int | None
    a_to_b_bytes: int | None = Field(description="the a end's PortXmitData deltas summed, "
                                     "bytes; null: unknown")  # fmt: skip
    b_to_a_bytes: int | None
    a_to_b_bytes_per_s: float | None
    b_to_a_bytes_per_s: float | None
    utilisation: float | None = Field(description="the busier direction's rate / capacity")


class GroupSkew(ApiModel):
    """A group's skew per step: t_ns[i], max_mean[i], cv[i] (null: fewer than two members
    with a known load, or none loaded)."""

    t_ns: list[int]
    max_mean: list[float | None]
    cv: list[float | None]


class GroupJob(ApiModel):
    """A job on a group's busiest member: its bytes there, both directions (routed,
    modelled or measured as the link attribution says). Another user's job: `another
    job`, no id, no user."""

    job: str | None
    user: str | None
    label: str = Field(description="'job <id>' or 'another job'")
    bytes: float = Field(description="its bytes on the busiest member over the window")


class LinkGroup(ApiModel):
    """A group of parallel links (the same two switches, the uplinks of a leaf, the rails of
    a multi-HCA host) and how evenly it carried its load over the window."""

    id: int = Field(description="stable: CRC-32 of its kind and what defines it")
    kind: Literal["parallel", "uplinks", "rails"]
    name: str
    members: list[GroupMember]
    max_mean: float | None = Field(description="the members' utilisations over the window: "
                                   "max / mean (1 = even)")  # fmt: skip
    cv: float | None = Field(description="their coefficient of variation (stdev / mean)")
    busiest_link_id: int | None
    peak_max_mean: float | None = Field(description="the highest step's max / mean")
    peak_t_ns: int | None = Field(description="that step's start")
    series: GroupSkew
    jobs: list[GroupJob] | None = Field(
        default=None, description="one group (GET /api/fabric/groups/{group}): the jobs on "
        "its busiest member, most bytes first; null in the list")  # fmt: skip


class LinkGroupPage(ApiModel):
    """A page of the groups of parallel links, highest skew first (`GET /api/fabric/groups`)."""

    groups: list[LinkGroup]
    page: PageInfo
    from_ns: int
    to_ns: int
    step_ns: int
    resolution: Literal["samples", "10 s", "minutes"]


# ---------------------------------------------------------------------------------------
# placement: /api/jobs/{job}/placement (a job's hosts and links on the fabric)
# ---------------------------------------------------------------------------------------
class PlacedHost(ApiModel):
    """A host of a job's ranks and where it sits on the fabric."""

    host: str = Field(description="as its ranks reported it (STACKLENS_HOST, else host name)")
    ranks: list[int] = Field(description="world ranks on it (seen during the window)")
    match: Literal["guid", "host name", "unmatched"] = Field(
        description="guid: a node GUID its hooks read from the local HCA (sysfs) is an HCA "
        "of the fabric; host name: an HCA's node description names it; unmatched: neither "
        "(listed, with no ports)"
    )
    ports: list[LinkEnd] = Field(description="its HCA ports on the fabric (node GUID, port)")


class PlacedLink(ApiModel):
    """A link a job's hosts sit on or its inter-host traffic can cross, with its load over
    the window (from the stored fabric samples; null = unknown, never 0)."""

    id: int
    a: LinkEnd
    b: LinkEnd
    state: Literal["up", "down"]
    capacity_bytes_per_s: int | None
    kind: Literal["host", "candidate"] = Field(
        description="host: an HCA port of a job host to its switch; candidate: a "
        "switch-to-switch link on a shortest path between two job hosts' switches (a "
        "topological candidate: the forwarding tables may route a flow elsewhere)"
    )
    hosts: list[str] = Field(description="the job hosts on it (host links)")
    samples: int = Field(description="samples of its two ends overlapping the window")
    a_to_b_bytes: int | None = Field(description="bytes end a sent over the window")
    b_to_a_bytes: int | None
    a_to_b_bytes_per_s: float | None = Field(description="mean rate a -> b over the window")
    b_to_a_bytes_per_s: float | None
    utilisation: float | None = Field(description="the busier direction's mean rate / capacity")
    peak_utilisation: float | None = Field(
        description="the highest one-sweep rate of either direction / capacity"
    )
    xmit_wait: int | None = Field(description="PortXmitWait ticks of both ends over the window")
    xmit_wait_per_s: float | None = Field(description="PortXmitWait ticks per second")


class JobPlacement(ApiModel):
    """A job's ranks -> hosts -> HCA ports -> links on the current fabric, with the links'
    load during the job's window."""

    job: str
    from_ns: int = Field(description="the window's start (the job's first interval start)")
    to_ns: int = Field(description="the window's end, exclusive (its last interval end + 1)")
    crossed: Literal["topological candidates"] = Field(
        description="how the crossed switch-to-switch links were found: from the topology "
        "alone (every shortest path between the job's switches), not per flow over the "
        "forwarding tables"
    )
    hosts: list[PlacedHost] = Field(description="by host name; unmatched ones included")
    links: list[PlacedLink] = Field(description="by link id")
    run: int | None = _run_asked()


# ---------------------------------------------------------------------------------------
# traffic: which job and which category is on each link (server/traffic/, docs/attribution.md)
# ---------------------------------------------------------------------------------------

#: Traffic categories of attributed traffic: stacklens.constants.ON_LINKS, written out for
#: the type checker (tests/test_constants.py holds both equal).
TrafficCategory = Literal["mpi_p2p", "mpi_coll", "mpi_rma", "io"]
#: How a figure was obtained: measured (a counter), routed (a flow the hooks measured,
#: placed on links by the forwarding tables), modelled (a collective algorithm's pattern).
Provenance = Literal["measured", "routed", "modelled"]
#: How the fabric forwards (STACKLENS_FABRIC_PATHS).
PathMode = Literal["fixed", "parallel", "adaptive"]


class AttributedBytes(ApiModel):
    """Bytes of one job and traffic category on one link direction."""

    job: str | None = Field(description="the job's id; null: another job (not the viewer's)")
    user: str | None = Field(description="the job's user; null for another job")
    category: TrafficCategory
    bytes: float = Field(description="bytes over the window (a fraction when split by a group)")
    provenance: Provenance
    path: Literal["fixed", "group"] = Field(
        description="fixed: the forwarding tables fix this link; group: the flow was assigned "
        "to a group of parallel (or adaptive) links and split by their measured bytes"
    )


class LinkDirectionAttribution(ApiModel):
    """One direction of a link: measured bytes, what is attributed, and `other`."""

    direction: Literal["a_to_b", "b_to_a"]
    measured_bytes: int | None = Field(
        description="the sending end's xmit bytes over the samples of the window (provenance "
        "measured); null: no known sample"
    )
    samples: int = Field(description="samples of the sending end in the window")
    unknown_samples: int = Field(description="of them, with an unknown delta (first, reset)")
    attributed_bytes: float
    other_bytes: float | None = Field(
        description="measured - attributed, as it is (negative allowed, never clamped; "
        "provenance measured); null when measured is unknown"
    )
    by_job: list[AttributedBytes] = Field(description="by job (another job last), category")


class LinkAttribution(ApiModel):
    """A link's measured bytes per direction split into job x category, and `other`."""

    link: FabricLink
    from_ns: int | None
    to_ns: int | None
    paths: PathMode = Field(description="how the fabric forwards (STACKLENS_FABRIC_PATHS)")
    directions: list[LinkDirectionAttribution]
    left_out: dict[str, int] = Field(
        description="bytes of every job's transfers in the window that are on no link, by "
        "reason: intra_host, off_fabric, no_route, local_io, unknown_rank, "
        "unmodelled_collective"
    )


class LinkAttributionPoint(ApiModel):
    """One step of a link's attribution series."""

    t_ns: int = Field(description="the step's start; it holds [t_ns, t_ns + step_ns)")
    directions: list[LinkDirectionAttribution]


class LinkAttributionSeries(ApiModel):
    """A link's attribution per step of the window (each step as LinkAttribution's)."""

    link: FabricLink
    from_ns: int
    to_ns: int
    step_ns: int
    paths: PathMode
    points: list[LinkAttributionPoint]


class NodeJob(ApiModel):
    """One job's traffic at a node over a window (all categories, attributed as on links)."""

    job: str | None = Field(description="null: jobs the viewer may not read, summed")
    user: str | None
    hosts: list[str] = Field(
        description="the job's hosts placed on this node (an HCA), by name; empty for a "
        "switch and for jobs the viewer may not read"
    )
    bytes_out: float = Field(description="the job's bytes over the node's links leaving it")
    bytes_in: float = Field(description="the job's bytes over the node's links into it")


class NodeJobs(ApiModel):
    """The jobs on a node over a window: those whose traffic is routed over its links, and
    (an HCA) those with a rank on a host placed on it; busiest first, then by job."""

    node: FabricNode
    from_ns: int | None
    to_ns: int | None
    paths: PathMode = Field(description="how the fabric forwards (STACKLENS_FABRIC_PATHS)")
    jobs: list[NodeJob]


class RailBytes(ApiModel):
    """A job's bytes on one link direction that left from one rail (HCA) of a host, of one
    provenance."""

    host: str
    rail: int = Field(description="the rail's index on its host (devices in rail order)")
    device: str = Field(description='its device ("mlx5_1"), empty when its node names none')
    provenance: Provenance
    bytes: float = Field(description="bytes over the window (a fraction when split by a group)")


class JobLinkBytes(ApiModel):
    """A job's bytes on one link direction, by traffic category and by the rail they left
    from."""

    id: int = Field(description="link id")
    a: LinkEnd
    b: LinkEnd
    direction: Literal["a_to_b", "b_to_a"]
    bytes: float = Field(description="the job's bytes on it, all categories")
    measured_bytes: int | None = Field(description="the link direction's measured bytes")
    categories: list[AttributedBytes]
    rails: list[RailBytes] = Field(
        description="the same bytes by the sending host's rail and provenance"
    )


class RailProvenance(ApiModel):
    """A rail's bytes of one provenance."""

    provenance: Provenance
    sent_bytes: int
    received_bytes: int


class JobRail(ApiModel):
    """One rail (HCA) of a host of the job: the ranks bound to it and the job's bytes that
    left and arrived on it between hosts (docs/families.md, "Ranks on rails")."""

    host: str
    rail: int = Field(description="index on its host, devices in rail order")
    device: str = Field(description='its device ("mlx5_0"), empty when its node names none')
    guid: str = Field(description="its HCA's node GUID")
    ranks: list[int] = Field(description="world ranks bound to it (any run of the window)")
    pinned: list[int] = Field(
        description="of those, the ranks bound by the devices their MPI was told to use "
        "(the others by local rank round-robin)"
    )
    sent_bytes: int
    received_bytes: int
    provenance: list[RailProvenance]


class JobLinks(ApiModel):
    """The links a job's inter-host traffic crossed over the window, with its bytes on each
    by category (one page, by link id then direction)."""

    job: str
    from_ns: int | None
    to_ns: int | None
    paths: PathMode
    collectives: Literal["measured", "mixed", "modelled"] = Field(
        description="where the job's collective bytes on the network come from: measured "
        "(the MPI's monitored traffic) in every run, in some (mixed), or modelled"
    )
    links: list[JobLinkBytes]
    rails: list[JobRail] = Field(
        description="every rail of the job's hosts placed on the fabric, by host then rail"
    )
    page: PageInfo
    left_out: dict[str, int] = Field(description="the job's bytes on no link, by reason")
    run: int | None = _run_asked()


# communicator families: /api/jobs/{job}/families (server/families)
# ---------------------------------------------------------------------------------------

FamilyReach = Literal["host", "leaf", "spine", "unplaced"]


class FamilyGroup(ApiModel):
    """One communicator of a family, with its members."""

    run: int = Field(description="runs.id of the run it belongs to")
    comm_id: int = Field(description="communicator id (as the collectives list it)")
    members: list[int] = Field(description="world ranks, by rank in the communicator")


class FamilyOp(ApiModel):
    """One MPI operation on a family's communicators over the window."""

    op: str
    kind: Literal["collective", "p2p"]
    calls: int = Field(
        description="collective: calls summed over the ranks; p2p: messages (sends for a "
        "send, receives for a receive)"
    )
    bytes: int = Field(description="collective: bytes the ranks handed to it; p2p: as `calls`")
    time_ns: int = Field(description="time inside the calls, summed over the ranks")


class FamilyReachBytes(ApiModel):
    """Bytes of a family that stay in a host, cross one leaf switch, cross the spine, or go
    between hosts the fabric does not place; and how they are known."""

    reach: FamilyReach
    provenance: Provenance = Field(
        description="routed: measured point-to-point bytes placed by the hosts and routes; "
        "modelled: a collective's bytes from its algorithm model"
    )
    bytes: int


class CommFamily(ApiModel):
    """A communicator family: the communicators one creating call made (or of one name),
    how, its traffic and time over the window, and where its bytes go."""

    family: str = Field(
        description="key: world, name:<name>, call:<family id>, or 'not described' (traffic "
        "of communicators without a description)"
    )
    label: str = Field(
        description="as a person reads it: the MPI_Comm_set_name name (the name wins), else "
        "how it was made, its call site (file:line, else function+offset, else module+offset) "
        "and shape, e.g. 'split at solver.c:88, 4 groups of 8', 'cart 4×8 dim 1 kept', "
        "'dup of world', 'graph at x.c:40', 'world'"
    )
    made: str = Field(
        description="world, split, split_type, cart_create, cart_sub, create, create_group, "
        "dup, intercomm_create, intercomm_merge, graph, from_group; 'not described'"
    )
    name: str | None = Field(description="MPI_Comm_set_name's name; the name wins")
    grid: str | None = Field(description="the Cartesian grid, e.g. 2x4")
    kept_dims: list[int] = Field(description="Cart_sub: the dimensions kept")
    site: str | None = Field(
        description="call site as module+offset, unresolved (the label resolves it); null if "
        "unknown"
    )
    groups_total: int = Field(description="communicators in the family")
    groups: list[FamilyGroup] = Field(description="the first 64 communicators")
    ops: list[FamilyOp] = Field(description="heaviest time first")
    bytes: int
    time_ns: int
    reach: list[FamilyReachBytes]
    unmodelled_bytes: int = Field(
        description="collective bytes no model places (no model of the op, or a "
        "communicator whose members are not all described)"
    )


class JobFamilies(ApiModel):
    """A job's communicator families over the window (one page, heaviest time first)."""

    job: str
    from_ns: int | None
    to_ns: int | None
    families: list[CommFamily]
    page: PageInfo
    run: int | None = _run_asked()


class FamilyLinkShare(ApiModel):
    """Bytes of one family on one link direction."""

    family: str
    label: str
    bytes: float = Field(description="bytes over the window (a fraction when split by a group)")
    provenance: Provenance
    path: Literal["fixed", "group"]


class FamilyLinkBytes(ApiModel):
    """A job's bytes on one link direction, by family."""

    id: int = Field(description="link id")
    a: LinkEnd
    b: LinkEnd
    direction: Literal["a_to_b", "b_to_a"]
    bytes: float = Field(description="the job's bytes on it, every family")
    measured_bytes: int | None = Field(description="the link direction's measured bytes")
    families: list[FamilyLinkShare]


class JobFamilyLinks(ApiModel):
    """The links a job's families crossed over the window (one page, by link id then
    direction), routed over the forwarding tables like /links."""

    job: str
    from_ns: int | None
    to_ns: int | None
    paths: PathMode
    links: list[FamilyLinkBytes]
    page: PageInfo
    left_out: dict[str, int] = Field(description="the families' bytes on no link, by reason")
    run: int | None = _run_asked()


# a job's cards at once: /api/overview (server/jobs/sections, presentation/cards.py)
# ---------------------------------------------------------------------------------------


class JobDetails(ApiModel):
    """Every job card's data of one job (presentation/cards.py): the answers of its
    endpoints, one per card; a section the server could not read is null, and `errors`
    says why."""

    job: str
    matrix: Matrix | None = None
    ops: JobOps | None = None
    io: JobIo | None = None
    collectives: JobCollectives | None = None
    sizes: JobSizes | None = None
    rma: JobRma | None = None
    ranks: JobRanks | None = None
    runs: JobRuns | None = None
    callsites: JobCallsites | None = None
    families: JobFamilies | None = None
    errors: dict[str, str] = Field(
        default_factory=dict,
        description="why a section is null, by section (absent: it was read)",
    )


class Overview(ApiModel):
    """The Jobs page in one answer (`GET /api/overview`): a page of the job list and the
    first page of every section of the detailed job."""

    jobs: JobList = Field(description="a page of the job list, as GET /api/jobs answers")
    shown: JobDetails | None = Field(
        description="the detailed job; null: it is unknown, or no job was asked for and the "
        "list is empty"
    )


# incidents: /api/incidents (server/incidents)
# ---------------------------------------------------------------------------------------

IncidentKind = Literal[
    "congestion",
    "link_errors",
    "link_flap",
    "imbalance",
    "mpi_slowdown",
    "io_stall",
    "regression",
]
Severity = Literal["minor", "major", "critical"]
Role = Literal["aggressor", "victim", "on link"]


class IncidentLink(ApiModel):
    """A link of an incident, with the signal on it and its evidence series."""

    id: int = Field(description="fabric link id")
    a: LinkEnd | None
    b: LinkEnd | None
    capacity_bytes_per_s: int | None
    signals: list[str] = Field(description="detector kinds on this link")
    peak: float = Field(description="congestion: level over its threshold (1 = at it); "
                        "errors: most errors in a sweep; flap: down/up events")  # fmt: skip
    evidence: list[dict[str, Any]] = Field(
        description="per sweep: t_ns, utilisation, xmit_wait_per_s, errors, down (null = "
        "unknown); a flap: the event times; an imbalance: per sweep t_ns, this member's "
        "utilisation, the group's max_mean and cv"
    )
    group: dict[str, Any] | None = Field(
        default=None, description="an imbalance: its group of parallel links (id, kind, name)"
    )
    busiest: bool | None = Field(
        default=None, description="an imbalance: whether this member carried the most"
    )


class IncidentCallsite(ApiModel):
    """A call site of a job of an incident whose time rose during its signal: the site as
    the job's call-site table names it (GET /api/jobs/{job}/callsites: `key`, `label`),
    its time there and before, by how much it rose."""

    signal: str = Field(description="the job's signal whose kind of waiting it is")
    key: str = Field(description="the site's key in the job's call-site table")
    label: str = Field(description="file:line (innermost frame first), else function+offset "
                       "or module+offset, as the call-site table says")  # fmt: skip
    layer: str = Field(description="mpi, posix or stdio")
    op: str = Field(description="the function called there")
    time_ns: int = Field(description="time at the site over the steps the signal held, "
                         "summed over ranks")  # fmt: skip
    calls: int
    before_time_ns: int = Field(description="time at the site over the baseline window before")
    before_calls: int
    rise_ns_per_s: int = Field(description="time at the site per second during, less that "
                               "before (ns/s, summed over ranks)")  # fmt: skip
    share: float = Field(description="its share of the rises of every site whose time rose")
    most_time_rank: int = Field(description="the rank with the most time at the site during: "
                                "often a rank that waits there for a late one, not the late "
                                "rank itself (the call-site table's most_time_rank)")  # fmt: skip


class IncidentJob(ApiModel):
    """A job of an incident. Another user's job is shown as `another job` and nothing else
    (`job`, `user`, ranks, files, bytes and evidence are then null or empty)."""

    role: Role = Field(
        description="aggressor: the most bytes on the links (likely cause); victim: its MPI "
        "or I/O time per byte rose; on link: crosses it"
    )
    visible: bool = Field(description="false: another user's job")
    job: str | None = Field(description="the job id; null: another job")
    user: str | None
    label: str = Field(description="'job <id>' or 'another job'")
    signals: list[str] = Field(description="its own detector kinds (mpi_slowdown, io_stall)")
    ranks: list[int] = Field(
        description="its late ranks, then its waiting ones (the job profile's rule over the "
        "incident's window), then those with the most time blocked in MPI calls that wait "
        "or in I/O"
    )
    files: list[str] = Field(description="`layer:path` of its I/O stall or of the aggressor's")
    link_bytes: int | None = Field(
        description="its bytes on the incident's links during it (routed); null: unknown"
    )
    evidence: dict[str, Any] = Field(
        description="per signal kind: baseline_per_byte_ns, peak_factor, lost_ns (the time "
        "it lost, per rank), unobserved_ns (ended unobserved: the job's last interval), "
        "ranks (its late and waiting ranks: rank, role, op, text), the series of its steps "
        "during the incident (those that end after its start, as the links' sweeps: t_ns, "
        "time_ns, bytes, per_byte_ns, baseline_per_byte_ns, waiting_ns: the time "
        "blocked by what it waited for, an MPI slowdown's p2p, coll, completion, rma, an I/O "
        "stall's per op class mpiio_read, mpiio_write, posix_read, posix_write, stdio_read, "
        "stdio_write), waiting_ns summed over the steps it held and waits_in, the kind with "
        "the most, and callsites (as the field callsites)"
    )
    callsites: list[IncidentCallsite] = Field(
        default_factory=list,
        description="its call sites of its signals' kinds of waiting whose time rose during "
        "them, the largest rise first (each a link to its job's call-site table over the "
        "incident's window)",
    )


class IncidentSummary(ApiModel):
    """An incident as listed."""

    id: int
    kind: IncidentKind = Field(description="the signal that opened it")
    severity: Severity
    title: str = Field(description="the cause and the place")
    summary: str = Field(description="one line with the jobs as this viewer may see them")
    open: bool
    start_ns: int
    end_ns: int | None = Field(description="null while open")
    detected_ns: int
    updated_ns: int
    unobserved_ns: int | None = Field(
        description="ended unobserved: the last time its signals could be observed (its job "
        "ended, the fabric stopped being swept), nobody knows whether it cleared; null: open, "
        "or its end was observed"
    )
    lost_ns: int = Field(
        description="time its jobs lost: per job hit, its waiting beyond its own baseline "
        "averaged over its ranks (about how much longer it ran), summed over the jobs"
    )
    hit: int = Field(description="jobs hit: its jobs with a signal of their own")
    signals: list[str] = Field(description="every detector kind it joins")
    link_ids: list[int]
    jobs: int = Field(description="jobs involved (visible or not)")


class IncidentDetails(IncidentSummary):
    """One incident with its links, jobs and evidence."""

    links: list[IncidentLink]
    members: list[IncidentJob]


class IncidentList(ApiModel):
    """A page of incidents, newest start first."""

    incidents: list[IncidentSummary]
    page: PageInfo


# ---------------------------------------------------------------------------------------
# run comparison: /api/compare...
# ---------------------------------------------------------------------------------------


class SideBySide(ApiModel):
    """One item of either run (a call site, a communicator family, a file, ...) matched
    across the two runs: its time, calls and bytes summed over the ranks on each side as
    each run's own page shows them (a side without it: 0), and the change of time."""

    label: str = Field(description="the item as each run's page names it")
    present: Literal["both", "a", "b"] = Field(description="the runs that have it")
    a_ns: int = Field(description="time in it in run a, summed over ranks")
    b_ns: int
    delta_ns: int = Field(description="b_ns - a_ns")
    delta_pct: float | None = Field(description="delta_ns over a_ns, %; null when a_ns is 0")
    a_calls: int
    b_calls: int
    a_bytes: int
    b_bytes: int


class FamilyDifference(SideBySide):
    """One communicator family of either run (matched across the runs by its label, as the
    job page's Communicator families card names it), its time, calls and bytes summed over
    the ranks on each side as each run's card shows them (a side without it: 0)."""

    label: str = Field(
        description="the family as the card names it: 'world', 'rows', "
        "'split at solver.c:88, 4 groups of 8', ..."
    )


class FileDifference(SideBySide):
    """One file of either run's program-phase I/O (every layer: POSIX, stdio, MPI-IO),
    its time (read + write + metadata), read and write calls and bytes read and written,
    summed over the ranks on each side as each run's File I/O card shows them (a side
    without it: 0)."""

    label: str = Field(description="the file's path")


class SizeDifference(ApiModel):
    """Messages of one MPI operation in one log2 size bucket in each run, summed over the
    ranks, as each run's message-size card shows them (a side without: 0)."""

    op: str
    bucket: int = Field(description="0 = empty messages, b = [2^(b-1), 2^b) bytes")
    lower_bytes: int
    upper_bytes: int = Field(description="exclusive")
    a_messages: int
    b_messages: int
    delta: int = Field(description="b_messages - a_messages")


class LateRank(ApiModel):
    """The late rank of a run: the rank its profile (GET /api/jobs/{job}/profile?run=, over
    the run's whole life) names late first — it arrives last, the others wait for it."""

    rank: int
    host: str | None = Field(description="the host it ran on")
    op: str | None = Field(description="the operation it arrives last at")
    site: str | None = Field(description="that operation's call site where the others wait")
    excess_ns: int = Field(description="its time outside MPI beyond the median rank's")
    share: float = Field(description="excess_ns over the run's elapsed time (median rank)")
    ranks: list[int] = Field(description="the ranks that wait for it")
    text: str = Field(description="as its profile says it, in one sentence")


class ContextIncident(ApiModel):
    """An incident whose time overlaps a run's (one the viewer may read)."""

    id: int
    kind: str
    severity: str
    start_ns: int
    end_ns: int | None
    summary: str


class RunContext(ApiModel):
    """Where a run sat on the fabric and what else happened there during it: its placement
    (GET /api/jobs/{job}/placement over the run's time), the load of the links it used and
    the incidents during it. Figures unknown (no fabric sample) are null, never 0."""

    from_ns: int = Field(description="the run's start")
    to_ns: int = Field(description="the run's end (exclusive)")
    hosts: int = Field(description="hosts of the run's ranks")
    placed_hosts: int = Field(description="of them, hosts placed on the fabric")
    leaves: list[str] = Field(description="the switches the run's hosts are cabled to, by name")
    links: int = Field(
        description="links the run's placement lists: its hosts' own links "
        "and the switch-to-switch links on a shortest path between them"
    )
    crossed_links: int = Field(description="switch-to-switch links among them")
    link_bytes: int | None = Field(
        description="bytes sent on those links during the run, "
        "both directions, measured (every job's and management)"
    )
    xmit_wait: int | None = Field(
        description="PortXmitWait ticks on those links' ends during the run, summed"
    )
    used_links: int = Field(
        description="link directions the run's own traffic crossed "
        "(its attribution: measured flows routed, collectives modelled)"
    )
    own_bytes: float = Field(description="the run's own bytes on those link directions")
    other_job_bytes: float = Field(
        description="other jobs' attributed bytes on the link "
        "directions the run's traffic crossed, during the run"
    )
    other_jobs: int = Field(description="jobs besides this one with bytes on them")
    incidents: list[ContextIncident] = Field(
        description="incidents overlapping the run, oldest first"
    )


class ComparedRun(ApiModel):
    """One side of a comparison: a run, or the median of the runs of a program before one."""

    job: str | None = Field(description="null for a median of several runs")
    owner: str | None
    run: int | None = Field(description="the run's ordinal in its job; null for a median")
    runs: int = Field(description="runs this side stands for (1, or the runs of the median)")
    command: str
    exe_path: str | None = Field(
        default=None,
        description="its executable's path (/proc/self/exe: an interpreter's for a script); "
        "null: not known (a median: run b's, the program's)",
    )
    build_id: str | None = Field(
        default=None,
        description="its executable's GNU build-id (hex); null: none known (a median: its "
        "runs' when they all have that one)",
    )
    world_size: int
    status: str | None
    started_ns: int | None
    from_ns: int | None = Field(
        default=None,
        description="the start of the window of the run compared (its intervals that "
        "ended in [from_ns, to_ns)); null: from the run's start",
    )
    to_ns: int | None = Field(default=None, description="the window's end; null: to the run's end")
    elapsed_ns: int = Field(
        description="the run's elapsed time, or the part of it inside the window"
    )
    hosts: list[str]
    parts: dict[str, int] = Field(
        description="where the elapsed time went, per rank on average, ns: each MPI "
        "operation (start-up and MPI-IO apart), 'file I/O on <path>', 'computation'"
    )
    context: RunContext | None = Field(
        default=None,
        description="placement, the load of its links and incidents during it (a median "
        "side: those of the run with the median elapsed time)",
    )
    late: LateRank | None = Field(
        default=None,
        description="its late rank; null: no rank stands out late (a median side: that of "
        "the run with the median elapsed time)",
    )


class RunDifference(ApiModel):
    """One part of the elapsed time that differs between the two sides (b - a, per rank)."""

    name: str
    kind: Literal["op", "file", "computation"]
    a_ns: int
    b_ns: int
    delta_ns: int
    share: float | None = Field(
        description="delta_ns over the elapsed-time difference; null when that is 0"
    )
    a_bytes: int | None = Field(description="operations: bytes summed over ranks")
    b_bytes: int | None
    a_calls: int | None = Field(description="operations: calls summed over ranks")
    b_calls: int | None


class ClassDifference(ApiModel):
    """The time of one class of the elapsed time on each side, per rank on average: an MPI
    traffic category (point-to-point, collective, wait/test, RMA, other), file I/O, or
    computation. The classes add up to the parts."""

    name: str = Field(description="'collective', 'point-to-point', 'file I/O', ...")
    a_ns: int
    b_ns: int
    delta_ns: int = Field(description="b_ns - a_ns")
    share: float | None = Field(
        description="delta_ns over the elapsed-time difference; null when that is 0"
    )


class SiteDifference(SideBySide):
    """One call site of either run (matched across the runs by its layer, operation and
    frames: file, line and function where resolved, else build-id and offset), its time,
    calls and bytes summed over the ranks on each side, as each run's call sites show
    them (a side without it: 0)."""

    label: str = Field(description="where, in short: 'solver.c:212', 'solve+0x1f', ...")
    path: str = Field(description="its frames in full, innermost first")
    layer: Literal["mpi", "posix", "stdio"]
    op: str


class Comparison(ApiModel):
    """Run b against run a (or against the median of b's history), in plain words first."""

    finding: str = Field(description="the difference in one sentence, largest parts first")
    a: ComparedRun
    b: ComparedRun
    differences: list[RunDifference] = Field(description="largest change first")
    classes: list[ClassDifference] = Field(
        default_factory=list,
        description="the time per class (MPI traffic category, file I/O, computation) of "
        "both sides, the largest change first",
    )
    sites: list[SiteDifference] = Field(
        description="the call sites of either run, the largest absolute change of time first "
        "(at most the `sites` asked)"
    )
    sites_total: int = Field(description="call sites of either run in all")
    families: list[FamilyDifference] = Field(
        default_factory=list,
        description="the communicator families of either run, the largest absolute change "
        "of time first",
    )
    sizes: list[SizeDifference] = Field(
        default_factory=list,
        description="the message-size histograms of both runs side by side: per operation "
        "and size bucket of either, the op with the most messages first, buckets upwards",
    )
    files: list[FileDifference] = Field(
        default_factory=list,
        description="the files of either run's I/O, the largest absolute change of time first",
    )
    late_moved: bool | None = Field(
        default=None,
        description="whether run b's late rank is another rank than run a's; null when "
        "either has none",
    )


class HistoryRun(ApiModel):
    """One run of a program's history."""

    job: str
    owner: str
    run: int
    status: str
    started_ns: int
    elapsed_ns: int
    mpi_share: float = Field(description="time inside MPI per rank over the elapsed time")
    io_share: float = Field(description="time in file I/O per rank over the elapsed time")
    build_id: str | None = Field(
        description="its executable's GNU build-id (hex); null: none known"
    )
    same_build: bool = Field(
        description="of the listed run's build (the same build-id, or either unknown): the "
        "runs a comparison with the history's median uses"
    )
    rebuilt: bool = Field(
        description="its build-id differs from that of the program's run before it (both "
        "known): the first run of a new build, a new segment of the history"
    )


class RunHistory(ApiModel):
    """A run and the runs of the same program before it (same executable path and
    arguments and world size, among the runs the viewer may read; of every build, each run
    saying whether it is of the run's build and whether it starts a new one), newest
    first: the run itself first."""

    command: str
    exe_path: str | None = Field(
        default=None,
        description="the run's executable's path (/proc/self/exe: an interpreter's for a "
        "script, whose arguments then name it); null: not known",
    )
    world_size: int
    build_id: str | None = Field(description="the run's executable's build-id; null: unknown")
    runs: list[HistoryRun]


# ---------------------------------------------------------------------------------------
# the deployment: /api/deployment (server/metrics, stacklens/modes.py)
# ---------------------------------------------------------------------------------------
class Deployment(ApiModel):
    """How this deployment proves who sends and who reads, and how many users sent runs
    lately (a number over every user's runs: it names nobody)."""

    ingest: str = Field(
        description="how senders are proven (STACKLENS_INGEST_AUTH): proven | trusted; off: "
        "this server runs no collector"
    )
    auth: str = Field(
        description="how readers are proven (STACKLENS_AUTH_MODE): none | proxy | oidc"
    )
    senders: int | None = Field(
        description="distinct users the runs seen in the last `senders_window_s` seconds name "
        "(in trusted mode claimed, not proven); null when the database did not answer"
    )
    senders_window_s: int
    warning: str | None = Field(
        description="trusted ingest with more than one user sending: what that allows; null "
        "otherwise"
    )
