"""First tables: jobs, ranks, the frame ledger, MPI op names, point-to-point and per-op deltas.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def rank_interval_columns() -> list[sa.Column]:
    """The columns every per-rank delta table starts with (no surrogate or foreign key)."""
    return [
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("world_rank", sa.Integer(), nullable=False),
        sa.Column("t_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("t_end_ns", sa.BigInteger(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("job_key", sa.Text(), nullable=False, unique=True),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("finished_ns", sa.BigInteger(), nullable=True),
    )
    op.create_table(
        "ranks",
        sa.Column(
            "job_id",
            sa.BigInteger(),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("world_rank", sa.Integer(), primary_key=True),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("first_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("finished", sa.Boolean(), nullable=False),
    )
    op.create_table(
        "received_frames",
        sa.Column(
            "job_id",
            sa.BigInteger(),
            sa.ForeignKey("jobs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("world_rank", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("received_ns", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "p2p_deltas",
        *rank_interval_columns(),
        sa.Column("peer", sa.Integer(), nullable=False),
        sa.Column("bytes_sent", sa.BigInteger(), nullable=False),
        sa.Column("msgs_sent", sa.BigInteger(), nullable=False),
        sa.Column("bytes_recv", sa.BigInteger(), nullable=False),
        sa.Column("msgs_recv", sa.BigInteger(), nullable=False),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_p2p_deltas_job_time", "p2p_deltas", ["job_id", "t_end_ns"])
    op.create_table(
        "mpi_ops",
        sa.Column("id", sa.SmallInteger(), primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text(), nullable=False),
    )
    op.create_table(
        "op_deltas",
        *rank_interval_columns(),
        sa.Column("op_id", sa.SmallInteger(), nullable=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("time_ns", sa.BigInteger(), nullable=False),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_op_deltas_job_time", "op_deltas", ["job_id", "t_end_ns"])


def downgrade() -> None:
    op.drop_table("op_deltas")
    op.drop_table("mpi_ops")
    op.drop_table("p2p_deltas")
    op.drop_table("received_frames")
    op.drop_table("ranks")
    op.drop_table("jobs")
