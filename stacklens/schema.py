"""The storage schema: SQLAlchemy models of every stored series (migrations mirror them).

Units: bytes, ns timestamps since the Unix epoch (UTC). Delta tables hold per-interval
deltas exactly as the hooks sent them, so sums over any window are exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Identity,
    Index,
    Integer,
    SmallInteger,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from stacklens.constants import (
    IO_COUNTERS,
    MPI_CATEGORIES,
    P2P_COUNTERS,
    PORT_COUNTERS,
    RATE_COUNTERS,
)


class Base(DeclarativeBase):
    """Declarative base of all stacklens tables."""


class _Seen:
    """What jobs and runs record of what their ranks sent: command, user, times."""

    command: Mapped[str | None] = mapped_column(Text, doc="the first rank information seen")
    user: Mapped[str | None] = mapped_column(Text, doc="$USER of the ranks (or uid:<n>)")
    started_ns: Mapped[int] = mapped_column(BigInteger, doc="earliest interval start seen")
    last_seen_ns: Mapped[int] = mapped_column(BigInteger, doc="latest interval end seen")
    finished_ns: Mapped[int | None] = mapped_column(BigInteger)


class Job(_Seen, Base):
    """One job (scheduler id, STACKLENS_JOB_ID, or generated) of one owner seen by a
    collector; its launches are its runs."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("owner_uid", "job_key", name="uq_jobs_owner_job_key"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    owner_uid: Mapped[int] = mapped_column(
        BigInteger,
        doc="the Unix user the job belongs to, proven by its senders (docs/identity.md); part "
        "of the job's identity: the same job id sent by another user is another job; -1 = "
        "received before owners were recorded",
    )
    job_key: Mapped[str] = mapped_column(Text, doc="scheduler or generated job id")
    world_size: Mapped[int] = mapped_column(Integer, doc="the largest world size of its runs")
    status: Mapped[str] = mapped_column(
        Text,
        doc="its runs' statuses aggregated: running, else lost, else aborted, else killed, "
        "else finished",
    )


