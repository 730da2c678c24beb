"""The storage schema: SQLAlchemy models of every stored series (migrations mirror them).

Units: bytes, ns timestamps since the Unix epoch (UTC). Delta tables hold per-interval
deltas exactly as the hooks sent them, so sums over any window are exact.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, ForeignKey, Identity, Index, Integer, Text
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


class ReceivedFrame(Base):
    """Ledger of committed frames: deduplicates resent frames by (job, rank, seq)."""

    __tablename__ = "received_frames"

    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    world_rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    received_ns: Mapped[int] = mapped_column(BigInteger)


class P2PDelta(Base):
    """Point-to-point traffic of one rank to/from one peer during one interval."""

    __tablename__ = "p2p_deltas"
    __table_args__ = (Index("ix_p2p_deltas_job_time", "job_id", "t_end_ns"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    job_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"))
    world_rank: Mapped[int] = mapped_column(Integer)
    peer: Mapped[int] = mapped_column(Integer)
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)
    bytes_sent: Mapped[int] = mapped_column(BigInteger)
    msgs_sent: Mapped[int] = mapped_column(BigInteger)
    bytes_recv: Mapped[int] = mapped_column(BigInteger)
    msgs_recv: Mapped[int] = mapped_column(BigInteger)


class OpDelta(Base):
    """Calls, bytes and time of one MPI operation on one rank during one interval."""

    __tablename__ = "op_deltas"
    __table_args__ = (Index("ix_op_deltas_job_time", "job_id", "t_end_ns"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    job_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"))
    world_rank: Mapped[int] = mapped_column(Integer)
    op: Mapped[str] = mapped_column(Text, doc="MPI function name, e.g. MPI_Send")
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)
    calls: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)
    time_ns: Mapped[int] = mapped_column(BigInteger)
