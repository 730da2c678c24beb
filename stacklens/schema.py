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
)
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

    Delta tables have no surrogate key (it would cost 8 bytes a row); the ORM identity is
    declared per table with `__mapper_args__`.
    """

    job_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"))
    world_rank: Mapped[int] = mapped_column(Integer)
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)


def _identity(*columns: str) -> dict:
    return {"primary_key": ["job_id", "world_rank", "t_end_ns", *columns]}


class P2PDelta(_RankInterval, Base):
    """Point-to-point traffic of one rank to/from one peer during one interval."""

    __tablename__ = "p2p_deltas"
    __table_args__ = (Index("ix_p2p_deltas_job_time", "job_id", "t_end_ns"),)
    __mapper_args__ = _identity("peer")

    peer: Mapped[int] = mapped_column(Integer, doc="peer world rank")
    bytes_sent: Mapped[int] = mapped_column(BigInteger)
    msgs_sent: Mapped[int] = mapped_column(BigInteger)
    bytes_recv: Mapped[int] = mapped_column(BigInteger)
    msgs_recv: Mapped[int] = mapped_column(BigInteger)


class OpDelta(_RankInterval, Base):
    """Calls, bytes and time of one MPI operation on one rank during one interval."""

    __tablename__ = "op_deltas"
    __table_args__ = (Index("ix_op_deltas_job_time", "job_id", "t_end_ns"),)
    __mapper_args__ = _identity("op_id")

    op_id: Mapped[int] = mapped_column(SmallInteger, doc="mpi_ops.id")
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)


class OpHistDelta(_RankInterval, Base):
    """Messages of one op in one log2 size bucket (0 = empty, b = [2^(b-1), 2^b) bytes)."""

    __tablename__ = "op_hist_deltas"
    __table_args__ = (Index("ix_op_hist_deltas_job_time", "job_id", "t_end_ns"),)
    __mapper_args__ = _identity("op_id", "bucket")

    op_id: Mapped[int] = mapped_column(SmallInteger)
    bucket: Mapped[int] = mapped_column(SmallInteger)
    count: Mapped[int] = mapped_column(BigInteger)


class CollDelta(_RankInterval, Base):
    """Collective calls of one rank per op and communicator during one interval."""

    __tablename__ = "coll_deltas"
    __table_args__ = (Index("ix_coll_deltas_job_time", "job_id", "t_end_ns"),)
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
    __table_args__ = (Index("ix_rma_deltas_job_time", "job_id", "t_end_ns"),)
    __mapper_args__ = _identity("target", "op_id")

    target: Mapped[int] = mapped_column(Integer, doc="target world rank")
    op_id: Mapped[int] = mapped_column(SmallInteger)
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class IoDelta(_RankInterval, Base):
    """File-system I/O of one rank on one file through one layer during one interval."""

    __tablename__ = "io_deltas"
    __table_args__ = (Index("ix_io_deltas_job_time", "job_id", "t_end_ns"),)
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
