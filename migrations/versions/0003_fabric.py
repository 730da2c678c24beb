"""Fabric: nodes, ports, links, forwarding tables, port counter samples, topology events.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
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
        "fabric_nodes",
        sa.Column("guid", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("type", sa.SmallInteger(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("nports", sa.SmallInteger(), nullable=False),
        sa.Column("lid", sa.Integer(), nullable=False),
        sa.Column("first_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("gone_ns", sa.BigInteger(), nullable=True),
    )
    op.create_table(
        "fabric_ports",
        sa.Column("id", sa.Integer(), sa.Identity(), primary_key=True),
        sa.Column("guid", sa.BigInteger(), nullable=False),
        sa.Column("port", sa.SmallInteger(), nullable=False),
        sa.Column("port_guid", sa.BigInteger(), nullable=False),
        sa.Column("lid", sa.Integer(), nullable=False),
        sa.Column("state", sa.SmallInteger(), nullable=False),
        sa.Column("phys_state", sa.SmallInteger(), nullable=False),
        sa.Column("width", sa.SmallInteger(), nullable=False),
        sa.Column("speed", sa.SmallInteger(), nullable=False),
        sa.Column("speed_ext", sa.SmallInteger(), nullable=False),
        sa.Column("capacity_bytes_per_s", sa.BigInteger(), nullable=False),
        sa.Column("updated_ns", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("guid", "port", name="uq_fabric_ports_guid_port"),
    )
    op.create_table(
        "fabric_links",
        sa.Column("id", sa.Integer(), sa.Identity(), primary_key=True),
        sa.Column("a_guid", sa.BigInteger(), nullable=False),
        sa.Column("a_port", sa.SmallInteger(), nullable=False),
        sa.Column("b_guid", sa.BigInteger(), nullable=False),
        sa.Column("b_port", sa.SmallInteger(), nullable=False),
        sa.Column("first_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("down_ns", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("a_guid", "a_port", "b_guid", "b_port", name="uq_fabric_links_ends"),
    )
    op.create_table(
        "fabric_lfts",
        sa.Column("guid", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("ports", postgresql.BYTEA(), nullable=False),
        sa.Column("updated_ns", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "fabric_port_samples",
        sa.Column("port_id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("ts_ns", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("dt_ns", sa.BigInteger(), nullable=True),
        sa.Column("flags", sa.Integer(), nullable=False),
        *[sa.Column(c, sa.BigInteger(), nullable=False) for c in COUNTERS],
        *[sa.Column(f"d_{c}", sa.BigInteger(), nullable=True) for c in COUNTERS],
        postgresql_partition_by="RANGE (ts_ns)",
    )
    op.create_index(
        "ix_fabric_port_samples_time_brin",
        "fabric_port_samples",
        ["ts_ns"],
        postgresql_using="brin",
    )
    op.create_table(
        "fabric_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("ts_ns", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("details", postgresql.JSONB(), nullable=False),
    )
    op.create_index("ix_fabric_events_time", "fabric_events", ["ts_ns"])


def downgrade() -> None:
    op.drop_table("fabric_events")
    op.drop_table("fabric_port_samples")
    op.drop_table("fabric_lfts")
    op.drop_table("fabric_links")
    op.drop_table("fabric_ports")
    op.drop_table("fabric_nodes")