class Run(_Seen, Base):
    """One launch inside a job: an MPI run (one mpirun / srun step; every rank sends the run
    id its rank 0 drew) or the job's one run of processes without MPI (wire run id 0)."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("job_id", "run_key", name="uq_runs_job_run_key"),
        UniqueConstraint("job_id", "ordinal", name="uq_runs_job_ordinal"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    job_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"))
    run_key: Mapped[int] = mapped_column(
        BigInteger, doc="the wire run id (two's complement); 0 = the non-MPI run"
    )
    ordinal: Mapped[int] = mapped_column(Integer, doc="1, 2, ... per job in first-seen order")
    kind: Mapped[str] = mapped_column(Text, doc="mpi | processes")
    label: Mapped[str | None] = mapped_column(Text, doc="SLURM_STEP_ID of an MPI run, if set")
    world_size: Mapped[int] = mapped_column(Integer, doc="ranks, or processes seen")
    status: Mapped[str] = mapped_column(
        Text,
        doc="running | finished (mpi: every rank sent its final frame; processes: every "
        "process seen did) | killed (mpi: a rank's final frame says it ended by a signal; "
        "processes: one did, and all have ended) | aborted (mpi: a rank called MPI_Abort) | "
        "lost (running, silent for "
        "STACKLENS_JOB_LOST_AFTER_S; running again if a frame arrives) | failed (its launch "
        "by `stacklens run` ended with a non-zero exit status before its ranks said how "
        "they ended, or none of them ever reported)",
    )
    launch_key: Mapped[int | None] = mapped_column(
        BigInteger,
        doc="the `stacklens run` launch its ranks belong to (wire launch id, two's "
        "complement); NULL when not launched by it",
    )
    ranks_expected: Mapped[int | None] = mapped_column(
        Integer, doc="the ranks its launch asked for (-np), from the launch record"
    )
    exit_code: Mapped[int | None] = mapped_column(
        Integer, doc="its launch's exit status (NULL: no launch record, or a signal ended it)"
    )
    exit_signal: Mapped[int | None] = mapped_column(
        Integer, doc="the signal that ended its launch's command, from the launch record"
    )
    forwarded_signal: Mapped[int | None] = mapped_column(
        Integer, doc="the signal `stacklens run` forwarded to the command (SIGTERM, SIGINT)"
    )
    launch_output: Mapped[str | None] = mapped_column(
        Text, doc="the last lines its launch printed (stdout and stderr), from the launch record"
    )
    exe_build_id: Mapped[str | None] = mapped_column(
        Text,
        doc="the GNU build-id of its ranks' executable (hex), the first rank information "
        "naming one; NULL: none known (no note, or sent before the hooks reported it). Part of "
        "what makes two runs the same program (server/compare)",
    )
    exe_path: Mapped[str | None] = mapped_column(
        Text,
        doc="the path of its ranks' executable (/proc/self/exe; an interpreter's for a "
        "script), the first rank information naming one; NULL: none known (sent before the "
        "hooks reported it). With the arguments, world size and build-id, what makes two "
        "runs the same program (server/compare)",
    )


class RunProcess(Base):
    """A process of a `processes` run, numbered in its run by its key (host, pid, start
    time); the number is its rank in every per-rank table."""

    __tablename__ = "run_processes"
    __table_args__ = (
        UniqueConstraint("run_id", "host", "pid", "proc_start_ns", name="uq_run_processes_key"),
    )

    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    process: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    host: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    proc_start_ns: Mapped[int] = mapped_column(BigInteger)


class Rank(Base):
    """One rank of an MPI run, or one process of a `processes` run (its number)."""

    __tablename__ = "ranks"

    # job_id is in the key only for a Citus cluster (docs/scale-out.md): a run has one job.
    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    run_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    world_rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    first_seen_ns: Mapped[int] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int] = mapped_column(BigInteger)
    finished: Mapped[bool] = mapped_column(Boolean, default=False)
    killed: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default="false", doc="its final frame: ended by a signal"
    )
    aborted: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default="false", doc="its final frame: it called MPI_Abort"
    )
    unfinalized: Mapped[bool] = mapped_column(
        Boolean,
        default=False,
        server_default="false",
        doc="its final frame: its process ended without MPI_Finalize",
    )
    abort_code: Mapped[int | None] = mapped_column(Integer, doc="MPI_Abort's error code")
    net_devices: Mapped[str | None] = mapped_column(
        Text, doc="the network devices its MPI was told to use (NAME=value; rank_info)"
    )
    keys_dropped: Mapped[int] = mapped_column(BigInteger, default=0, doc="folded into overflow")
    frames_dropped: Mapped[int] = mapped_column(BigInteger, default=0, doc="lost by the sender")
    frames_spooled: Mapped[int] = mapped_column(BigInteger, default=0, doc="went via the spool")


class ReceivedFrame(Base):
    """Ledger of committed frames: deduplicates resent frames by (job, run, rank, seq)."""

    __tablename__ = "received_frames"

    # jobs.id and runs.id, without foreign keys (a per-frame check and lock of the job's
    # row, see migration 0005): retention deletes a job's ledger rows with the job.
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    world_rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    received_ns: Mapped[int] = mapped_column(BigInteger)


class MpiOp(Base):
    """Name of each MPI operation id (synced from the MPI function spec by the collector)."""

    __tablename__ = "mpi_ops"

    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(Text)


class _RankInterval:
    """Columns every per-rank delta table starts with: whose interval the row covers.

    Delta tables are partitioned by day of `t_end_ns` (collector/store/partitions.py) and
    carry no surrogate key and no foreign key (a per-row check that triples the cost of
    COPY): retention drops their partitions before deleting jobs. Numeric tables are
    stored in the array layout (`*Frames`, one row per frame) and read through views
    (`*Delta`, one row per record); see collector/store/tables.py.
    """

    job_id: Mapped[int] = mapped_column(BigInteger, doc="jobs.id")
    run_id: Mapped[int] = mapped_column(BigInteger, doc="runs.id")
    world_rank: Mapped[int] = mapped_column(Integer, doc="or the process number (processes)")
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)


#: Table option of every delta table: range partitions on the interval end.
PARTITIONED_BY_DAY = {"postgresql_partition_by": "RANGE (t_end_ns)"}

#: Table option of the read views over array tables (not tables: never truncated/created).
VIEW = {"info": {"view": True}}

#: Columns of _RankInterval (every delta table's columns from the frame header), in order.
RANK_INTERVAL = ("job_id", "run_id", "world_rank", "t_start_ns", "t_end_ns")


def _identity(*columns: str) -> dict[str, Any]:
    return {"primary_key": [*RANK_INTERVAL[:3], "t_end_ns", *columns]}


def _frames_args(table: str) -> tuple[Any, ...]:
    return (Index(f"ix_{table}_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)


def _model(name: str, bases: tuple[type, ...], doc: str, namespace: dict[str, Any]) -> Any:
    """A mapped class whose columns are generated (typed Any: a type checker cannot list
    generated columns)."""
    return type(name, bases, {"__doc__": doc, "__module__": __name__, **namespace})


def _counters(names: Sequence[str], *, nullable: bool, prefix: str = "") -> dict[str, Any]:
    """A bigint column per counter name (prefixed), NULL allowed or not."""
    return {f"{prefix}{n}": mapped_column(BigInteger, nullable=nullable) for n in names}


# ---- per-record read views, each declared once: its array storage is generated -------
# Each `*Delta` class declares the fields of one record of a wire table; `_array_storage`
# derives the table the collector writes (one row per frame, one array per field, record
# i = element i) and migration 0005's view unnests it back into these rows.


class P2PDelta(_RankInterval, Base):
    """Point-to-point traffic of one rank to/from one peer during one interval (view)."""

    __tablename__ = "p2p_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("peer")

    peer: Mapped[int] = mapped_column(Integer, doc="peer world rank")
    bytes_sent: Mapped[int] = mapped_column(BigInteger)
    # int4 (migration 0005): counts over 2^31 are split over repeated elements of the peer.
    msgs_sent: Mapped[int] = mapped_column(Integer, doc="a peer may repeat in one interval")
    bytes_recv: Mapped[int] = mapped_column(BigInteger)
    msgs_recv: Mapped[int] = mapped_column(Integer)


class OpDelta(_RankInterval, Base):
    """Calls, bytes and time of one MPI operation on one rank during one interval."""

    __tablename__ = "op_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("op_id")

    op_id: Mapped[int] = mapped_column(SmallInteger, doc="mpi_ops.id")
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)


class OpHistDelta(_RankInterval, Base):
    """Messages of one op in one log2 size bucket (0 = empty, b = [2^(b-1), 2^b) bytes)."""

    __tablename__ = "op_hist_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("op_id", "bucket")

    op_id: Mapped[int] = mapped_column(SmallInteger)
    bucket: Mapped[int] = mapped_column(SmallInteger)
    count: Mapped[int] = mapped_column(BigInteger)


class CollDelta(_RankInterval, Base):
    """Collective calls of one rank per op and communicator during one interval."""

    __tablename__ = "coll_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("op_id", "comm_id", "root")

    op_id: Mapped[int] = mapped_column(SmallInteger)
    comm_id: Mapped[int] = mapped_column(BigInteger, doc="same on every member; 2^32-1 = overflow")
    comm_size: Mapped[int] = mapped_column(Integer)
    root: Mapped[int] = mapped_column(Integer, doc="world rank of the root, -1 when none")
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)


class RmaDelta(_RankInterval, Base):
    """One-sided calls and bytes of one rank per target and op during one interval."""

    __tablename__ = "rma_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("target", "op_id")

    target: Mapped[int] = mapped_column(Integer, doc="target world rank")
    op_id: Mapped[int] = mapped_column(SmallInteger)
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class MonitoredDelta(_RankInterval, Base):
    """Monitored traffic: what one rank sent to one peer during one interval, as the MPI's
    monitoring counts it (Open MPI's monitoring component: every PML message, collective
    internals included; wire table monitored).

    A rank whose MPI monitors has a `monitored_frames` row for every frame, with empty
    arrays when it sent nothing; a run without any row was not monitored (absent, never 0).
    """

    __tablename__ = "monitored_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("peer")

    peer: Mapped[int] = mapped_column(Integer, doc="peer world rank the messages went to")
    bytes: Mapped[int] = mapped_column(BigInteger, doc="bytes sent (PML message payloads)")
    msgs: Mapped[int] = mapped_column(BigInteger, doc="PML messages sent")


class CommP2PDelta(_RankInterval, Base):
    """Point-to-point messages of one rank on one communicator (other than MPI_COMM_WORLD)
    per op and peer during one interval (view; wire table comm_p2p): a send to its
    destination when posted, a receive from its source when completed."""

    __tablename__ = "comm_p2p_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("comm_id", "op_id", "peer", "received")

    comm_id: Mapped[int] = mapped_column(BigInteger, doc="coll's comm_id; 2^32-1 = overflow")
    op_id: Mapped[int] = mapped_column(SmallInteger)
    peer: Mapped[int] = mapped_column(Integer, doc="peer world rank, -1 in an overflow record")
    received: Mapped[int] = mapped_column(SmallInteger, doc="0: sent to the peer, 1: from it")
    msgs: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger, doc="inside blocking calls and posts")


class CallsiteDelta(_RankInterval, Base):
    """Calls, bytes and time of one rank at one call site per layer, op, communicator and
    size bucket during one interval (view; wire table callsite). The site's frames are in
    callsite_paths (site_id is the rank's own numbering)."""

    __tablename__ = "callsite_deltas"
    __table_args__ = VIEW
    __mapper_args__ = _identity("site_id", "layer", "op_id", "comm_id", "bucket")

    site_id: Mapped[int] = mapped_column(BigInteger, doc="per rank; 2^32-1 = overflow site")
    layer: Mapped[int] = mapped_column(SmallInteger, doc="0 = MPI, 1 = POSIX, 2 = stdio")
    op_id: Mapped[int] = mapped_column(
        SmallInteger, doc="mpi_ops.id (layer 0), else the io_functions.spec index"
    )
    comm_id: Mapped[int] = mapped_column(BigInteger, doc="coll's comm_id; 2^32-1 = none")
    bucket: Mapped[int] = mapped_column(SmallInteger, doc="log2 size bucket, as op_hist")
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)


