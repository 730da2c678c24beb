"""The storage schema: SQLAlchemy models of every stored series (migrations mirror them).

Units: bytes, ns timestamps since the Unix epoch (UTC). Delta tables hold per-interval
deltas exactly as the hooks sent them, so sums over any window are exact.
"""

from __future__ import annotations

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
from sqlalchemy.dialects.postgresql import BYTEA, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of all stacklens tables."""


class Job(Base):
    """One MPI job (or one profiled program) seen by a collector."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    job_key: Mapped[str] = mapped_column(Text, unique=True, doc="scheduler or generated job id")
    world_size: Mapped[int] = mapped_column(Integer)
    command: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, doc="running | finished")
    started_ns: Mapped[int] = mapped_column(BigInteger, doc="earliest interval start seen")
    last_seen_ns: Mapped[int] = mapped_column(BigInteger, doc="latest interval end seen")
    finished_ns: Mapped[int | None] = mapped_column(BigInteger)


class Rank(Base):
    """One rank (process) of a job."""

    __tablename__ = "ranks"

    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    world_rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    host: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    first_seen_ns: Mapped[int] = mapped_column(BigInteger)
    last_seen_ns: Mapped[int] = mapped_column(BigInteger)
    finished: Mapped[bool] = mapped_column(Boolean, default=False)
    keys_dropped: Mapped[int] = mapped_column(BigInteger, default=0, doc="folded into overflow")
    frames_dropped: Mapped[int] = mapped_column(BigInteger, default=0, doc="lost by the sender")
    frames_spooled: Mapped[int] = mapped_column(BigInteger, default=0, doc="went via the spool")


class ReceivedFrame(Base):
    """Ledger of committed frames: deduplicates resent frames by (job, rank, seq)."""

    __tablename__ = "received_frames"

    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
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
    carry no surrogate key (8 bytes a row) and no foreign key (a per-row check that
    triples the cost of COPY): retention drops their partitions before deleting jobs. The
    ORM identity is declared per table with `__mapper_args__`.
    """

    job_id: Mapped[int] = mapped_column(BigInteger, doc="jobs.id")
    world_rank: Mapped[int] = mapped_column(Integer)
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)


#: Table option of every delta table: range partitions on the interval end.
PARTITIONED_BY_DAY = {"postgresql_partition_by": "RANGE (t_end_ns)"}


def _identity(*columns: str) -> dict:
    return {"primary_key": ["job_id", "world_rank", "t_end_ns", *columns]}


class P2PDelta(_RankInterval, Base):
    """Point-to-point traffic of one rank to/from one peer during one interval."""

    __tablename__ = "p2p_deltas"
    __table_args__ = (Index("ix_p2p_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
    __mapper_args__ = _identity("peer")

    peer: Mapped[int] = mapped_column(Integer, doc="peer world rank")
    bytes_sent: Mapped[int] = mapped_column(BigInteger)
    msgs_sent: Mapped[int] = mapped_column(BigInteger)
    bytes_recv: Mapped[int] = mapped_column(BigInteger)
    msgs_recv: Mapped[int] = mapped_column(BigInteger)


class OpDelta(_RankInterval, Base):
    """Calls, bytes and time of one MPI operation on one rank during one interval."""

    __tablename__ = "op_deltas"
    __table_args__ = (Index("ix_op_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
    __mapper_args__ = _identity("op_id")

    op_id: Mapped[int] = mapped_column(SmallInteger, doc="mpi_ops.id")
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)


class OpHistDelta(_RankInterval, Base):
    """Messages of one op in one log2 size bucket (0 = empty, b = [2^(b-1), 2^b) bytes)."""

    __tablename__ = "op_hist_deltas"
    __table_args__ = (Index("ix_op_hist_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
    __mapper_args__ = _identity("op_id", "bucket")

    op_id: Mapped[int] = mapped_column(SmallInteger)
    bucket: Mapped[int] = mapped_column(SmallInteger)
    count: Mapped[int] = mapped_column(BigInteger)


class CollDelta(_RankInterval, Base):
    """Collective calls of one rank per op and communicator during one interval."""

    __tablename__ = "coll_deltas"
    __table_args__ = (Index("ix_coll_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
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
    __table_args__ = (Index("ix_rma_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
    __mapper_args__ = _identity("target", "op_id")

    target: Mapped[int] = mapped_column(Integer, doc="target world rank")
    op_id: Mapped[int] = mapped_column(SmallInteger)
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class IoDelta(_RankInterval, Base):
    """File-system I/O of one rank on one file through one layer during one interval."""

    __tablename__ = "io_deltas"
    __table_args__ = (Index("ix_io_deltas_job_time", "job_id", "t_end_ns"), PARTITIONED_BY_DAY)
    __mapper_args__ = _identity("layer", "path")

    layer: Mapped[int] = mapped_column(SmallInteger, doc="1 = POSIX, 2 = stdio, 3 = MPI-IO")
    opens: Mapped[int] = mapped_column(BigInteger)
    reads: Mapped[int] = mapped_column(BigInteger)
    writes: Mapped[int] = mapped_column(BigInteger)
    bytes_read: Mapped[int] = mapped_column(BigInteger)
    bytes_written: Mapped[int] = mapped_column(BigInteger)
    read_time_ns: Mapped[int] = mapped_column(BigInteger)
    write_time_ns: Mapped[int] = mapped_column(BigInteger)
    meta_time_ns: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(Text, doc='absolute path; "<other>" = overflow key')
    mount: Mapped[str] = mapped_column(Text)
    fstype: Mapped[str] = mapped_column(Text)


# ---------------------------------------------------------------------------------------
# fabric: InfiniBand topology, port counters and topology events (collector/fabric).
# GUIDs are stored as signed bigint (the 64-bit GUID's two's complement).
# ---------------------------------------------------------------------------------------


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


class FabricLft(Base):
    """A switch's linear forwarding table: byte i = output port for destination LID i."""

    __tablename__ = "fabric_lfts"

    guid: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    ports: Mapped[bytes] = mapped_column(BYTEA)
    updated_ns: Mapped[int] = mapped_column(BigInteger)


