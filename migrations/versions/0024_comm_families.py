"""Communicator families (wire tables comm and comm_p2p): `comm_made`, one row per
communicator description a rank sent (how it was made: family, parent, split colour and
key, grid, call site, name), and `comm_p2p_frames` (array layout, one row per frame) with
the view `comm_p2p_deltas`: point-to-point messages per communicator, op and peer.

Partitioned by day of the interval end like the other delta tables; their partitions are
created by the collector (collector/store/partitions.py) as frames arrive.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_P2P_FIELDS = (
    ("comm_id", sa.BigInteger),
    ("op_id", sa.SmallInteger),
    ("peer", sa.Integer),
    ("received", sa.SmallInteger),
    ("msgs", sa.BigInteger),
    ("bytes", sa.BigInteger),
    ("time_ns", sa.BigInteger),
)
_MADE_FIELDS = (
    ("comm_id", sa.BigInteger),
    ("parent_id", sa.BigInteger),
    ("family_id", sa.BigInteger),
    ("made", sa.SmallInteger),
    ("comm_size", sa.Integer),
    ("comm_rank", sa.Integer),
    ("color", sa.Integer),
    ("key", sa.Integer),
    ("kept", sa.Integer),
    ("site_offset", sa.BigInteger),
    ("grid", sa.Text),
    ("site_module", sa.Text),
    ("name", sa.Text),
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
        "comm_made",
        *_interval(),
        *[sa.Column(name, kind(), nullable=False) for name, kind in _MADE_FIELDS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_comm_made_job_time", "comm_made", ["job_id", "t_end_ns"])
    op.create_table(
        "comm_p2p_frames",
        *_interval(),
        *[sa.Column(name, postgresql.ARRAY(kind()), nullable=False) for name, kind in _P2P_FIELDS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_comm_p2p_frames_job_time", "comm_p2p_frames", ["job_id", "t_end_ns"])
    names = ", ".join(name for name, _ in _P2P_FIELDS)
    arrays = ", ".join(f"f.{name}" for name, _ in _P2P_FIELDS)
    op.execute(
        "CREATE VIEW comm_p2p_deltas AS SELECT f.job_id, f.run_id, f.world_rank, f.t_start_ns, "
        f"f.t_end_ns, u.* FROM comm_p2p_frames f CROSS JOIN LATERAL unnest({arrays}) AS u({names})"
    )


def downgrade() -> None:
    op.execute("DROP VIEW comm_p2p_deltas")
    op.drop_table("comm_p2p_frames")
    op.drop_table("comm_made")