def _array_storage(view: type[Base], name: str, table: str) -> Any:
    """The array-layout table behind a read view: the view's record columns as arrays of
    their types, after the same interval columns; one row per frame."""
    record = [c for c in view.__table__.columns if c.name not in RANK_INTERVAL]
    return _model(
        name,
        (_RankInterval, Base),
        f"Storage of {view.__tablename__} (array layout, one row per frame).",
        {
            "__tablename__": table,
            "__table_args__": _frames_args(table),
            "__mapper_args__": _identity(),
            **{
                c.name: mapped_column(ARRAY(c.type), nullable=c.nullable, doc=c.doc) for c in record
            },
        },
    )


#: Array columns of p2p_frames that hold several record fields one after the other, n
#: elements each (n = a row's records): one array header instead of one per field keeps a
#: 16-peer sample under 40 B on disk (migration 0033; bench/RESULTS.md).
P2P_PACKED: dict[str, tuple[str, ...]] = {
    "peer_msgs": ("peer", "msgs_sent", "msgs_recv"),
    "bytes": ("bytes_sent", "bytes_recv"),
}


class P2PFrames(_RankInterval, Base):
    """Storage of p2p_deltas (array layout, one row per frame, fields packed: P2P_PACKED):
    `peer_msgs` is peer[1..n], msgs_sent[1..n], msgs_recv[1..n]; `bytes` is
    bytes_sent[1..n], bytes_recv[1..n]. The view p2p_deltas reads them back per record."""

    __tablename__ = "p2p_frames"
    __table_args__ = _frames_args("p2p_frames")
    __mapper_args__ = _identity()

    peer_msgs: Mapped[list[int]] = mapped_column(
        ARRAY(Integer), doc="peer, msgs_sent, msgs_recv: n elements each (int4)"
    )
    bytes: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), doc="bytes_sent, bytes_recv: n elements each"
    )


OpFrames = _array_storage(OpDelta, "OpFrames", "op_frames")
OpHistFrames = _array_storage(OpHistDelta, "OpHistFrames", "op_hist_frames")
CollFrames = _array_storage(CollDelta, "CollFrames", "coll_frames")
RmaFrames = _array_storage(RmaDelta, "RmaFrames", "rma_frames")
MonitoredFrames = _array_storage(MonitoredDelta, "MonitoredFrames", "monitored_frames")
CommP2PFrames = _array_storage(CommP2PDelta, "CommP2PFrames", "comm_p2p_frames")
CallsiteFrames = _array_storage(CallsiteDelta, "CallsiteFrames", "callsite_frames")


class OwnerStorage(Base):
    """Frames stored per owner and day (of their interval end), added in the transaction
    that stores them and deleted with the day's partitions by retention: what each user has
    stored, for the bound on storage per user (collector/ingest/budget.py, StorageQuota)."""

    __tablename__ = "owner_storage"

    owner_uid: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    day: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False,
                                     doc="UTC day: t_end_ns // 86400e9")  # fmt: skip
    frames: Mapped[int] = mapped_column(BigInteger, doc="frames stored (resends not counted)")
    bytes: Mapped[int] = mapped_column(BigInteger, doc="their wire length, header included")


class _CallsiteAnswer:
    """The answer columns of a resolved call-site frame (stacklens/symbols.Site), shared
    by the collector's answers and the nodes' (after each table's key columns)."""

    quality: Mapped[str] = mapped_column(Text, doc="'line' or 'function+offset'")
    function: Mapped[str | None] = mapped_column(Text)
    function_offset: Mapped[int | None] = mapped_column(BigInteger)
    file: Mapped[str | None] = mapped_column(Text)
    line: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text, doc="why the quality is not 'line'")


