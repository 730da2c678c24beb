"""Per-interval deltas of every hook counter table, partitioned by day; 1-minute rollups.

Numeric tables use the array layout (one row per frame, one array per field) with a view
`<name>_deltas` that unnests them into one row per record; file I/O, which carries a path
per record, is one row per record. See collector/store/tables.py.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

I2, I4, I8 = sa.SmallInteger, sa.Integer, sa.BigInteger
COUNTERS = ("calls", "bytes", "time_ns")

#: (table, view, [(field, element type)]) of the array-layout tables.
ARRAY_TABLES = (
    ("p2p_frames", "p2p_deltas",
     [("peer", I4), ("bytes_sent", I8), ("msgs_sent", I8), ("bytes_recv", I8),
      ("msgs_recv", I8)]),
    ("op_frames", "op_deltas", [("op_id", I2), *((c, I8) for c in COUNTERS)]),
    ("op_hist_frames", "op_hist_deltas", [("op_id", I2), ("bucket", I2), ("count", I8)]),
    ("coll_frames", "coll_deltas",
     [("op_id", I2), ("comm_id", I8), ("comm_size", I4), ("root", I4),
      *((c, I8) for c in COUNTERS)]),
    ("rma_frames", "rma_deltas", [("target", I4), ("op_id", I2), ("calls", I8), ("bytes", I8)]),
)  # fmt: skip
IO_COUNTERS = (
    "opens", "reads", "writes", "bytes_read", "bytes_written",
    "read_time_ns", "write_time_ns", "meta_time_ns",
)  # fmt: skip
PARTITIONED = {"postgresql_partition_by": "RANGE (t_end_ns)"}


def interval_columns() -> list[sa.Column]:
    """Columns every delta table starts with (no surrogate key; no per-row foreign key)."""
    return [
        sa.Column("job_id", I8(), nullable=False),
        sa.Column("world_rank", I4(), nullable=False),
        sa.Column("t_start_ns", I8(), nullable=False),
        sa.Column("t_end_ns", I8(), nullable=False),
    ]


def upgrade() -> None:
    for table, view, fields in ARRAY_TABLES:
        op.create_table(
            table,
            *interval_columns(),
            *[sa.Column(name, postgresql.ARRAY(kind()), nullable=False) for name, kind in fields],
            **PARTITIONED,
        )
        op.create_index(f"ix_{table}_job_time", table, ["job_id", "t_end_ns"])
        names = ", ".join(name for name, _ in fields)
        arrays = ", ".join(f"f.{name}" for name, _ in fields)
        op.execute(
            f"CREATE VIEW {view} AS SELECT f.job_id, f.world_rank, f.t_start_ns, f.t_end_ns, "
            f"u.* FROM {table} f CROSS JOIN LATERAL unnest({arrays}) AS u({names})"
        )
    op.create_table(
        "io_deltas",
        *interval_columns(),
        sa.Column("layer", I2(), nullable=False),
        *[sa.Column(name, I8(), nullable=False) for name in IO_COUNTERS],
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("mount", sa.Text(), nullable=False),
        sa.Column("fstype", sa.Text(), nullable=False),
        **PARTITIONED,
    )
    op.create_index("ix_io_deltas_job_time", "io_deltas", ["job_id", "t_end_ns"])
    op.create_table(
        "rollup_dirty",
        sa.Column("job_id", I8(), primary_key=True),
        sa.Column("minute_ns", I8(), primary_key=True),
    )
    op.create_table(
        "p2p_minutes",
        sa.Column("job_id", I8(), primary_key=True),
        sa.Column("minute_ns", I8(), primary_key=True),
        sa.Column("world_rank", I4(), primary_key=True),
        sa.Column("peer", I4(), primary_key=True),
        *[
            sa.Column(name, I8(), nullable=False)
            for name in ("bytes_sent", "msgs_sent", "bytes_recv", "msgs_recv")
        ],
    )


def downgrade() -> None:
    op.drop_table("p2p_minutes")
    op.drop_table("rollup_dirty")
    op.drop_table("io_deltas")
    for table, view, _ in reversed(ARRAY_TABLES):
        op.execute(f"DROP VIEW {view}")
        op.drop_table(table)
