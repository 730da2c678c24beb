"""Core tables: jobs, their ranks (with accounting health), the frame ledger, MPI op names.

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


def _job_fk(primary_key: bool) -> sa.Column:
    return sa.Column(
        "job_id",
        sa.BigInteger(),
        sa.ForeignKey("jobs.id", ondelete="CASCADE"),
        primary_key=primary_key,
    )


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("job_key", sa.Text(), nullable=False, unique=True),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("user", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("finished_ns", sa.BigInteger(), nullable=True),
    )
    op.create_table(
        "ranks",
        _job_fk(primary_key=True),
        sa.Column("world_rank", sa.Integer(), primary_key=True),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("first_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("finished", sa.Boolean(), nullable=False),
        *[
            sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")
            for name in ("keys_dropped", "frames_dropped", "frames_spooled")
        ],
    )
    op.create_table(
        "received_frames",
        _job_fk(primary_key=True),
        sa.Column("world_rank", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.BigInteger(), primary_key=True),
        sa.Column("received_ns", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "mpi_ops",
        sa.Column("id", sa.SmallInteger(), primary_key=True, autoincrement=False),
        sa.Column("name", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    for table in ("mpi_ops", "received_frames", "ranks", "jobs"):
        op.drop_table(table)