#: sort_order of the columns a table declares after _CallsiteAnswer's.
_AFTER_ANSWER = 1


class CallsiteSymbol(_CallsiteAnswer, Base):
    """A call site's frame resolved by the collector's resolver (stacklens/symbols.py)
    from the module file at `module`, stored only for an answer read from the file that
    ran (quality `line` or `function+offset`). Keyed by the path too: a row serves only
    frames naming that same path, so a file claiming another binary's build-id (a build-id
    is a note anyone can write) labels only the frames of its own path, and only a user
    who can write that path can make its answer lie. Reached only through a job's own
    frames (the owner filter holds)."""

    __tablename__ = "callsite_symbols"

    module: Mapped[str] = mapped_column(Text, primary_key=True, doc="the file read")
    build_id: Mapped[str] = mapped_column(Text, primary_key=True)
    site_offset: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, autoincrement=False,
        doc="return address minus the module's load bias",
    )  # fmt: skip
    resolved: Mapped[str] = mapped_column(
        Text, sort_order=_AFTER_ANSWER, doc="where: 'server' or 'node'"
    )
    resolved_ns: Mapped[int] = mapped_column(BigInteger, sort_order=_AFTER_ANSWER, doc="when")


class CallsiteNodeSymbol(_CallsiteAnswer, Base):
    """A call site's frame resolved on the compute node by `stacklens run` (its launch
    record's `site_symbol` records): for one owner only, the one whose credential sent it,
    so what one user's node claims never labels another user's call sites. Read before
    `callsite_symbols` for that owner's jobs."""

    __tablename__ = "callsite_node_symbols"

    owner_uid: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    build_id: Mapped[str] = mapped_column(Text, primary_key=True)
    site_offset: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, autoincrement=False,
        doc="return address minus the module's load bias",
    )  # fmt: skip
    resolved_ns: Mapped[int] = mapped_column(
        BigInteger, sort_order=_AFTER_ANSWER, doc="when it arrived"
    )


class CallsiteFallback(Base):
    """A frame (module path, build-id, offset) the collector's resolver could not read for
    the jobs of one owner (file missing, not readable by that owner, rebuilt, stripped of
    every symbol): the reason, so reads answer module+offset with it and the resolver does
    not read the file again. Keyed by the owner: the reason was found as that owner may
    see the file, never shown on another owner's job; and by the path: the same build-id
    run from a path the collector can read is tried."""

    __tablename__ = "callsite_fallbacks"

    owner_uid: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, autoincrement=False, doc="the jobs' owner it is for"
    )
    module: Mapped[str] = mapped_column(Text, primary_key=True)
    build_id: Mapped[str] = mapped_column(Text, primary_key=True)
    site_offset: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    reason: Mapped[str] = mapped_column(Text)
    resolved_ns: Mapped[int] = mapped_column(BigInteger, doc="when it was tried")


class RollupDirty(Base):
    """(run, minute) buckets whose rollups must be recomputed: marked by every commit. A
    quarantined one (its sums do not fit their columns) is never recomputed and stays
    dirty: read from the raw deltas (collector/store/rollups.py)."""

    __tablename__ = "rollup_dirty"

    job_id: Mapped[int] = mapped_column(BigInteger)
    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    minute_ns: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    quarantined: Mapped[bool] = mapped_column(Boolean, default=False, server_default="false")


P2PMinute = _model(
    "P2PMinute",
    (Base,),
    "Point-to-point traffic per rank and peer summed over one UTC minute (by interval end); "
    "recomputed from p2p_deltas for every dirty bucket (collector/store/rollups.py).",
    {
        "__tablename__": "p2p_minutes",
        "job_id": mapped_column(BigInteger, nullable=False),
        "run_id": mapped_column(BigInteger, primary_key=True),
        "minute_ns": mapped_column(BigInteger, primary_key=True),
        "world_rank": mapped_column(Integer, primary_key=True),
        "peer": mapped_column(Integer, primary_key=True),
        **_counters(P2P_COUNTERS, nullable=False),
    },
)


OpSecond = _model(
    "OpSecond",
    (Base,),
    "MPI calls, bytes and time per op summed over the ranks of a run in one UTC second (by "
    "interval end); recomputed from op_deltas for every dirty minute with p2p_minutes "
    "(collector/store/rollups.py). A job's series at whole-second steps read these.",
    {
        "__tablename__": "op_seconds",
        "__table_args__": (Index("ix_op_seconds_job_time", "job_id", "second_ns"),),
        "job_id": mapped_column(BigInteger, nullable=False),
        "run_id": mapped_column(BigInteger, primary_key=True),
        "second_ns": mapped_column(BigInteger, primary_key=True),
        "op_id": mapped_column(SmallInteger, primary_key=True, autoincrement=False),
        **_counters(("calls", "bytes", "time_ns"), nullable=False),
    },
)


def _rank_minute(
    name: str, table: str, doc: str, keys: dict[str, Any], values: Sequence[str]
) -> Any:
    """A per-rank 1-minute rollup: (run, minute, rank, keys) -> values, by interval end."""
    return _model(name, (Base,), doc, {
        "__tablename__": table,
        "__table_args__": (Index(f"ix_{table}_job_time", "job_id", "minute_ns"),),
        "job_id": mapped_column(BigInteger, nullable=False),
        "run_id": mapped_column(BigInteger, primary_key=True),
        "minute_ns": mapped_column(BigInteger, primary_key=True),
        "world_rank": mapped_column(Integer, primary_key=True, autoincrement=False),
        **keys,
        **_counters(values, nullable=False),
    })  # fmt: skip


