"""Call sites (wire tables callsite and callsite_frame): `callsite_frames` (array layout,
one row per frame) with the view `callsite_deltas`: calls, bytes and time per rank, call
site, layer, op, communicator and size bucket; and `callsite_paths`, one row per frame of
each call site (module, build-id, offset), sent once per site.

Partitioned by day of the interval end like the other delta tables; their partitions are
created by the collector (collector/store/partitions.py) as frames arrive.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SITE_FIELDS = (
    ("site_id", sa.BigInteger),
    ("layer", sa.SmallInteger),
    ("op_id", sa.SmallInteger),
    ("comm_id", sa.BigInteger),
    ("bucket", sa.SmallInteger),
    ("calls", sa.BigInteger),
    ("bytes", sa.BigInteger),
    ("time_ns", sa.BigInteger),
)
_PATH_FIELDS = (
    ("site_id", sa.BigInteger),
    ("frame", sa.SmallInteger),
    ("depth", sa.SmallInteger),
    ("site_offset", sa.BigInteger),
    ("build_id", sa.Text),
    ("module", sa.Text),
)


def _interval() -> list[sa.Column]:
    return [
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("world_rank", sa.Integer(), nullable=False),
        sa.Column("t_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("t_end_ns", sa.BigInteger(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "callsite_frames",
        *_interval(),
        *[sa.Column(name, postgresql.ARRAY(kind()), nullable=False) for name, kind in _SITE_FIELDS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_callsite_frames_job_time", "callsite_frames", ["job_id", "t_end_ns"])
    names = ", ".join(name for name, _ in _SITE_FIELDS)
    arrays = ", ".join(f"f.{name}" for name, _ in _SITE_FIELDS)
    op.execute(
        "CREATE VIEW callsite_deltas AS SELECT f.job_id, f.run_id, f.world_rank, f.t_start_ns, "
        f"f.t_end_ns, u.* FROM callsite_frames f CROSS JOIN LATERAL unnest({arrays}) AS u({names})"
    )
    op.create_table(
        "callsite_paths",
        *_interval(),
        *[sa.Column(name, kind(), nullable=False) for name, kind in _PATH_FIELDS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_callsite_paths_job_time", "callsite_paths", ["job_id", "t_end_ns"])


def downgrade() -> None:
    op.drop_table("callsite_paths")
    op.execute("DROP VIEW callsite_deltas")
    op.drop_table("callsite_frames")