class FabricPortSample(Base):
    """One port's counters at one sweep: raw values and deltas (NULL = unknown).

    Bytes and packets; flags bit i = counter i saturated (delta is a lower bound),
    bit 16 + i = counter i reset (delta unknown), bit 30 = 64-bit extended counters.
    """

    __tablename__ = "fabric_port_samples"
    __table_args__ = (
        Index("ix_fabric_port_samples_time_brin", "ts_ns", postgresql_using="brin"),
        {"postgresql_partition_by": "RANGE (ts_ns)"},  # daily, collector/store/partitions.py
    )

    port_id: Mapped[int] = mapped_column(Integer, primary_key=True, doc="fabric_ports.id")
    ts_ns: Mapped[int] = mapped_column(BigInteger, primary_key=True, doc="sweep end")
    dt_ns: Mapped[int | None] = mapped_column(BigInteger, doc="time since the previous sample")
    flags: Mapped[int] = mapped_column(Integer)
    xmit_bytes: Mapped[int] = mapped_column(BigInteger)
    rcv_bytes: Mapped[int] = mapped_column(BigInteger)
    xmit_pkts: Mapped[int] = mapped_column(BigInteger)
    rcv_pkts: Mapped[int] = mapped_column(BigInteger)
    xmit_wait: Mapped[int] = mapped_column(BigInteger)
    symbol_errors: Mapped[int] = mapped_column(BigInteger)
    link_error_recovery: Mapped[int] = mapped_column(BigInteger)
    link_downed: Mapped[int] = mapped_column(BigInteger)
    rcv_errors: Mapped[int] = mapped_column(BigInteger)
    xmit_discards: Mapped[int] = mapped_column(BigInteger)
    vl15_dropped: Mapped[int] = mapped_column(BigInteger)
    d_xmit_bytes: Mapped[int | None] = mapped_column(BigInteger)
    d_rcv_bytes: Mapped[int | None] = mapped_column(BigInteger)
    d_xmit_pkts: Mapped[int | None] = mapped_column(BigInteger)
    d_rcv_pkts: Mapped[int | None] = mapped_column(BigInteger)
    d_xmit_wait: Mapped[int | None] = mapped_column(BigInteger)
    d_symbol_errors: Mapped[int | None] = mapped_column(BigInteger)
    d_link_error_recovery: Mapped[int | None] = mapped_column(BigInteger)
    d_link_downed: Mapped[int | None] = mapped_column(BigInteger)
    d_rcv_errors: Mapped[int | None] = mapped_column(BigInteger)
    d_xmit_discards: Mapped[int | None] = mapped_column(BigInteger)
    d_vl15_dropped: Mapped[int | None] = mapped_column(BigInteger)


class FabricEvent(Base):
    """A topology change or fault seen by the fabric sampler."""

    __tablename__ = "fabric_events"
    __table_args__ = (Index("ix_fabric_events_time", "ts_ns"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(Text, doc="link_down | link_up | node_gone | node_new")
    subject: Mapped[str] = mapped_column(Text, doc="e.g. 'leaf02[9] - spine01[5]'")
    details: Mapped[dict] = mapped_column(JSONB)