RankMinute = _rank_minute(
    "RankMinute", "rank_minutes",
    "The first interval start and the last interval end of a rank's intervals (with MPI "
    "calls or file I/O) that ended in one UTC minute: the time they cover.",
    {}, ("first_start_ns", "last_end_ns"),
)  # fmt: skip
RankOpMinute = _rank_minute(
    "RankOpMinute", "rank_op_minutes",
    "MPI calls and time per op of one rank in one UTC minute (by interval end).",
    {"op_id": mapped_column(SmallInteger, primary_key=True, autoincrement=False)},
    ("calls", "time_ns"),
)  # fmt: skip
CollMinute = _rank_minute(
    "CollMinute", "coll_minutes",
    "Collective calls, bytes and time per communicator, op and root of one rank in one UTC "
    "minute.",
    {"comm_id": mapped_column(BigInteger, primary_key=True, autoincrement=False),
     "comm_size": mapped_column(Integer, primary_key=True, autoincrement=False),
     "op_id": mapped_column(SmallInteger, primary_key=True, autoincrement=False),
     "root": mapped_column(Integer, primary_key=True, autoincrement=False)},
    ("calls", "time_ns", "bytes"),
)  # fmt: skip
RankValueMinute = _rank_minute(
    "RankValueMinute", "rank_value_minutes",
    "What a by-rank series point holds, for one rank in one UTC minute: MPI calls and time, "
    "point-to-point bytes sent, file I/O bytes and time of the program (phase 0); and its "
    "POSIX + stdio time (the slow-rank profile's file I/O).",
    {}, ("mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes", "io_time_ns", "file_io_ns"),
)  # fmt: skip
PeerMinute = _model(
    "PeerMinute",
    (Base,),
    "Point-to-point bytes and messages sent to one destination rank in one UTC minute, "
    "summed over the senders of a run (by interval end): a job's series by peer.",
    {
        "__tablename__": "peer_minutes",
        "__table_args__": (Index("ix_peer_minutes_job_time", "job_id", "minute_ns"),),
        "job_id": mapped_column(BigInteger, nullable=False),
        "run_id": mapped_column(BigInteger, primary_key=True),
        "minute_ns": mapped_column(BigInteger, primary_key=True),
        "peer": mapped_column(Integer, primary_key=True, autoincrement=False),
        **_counters(("bytes_sent", "msgs_sent"), nullable=False),
    },
)


def _rank_five(name: str, minutes: Any, table: str) -> Any:
    """The five-minute rollup of the per-rank minute rollup `minutes`: the same columns,
    minute_ns the first minute of a UTC five minutes (a multiple of 5 minutes), the rows
    summed (rank_fives: min / max) from its five minutes' rows (collector/store/rollups.py)."""
    columns = {c.name: mapped_column(c.type, primary_key=c.primary_key, nullable=c.nullable,
                                     autoincrement=False)
               for c in minutes.__table__.columns}  # fmt: skip
    return _model(name, (Base,), f"{minutes.__doc__} Summed per UTC five minutes.", {
        "__tablename__": table,
        "__table_args__": (Index(f"ix_{table}_job_time", "job_id", "minute_ns"),),
        **columns,
    })  # fmt: skip


RankFive = _rank_five("RankFive", RankMinute, "rank_fives")
RankOpFive = _rank_five("RankOpFive", RankOpMinute, "rank_op_fives")
CollFive = _rank_five("CollFive", CollMinute, "coll_fives")
RankValueFive = _rank_five("RankValueFive", RankValueMinute, "rank_value_fives")
PeerFive = _rank_five("PeerFive", PeerMinute, "peer_fives")

#: The time of a slow-rank profile's share summed per class (stacklens.mpi_ops.op_class's
#: order): inside MPI per category, in file I/O (MPI-IO calls, POSIX and stdio), in
#: start-up and in shutdown.
SHARE_CLASSES = (*MPI_CATEGORIES, "io_ns", "startup_ns", "shutdown_ns")
RankShareFive = _model("RankShareFive", (Base,), (
    "A slow-rank profile's share of one rank of a job in one UTC five minutes (minute_ns its "
    "first minute), its runs summed: the time its intervals cover (rank_fives' last end - "
    "first start), then SHARE_CLASSES, from rank_op_fives and rank_value_fives' file_io_ns "
    "(collector/store/rollups.py)."), {
    "__tablename__": "rank_share_fives",
    "job_id": mapped_column(BigInteger, primary_key=True),
    "minute_ns": mapped_column(BigInteger, primary_key=True),
    "world_rank": mapped_column(Integer, primary_key=True, autoincrement=False),
    **_counters(("elapsed_ns", *SHARE_CLASSES), nullable=False),
})  # fmt: skip
IoSecond = _model(
    "IoSecond",
    (Base,),
    "File I/O per phase, layer and path summed over the ranks of a run in one UTC second "
    "(by interval end); time_ns = read + write + metadata time: a job's series by category "
    "and by file at whole-second steps.",
    {
        "__tablename__": "io_seconds",
        "__table_args__": (Index("ix_io_seconds_job_time", "job_id", "second_ns"),),
        "job_id": mapped_column(BigInteger, nullable=False),
        "run_id": mapped_column(BigInteger, primary_key=True),
        "second_ns": mapped_column(BigInteger, primary_key=True),
        "phase": mapped_column(SmallInteger, primary_key=True, autoincrement=False),
        "layer": mapped_column(SmallInteger, primary_key=True, autoincrement=False),
        "path": mapped_column(Text, primary_key=True),
        **_counters(("reads", "writes", "bytes_read", "bytes_written", "time_ns"),
                    nullable=False),
    },
)  # fmt: skip


IoDelta = _model(
    "IoDelta",
    (_RankInterval, Base),
    "File-system I/O of one rank on one file through one layer during one interval.",
    {
        "__tablename__": "io_deltas",
        "__table_args__": (
            Index("ix_io_deltas_job_time", "job_id", "t_end_ns"),
            PARTITIONED_BY_DAY,
        ),
        "__mapper_args__": _identity("layer", "phase", "path"),
        "layer": mapped_column(SmallInteger, nullable=False, doc="stacklens.constants.IO_LAYERS"),
        "phase": mapped_column(
            SmallInteger,
            nullable=False,
            server_default="0",
            doc="0 = the program's, 1 = start-up (before MPI_Init)",
        ),
        **_counters(IO_COUNTERS, nullable=False),
        "path": mapped_column(
            Text,
            nullable=False,
            doc='absolute path; "<other>" = the layer\'s files beyond STACKLENS_MAX_KEYS',
        ),
        "mount": mapped_column(Text, nullable=False),
        "fstype": mapped_column(Text, nullable=False),
    },
)


