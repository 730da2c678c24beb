"""The host's own HCA port counters sent by the hook library (wire table hca).

`hca_records` stores what the wire carries, one row per port and interval, partitioned
by day on t_end_ns like the other delta tables; bit i of `valid` says counter i is
known. The view `hca_deltas` shows unknown counters as NULL, never 0.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Counter columns in the bit order of `valid` (stacklens.schema.PORT_COUNTERS).
COUNTERS = (
    "xmit_bytes",
    "rcv_bytes",
    "xmit_pkts",
    "rcv_pkts",
    "xmit_wait",
    "symbol_errors",
    "link_error_recovery",
    "link_downed",
    "rcv_errors",
    "xmit_discards",
    "vl15_dropped",
)


def upgrade() -> None:
    op.create_table(
        "hca_records",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("world_rank", sa.Integer(), nullable=False),
        sa.Column("t_start_ns", sa.BigInteger(), nullable=False),
        sa.Column("t_end_ns", sa.BigInteger(), nullable=False),
        sa.Column("device", sa.Text(), nullable=False),
        sa.Column("port", sa.SmallInteger(), nullable=False),
        sa.Column("valid", sa.Integer(), nullable=False),
        sa.Column("node_guid", sa.BigInteger(), nullable=False),
        *[sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTERS],
        postgresql_partition_by="RANGE (t_end_ns)",
    )
    op.create_index("ix_hca_records_job_time", "hca_records", ["job_id", "t_end_ns"])
    known = ", ".join(
        f"CASE WHEN valid & {1 << i} <> 0 THEN {name} END AS {name}"
        for i, name in enumerate(COUNTERS)
    )
    op.execute(
        "CREATE VIEW hca_deltas AS SELECT job_id, world_rank, t_start_ns, t_end_ns, device, "
        f"port, node_guid, {known} FROM hca_records"
    )


def downgrade() -> None:
    op.execute("DROP VIEW hca_deltas")
    op.drop_table("hca_records")
