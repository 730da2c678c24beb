"""On-wire traffic measured by the MPI (wire table 11): `wire_frames`, one row per frame of
a rank whose MPI measures it (Open MPI's monitoring component), an array per field, and the
view `wire_deltas` with one row per (rank, interval, peer). A row of empty arrays says
"measured, nothing sent"; a run without rows was not measured (absent, never 0).

Partitioned by day of the interval end like the other delta tables; its partitions are
created by the collector (collector/store/partitions.py) as frames arrive.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FIELDS = (("peer", sa.Integer), ("bytes", sa.BigInteger), ("msgs", sa.BigInteger))


def upgrade() -> None:
    op.create_table(
        "wire_frames",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("world_rank", sa.Integer(), nullable=False),
        sa.Column("t_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("t_end_ns", sa.BigInteger(), nullable=False),
        *[sa.Column(name, postgresql.ARRAY(kind()), nullable=False) for name, kind in _FIELDS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_wire_frames_job_time", "wire_frames", ["job_id", "t_end_ns"])
    names = ", ".join(name for name, _ in _FIELDS)
    arrays = ", ".join(f"f.{name}" for name, _ in _FIELDS)
    op.execute(
        "CREATE VIEW wire_deltas AS SELECT f.job_id, f.run_id, f.world_rank, f.t_start_ns, "
        f"f.t_end_ns, u.* FROM wire_frames f CROSS JOIN LATERAL unnest({arrays}) AS u({names})"
    )


def downgrade() -> None:
    op.execute("DROP VIEW wire_deltas")
    op.drop_table("wire_frames")