class _HcaPort:
    """Which local port of the reporting rank's host a row is about."""

    device: Mapped[str] = mapped_column(Text, doc="RDMA device, e.g. mlx5_0")
    port: Mapped[int] = mapped_column(SmallInteger)
    node_guid: Mapped[int] = mapped_column(BigInteger, doc="device node GUID (signed), 0 unknown")


HcaRecords = _model(
    "HcaRecords",
    (_HcaPort, _RankInterval, Base),
    """Storage of the host's HCA port deltas as the wire sends them (one row per port).

    Sent by one rank per host (the lowest world rank with that host name on its node).
    Bit i of `valid` says counter i of stacklens.constants.PORT_COUNTERS is known; unknown
    ones are 0 here. Read them through the view `hca_deltas`.
    """,
    {
        "__tablename__": "hca_records",
        "__table_args__": (
            Index("ix_hca_records_job_time", "job_id", "t_end_ns"),
            PARTITIONED_BY_DAY,
        ),
        "__mapper_args__": _identity("device", "port"),
        "valid": mapped_column(Integer, nullable=False, doc="bit i: counter i is known"),
        **_counters(PORT_COUNTERS, nullable=False),
    },
)


HcaDelta = _model(
    "HcaDelta",
    (_HcaPort, _RankInterval, Base),
    """Bytes, packets, ticks and errors of one local HCA port during one interval.

    NULL = unknown (counter file absent, counter reset or saturated), never 0.
    """,
    {
        "__tablename__": "hca_deltas",
        "__table_args__": VIEW,
        "__mapper_args__": _identity("device", "port"),
        **_counters(PORT_COUNTERS, nullable=True),
    },
)


class ApiToken(Base):
    """An API bearer token (`stacklens token create`): only its SHA-256 is stored; it acts
    as `user` until `expires_ns`, or until revoked."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    user: Mapped[str] = mapped_column(Text, doc="the user the token acts as")
    name: Mapped[str] = mapped_column(Text, doc="what it is for (its owner's label)")
    sha256: Mapped[bytes] = mapped_column(BYTEA, unique=True, doc="SHA-256 of the token")
    created_ns: Mapped[int] = mapped_column(BigInteger)
    expires_ns: Mapped[int] = mapped_column(BigInteger)
    revoked_ns: Mapped[int | None] = mapped_column(BigInteger)


# ---------------------------------------------------------------------------------------
# fabric: InfiniBand topology, port counters and topology events (collector/fabric).
# GUIDs are stored as signed bigint (the 64-bit GUID's two's complement).
# ---------------------------------------------------------------------------------------


class Fabric(Base):
    """A fabric (subnet) by its identity: subnet prefix and its subnet manager's port GUID.
    The one discovered last is the current fabric: only its nodes and links are shown."""

    __tablename__ = "fabrics"
    __table_args__ = (UniqueConstraint("subnet_prefix", "sm_guid", name="uq_fabrics_identity"),)

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    subnet_prefix: Mapped[int] = mapped_column(BigInteger, doc="GID prefix, 0 = unknown")
    sm_guid: Mapped[int] = mapped_column(BigInteger, doc="SM's port GUID, 0 = unknown")
    first_seen_ns: Mapped[int] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int] = mapped_column(BigInteger)


class FabricNode(Base):
    """A switch, HCA or router of the fabric, as last discovered."""

    __tablename__ = "fabric_nodes"

    guid: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[int] = mapped_column(SmallInteger, doc="1 = HCA, 2 = switch, 3 = router")
    description: Mapped[str] = mapped_column(Text)
    nports: Mapped[int] = mapped_column(SmallInteger)
    lid: Mapped[int] = mapped_column(Integer)
    first_seen_ns: Mapped[int] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int] = mapped_column(BigInteger)
    gone_ns: Mapped[int | None] = mapped_column(BigInteger, doc="set while the node is missing")
    fabric_id: Mapped[int | None] = mapped_column(
        Integer, doc="fabrics.id of the fabric it was last discovered in; null: none known"
    )


class FabricPort(Base):
    """One port (GUID, port number) with its PortInfo attributes and link capacity."""

    __tablename__ = "fabric_ports"
    __table_args__ = (UniqueConstraint("guid", "port", name="uq_fabric_ports_guid_port"),)

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    guid: Mapped[int] = mapped_column(BigInteger)
    port: Mapped[int] = mapped_column(SmallInteger)
    port_guid: Mapped[int] = mapped_column(BigInteger)
    lid: Mapped[int] = mapped_column(Integer)
    state: Mapped[int] = mapped_column(SmallInteger, doc="PortInfo PortState, 4 = Active")
    phys_state: Mapped[int] = mapped_column(SmallInteger)
    width: Mapped[int] = mapped_column(SmallInteger, doc="LinkWidthActive code")
    speed: Mapped[int] = mapped_column(SmallInteger, doc="LinkSpeedActive code")
    speed_ext: Mapped[int] = mapped_column(SmallInteger, doc="LinkSpeedExtActive code, 0 = none")
    capacity_bytes_per_s: Mapped[int] = mapped_column(BigInteger)
    updated_ns: Mapped[int] = mapped_column(BigInteger)


class FabricLink(Base):
    """A cable between two (GUID, port) ends (a < b); down_ns is set while it is down."""

    __tablename__ = "fabric_links"
    __table_args__ = (
        UniqueConstraint("a_guid", "a_port", "b_guid", "b_port", name="uq_fabric_links_ends"),
    )

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    a_guid: Mapped[int] = mapped_column(BigInteger)
    a_port: Mapped[int] = mapped_column(SmallInteger)
    b_guid: Mapped[int] = mapped_column(BigInteger)
    b_port: Mapped[int] = mapped_column(SmallInteger)
    first_seen_ns: Mapped[int] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int] = mapped_column(BigInteger)
    down_ns: Mapped[int | None] = mapped_column(BigInteger)
    fabric_id: Mapped[int | None] = mapped_column(
        Integer, doc="fabrics.id of the fabric it was last discovered in; null: none known"
    )


class FabricLft(Base):
    """A switch's linear forwarding table: byte i = output port for destination LID i."""

    __tablename__ = "fabric_lfts"

    guid: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    ports: Mapped[bytes] = mapped_column(BYTEA)
    updated_ns: Mapped[int] = mapped_column(BigInteger)


