"""MPI detail and I/O: size histograms, collectives per communicator, RMA per target,
file-system I/O per file, and the ranks' accounting-health counters.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DELTA_TABLES = ("op_hist_deltas", "coll_deltas", "rma_deltas", "io_deltas")


def rank_interval_columns() -> list[sa.Column]:
    """The columns every per-rank delta table starts with (no surrogate or foreign key)."""
    return [
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("world_rank", sa.Integer(), nullable=False),
        sa.Column("t_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("t_end_ns", sa.BigInteger(), nullable=False),
    ]


def counters(*names: str) -> list[sa.Column]:
    """Non-null bigint counter columns."""
    return [sa.Column(name, sa.BigInteger(), nullable=False) for name in names]


def upgrade() -> None:
    op.create_table(
        "op_hist_deltas",
        *rank_interval_columns(),
        sa.Column("op_id", sa.SmallInteger(), nullable=False),
        sa.Column("bucket", sa.SmallInteger(), nullable=False),
        *counters("count"),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_table(
        "coll_deltas",
        *rank_interval_columns(),
        sa.Column("op_id", sa.SmallInteger(), nullable=False),
        sa.Column("comm_id", sa.BigInteger(), nullable=False),
        sa.Column("comm_size", sa.Integer(), nullable=False),
        sa.Column("root", sa.Integer(), nullable=False),
        *counters("calls", "bytes", "time_ns"),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_table(
        "rma_deltas",
        *rank_interval_columns(),
        sa.Column("target", sa.Integer(), nullable=False),
        sa.Column("op_id", sa.SmallInteger(), nullable=False),
        *counters("calls", "bytes"),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_table(
        "io_deltas",
        *rank_interval_columns(),
        sa.Column("layer", sa.SmallInteger(), nullable=False),
        *counters(
            "opens",
            "reads",
            "writes",
            "bytes_read",
            "bytes_written",
            "read_time_ns",
            "write_time_ns",
            "meta_time_ns",
        ),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("mount", sa.Text(), nullable=False),
        sa.Column("fstype", sa.Text(), nullable=False),
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    for table in DELTA_TABLES:
        op.create_index(f"ix_{table}_job_time", table, ["job_id", "t_end_ns"])
    for column in ("keys_dropped", "frames_dropped", "frames_spooled"):
        op.add_column(
            "ranks", sa.Column(column, sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    for column in ("keys_dropped", "frames_dropped", "frames_spooled"):
        op.drop_column("ranks", column)
    for table in reversed(DELTA_TABLES):
        op.drop_table(table)
