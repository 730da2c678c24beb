"""The newest sample of each fabric port: `fabric_port_latest`, upserted by the fabric store
with every sweep (collector/fabric/store.py), read by the fabric API. Finding it in the
day-partitioned history cost one index probe per port and partition (0.3 s per request at
7,168 ports and one day of history, more every day; bench/RESULTS.md).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Counter columns of fabric_port_samples (collector/fabric/counters.py COUNTER_NAMES).
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
        "fabric_port_latest",
        sa.Column("port_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("ts_ns", sa.BigInteger(), nullable=False),
        sa.Column("dt_ns", sa.BigInteger(), nullable=True),
        sa.Column("flags", sa.Integer(), nullable=False),
        *[sa.Column(c, sa.BigInteger(), nullable=False) for c in COUNTERS],
        *[sa.Column(f"d_{c}", sa.BigInteger(), nullable=True) for c in COUNTERS],
    )
    columns = ", ".join(("port_id", "ts_ns", "dt_ns", "flags", *COUNTERS,
                         *(f"d_{c}" for c in COUNTERS)))  # fmt: skip
    op.execute(
        f"INSERT INTO fabric_port_latest ({columns}) "
        f"SELECT DISTINCT ON (port_id) {columns} FROM fabric_port_samples "
        "ORDER BY port_id, ts_ns DESC"
    )


def downgrade() -> None:
    op.drop_table("fabric_port_latest")