def _port_counters() -> dict[str, Any]:
    """A port's counters at one sweep: raw values and deltas (NULL = unknown). Bytes and
    packets; `flags` as stacklens.constants describes them (counter i saturated or reset:
    its delta unknown; 64-bit extended counters)."""
    return {
        "dt_ns": mapped_column(BigInteger, nullable=True, doc="time since the previous sample"),
        "flags": mapped_column(Integer, nullable=False),
        **_counters(PORT_COUNTERS, nullable=False),
        **_counters(PORT_COUNTERS, nullable=True, prefix="d_"),
    }


FabricPortSample = _model(
    "FabricPortSample",
    (Base,),
    "One port's counters at one sweep (the history; see _port_counters).",
    {
        "__tablename__": "fabric_port_samples",
        "__table_args__": (
            Index(  # each block range summarized as it fills (migration 0023)
                "ix_fabric_port_samples_time_brin",
                "ts_ns",
                postgresql_using="brin",
                postgresql_with={"autosummarize": "on"},
            ),
            {"postgresql_partition_by": "RANGE (ts_ns)"},  # daily, collector/store/partitions.py
        ),
        "port_id": mapped_column(Integer, primary_key=True, doc="fabric_ports.id"),
        "ts_ns": mapped_column(BigInteger, primary_key=True, doc="sweep end"),
        **_port_counters(),
    },
)


FabricPortLatest = _model(
    "FabricPortLatest",
    (Base,),
    "The newest sample of each port (a copy kept by the fabric store with every sweep): the "
    "current state without probing every day partition of the history for each port.",
    {
        "__tablename__": "fabric_port_latest",
        "port_id": mapped_column(Integer, primary_key=True, doc="fabric_ports.id"),
        "ts_ns": mapped_column(BigInteger, nullable=False, doc="sweep end"),
        **_port_counters(),
    },
)


def _port_rollup(name: str, table: str, key: str, span: str) -> Any:
    """A rollup of the ports' samples over fixed UTC spans (by sweep end, ts_ns), keyed by
    port and span start (`key`): kept exact by the fabric store in the transaction that
    stores each sweep (collector/fabric/store.py)."""
    return _model(
        name,
        (Base,),
        f"One port's samples summed over one UTC {span} (by sweep end, ts_ns), kept exact by "
        "the fabric store with every sweep. d_<counter>: the sum of the known deltas (null: "
        "none known); t_<counter> (rate counters): the summed intervals (dt_ns) of the "
        "samples that know it; flags: the OR of the samples' flags (a counter saturated or "
        "reset in it).",
        {
            "__tablename__": table,
            "__table_args__": (Index(f"ix_{table}_time", key),),
            "port_id": mapped_column(Integer, primary_key=True, doc="fabric_ports.id"),
            key: mapped_column(BigInteger, primary_key=True, doc=f"start of the UTC {span}"),
            "samples": mapped_column(Integer, nullable=False, doc="samples summed"),
            "last_ns": mapped_column(BigInteger, nullable=False, doc="the newest sample's ts_ns"),
            "flags": mapped_column(Integer, nullable=False),
            **_counters(PORT_COUNTERS, nullable=True, prefix="d_"),
            **_counters(RATE_COUNTERS, nullable=False, prefix="t_"),
        },
    )


FabricPortMinute = _port_rollup("FabricPortMinute", "fabric_port_minutes", "minute_ns", "minute")
FabricPortTen = _port_rollup("FabricPortTen", "fabric_port_10s", "start_ns", "10 seconds")


class FabricEvent(Base):
    """A topology change or fault seen by the fabric sampler, with its start and end:
    link_down (until the link is back), node_gone (until the node is back), error_burst
    (error-counter deltas > 0 at a port on consecutive sweeps, with their counts); link_up
    and node_new (a link or node seen for the first time) are points (end = start)."""

    __tablename__ = "fabric_events"
    __table_args__ = (
        Index("ix_fabric_events_start", "start_ns"),
        Index("ix_fabric_events_link", "link_id", "start_ns"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    start_ns: Mapped[int] = mapped_column(BigInteger)
    end_ns: Mapped[int | None] = mapped_column(BigInteger, doc="null while open")
    kind: Mapped[str] = mapped_column(
        Text, doc="link_down | node_gone | error_burst | link_up | node_new"
    )
    subject: Mapped[str] = mapped_column(Text, doc="e.g. 'leaf02[9] - spine01[5]'")
    link_id: Mapped[int | None] = mapped_column(Integer, doc="fabric_links.id, if a link's")
    port_id: Mapped[int | None] = mapped_column(Integer, doc="fabric_ports.id (error bursts)")
    node_guid: Mapped[int | None] = mapped_column(BigInteger, doc="the node's (node events)")
    details: Mapped[dict[str, Any]] = mapped_column(JSONB)


# ---------------------------------------------------------------------------------------
# incidents: signals of the detectors joined in time and topology (server/incidents).
# ---------------------------------------------------------------------------------------


class Incident(Base):
    """An incident: one or more detector signals that coincide in time and topology (a
    congested or erroring link and the jobs on it whose MPI or I/O time per byte rose).

    The jobs it involves are its `incident_jobs` rows, which the owner filter restricts
    like every row of a job: `members` keeps each member's role only, so a viewer sees
    the jobs of others as "another job", never their ids.
    """

    __tablename__ = "incidents"
    __table_args__ = (
        Index("ix_incidents_start", "start_ns"),
        Index("ix_incidents_open", "end_ns", postgresql_where="end_ns IS NULL"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    key: Mapped[str] = mapped_column(
        Text, unique=True, doc="the signal that opened it (detector, subject, start)"
    )
    kind: Mapped[str] = mapped_column(
        Text, doc="congestion | link_errors | link_flap | mpi_slowdown | io_stall | regression"
    )
    severity: Mapped[str] = mapped_column(Text, doc="minor | major | critical")
    title: Mapped[str] = mapped_column(Text, doc="one line naming the cause and the jobs")
    start_ns: Mapped[int] = mapped_column(BigInteger, doc="when the first signal's condition began")
    end_ns: Mapped[int | None] = mapped_column(BigInteger, doc="null while open")
    detected_ns: Mapped[int] = mapped_column(BigInteger, doc="sweep time it was detected at")
    updated_ns: Mapped[int] = mapped_column(BigInteger)
    links: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, doc="affected links: id, ends, the signals on each and its evidence series"
    )
    members: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, doc="per involved job, in slot order: its role only (aggressor | victim | on link)"
    )
    link_ids: Mapped[list[int]] = mapped_column(ARRAY(Integer), doc="fabric_links.id, for filters")
    signals: Mapped[list[str]] = mapped_column(ARRAY(Text), doc="detector kinds it joins")
    unobserved_ns: Mapped[int | None] = mapped_column(
        BigInteger,
        doc="ended unobserved: the last time its signals could be observed (its job ended, "
        "the fabric stopped being swept), nobody knows whether it cleared; null: open, or "
        "its end was observed",
    )
    lost_ns: Mapped[int] = mapped_column(
        BigInteger,
        server_default="0",
        doc="time its jobs lost: per job hit, its waiting beyond its baseline averaged over "
        "its ranks, summed over the jobs",
    )
    hit: Mapped[int] = mapped_column(
        Integer, server_default="0", doc="jobs hit: its jobs with a signal of their own"
    )


class IncidentJob(Base):
    """One job of an incident: its role, ranks, files, bytes on the incident's links and its
    evidence series (read through the owner filter: other users' rows are not seen)."""

    __tablename__ = "incident_jobs"
    __table_args__ = (Index("ix_incident_jobs_job", "job_id"),)

    incident_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("incidents.id", ondelete="CASCADE"), primary_key=True
    )
    slot: Mapped[int] = mapped_column(
        Integer, primary_key=True, autoincrement=False, doc="its index in incidents.members"
    )
    job_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(Text, doc="aggressor | victim | on link")
    signals: Mapped[list[str]] = mapped_column(ARRAY(Text), doc="its own detector kinds")
    ranks: Mapped[list[int]] = mapped_column(ARRAY(Integer), doc="the ranks most affected")
    files: Mapped[list[str]] = mapped_column(ARRAY(Text), doc="the files of its I/O stall")
    link_bytes: Mapped[int | None] = mapped_column(
        BigInteger, doc="its bytes on the incident's links during it (null: none routed)"
    )
    evidence: Mapped[dict[str, Any]] = mapped_column(
        JSONB, doc="its series: per step time per byte and its baseline"
    )


CommMade = _model(
    "CommMade",
    (_RankInterval, Base),
    "How one rank's communicator was made (wire table comm): one row per description sent, "
    "at its creation and again at each MPI_Comm_set_name (the latest row wins). Members of "
    "one creating call share family_id; server/families groups them into families.",
    {
        "__tablename__": "comm_made",
        "__table_args__": (
            Index("ix_comm_made_job_time", "job_id", "t_end_ns"),
            PARTITIONED_BY_DAY,
        ),
        "__mapper_args__": _identity("comm_id"),
        "comm_id": mapped_column(BigInteger, nullable=False),
        "parent_id": mapped_column(BigInteger, nullable=False, doc="0 for MPI_COMM_WORLD"),
        "family_id": mapped_column(BigInteger, nullable=False),
        "made": mapped_column(SmallInteger, nullable=False, doc="server.families.model.MADE"),
        "comm_size": mapped_column(Integer, nullable=False),
        "comm_rank": mapped_column(Integer, nullable=False),
        "color": mapped_column(Integer, nullable=False, doc="split colour or split type"),
        "key": mapped_column(Integer, nullable=False, doc="split key"),
        "kept": mapped_column(Integer, nullable=False, doc="cart_sub: bit i = dimension i kept"),
        "site_offset": mapped_column(BigInteger, nullable=False, doc="0 = unknown"),
        "grid": mapped_column(Text, nullable=False, doc='e.g. "4x8"; empty if none'),
        "site_module": mapped_column(Text, nullable=False),
        "name": mapped_column(Text, nullable=False, doc="MPI_Comm_set_name's; empty if none"),
    },
)


CallsitePath = _model(
    "CallsitePath",
    (_RankInterval, Base),
    "One frame of one rank's call site (wire table callsite_frame): the module, its GNU "
    "build-id and the return address's offset site_offset (an ELF virtual address of the module: "
    "resolve site_offset - 1). Sent once per site; a resent frame may repeat it with the same "
    "values.",
    {
        "__tablename__": "callsite_paths",
        "__table_args__": (
            Index("ix_callsite_paths_job_time", "job_id", "t_end_ns"),
            PARTITIONED_BY_DAY,
        ),
        "__mapper_args__": _identity("site_id", "frame"),
        "site_id": mapped_column(BigInteger, nullable=False),
        "frame": mapped_column(SmallInteger, nullable=False, doc="0 = the caller of the call"),
        "depth": mapped_column(SmallInteger, nullable=False, doc="frames of the site"),
        "site_offset": mapped_column(BigInteger, nullable=False, doc="0 = unknown"),
        "build_id": mapped_column(Text, nullable=False, doc="hex; empty if none"),
        "module": mapped_column(Text, nullable=False, doc="empty if unknown"),
    },
)
