"""Fabric identity: `fabrics` (subnet prefix + subnet manager port GUID, one row per fabric
ever discovered) and `fabric_id` on fabric_nodes and fabric_links (the fabric each was
last discovered in). The fabric API shows the current fabric's nodes and links only, so a
reused state directory never draws or ranks an earlier fabric's links.

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fabrics",
        sa.Column("id", sa.Integer(), sa.Identity(), primary_key=True),
        sa.Column("subnet_prefix", sa.BigInteger(), nullable=False),
        sa.Column("sm_guid", sa.BigInteger(), nullable=False),
        sa.Column("first_seen_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_seen_ns", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("subnet_prefix", "sm_guid", name="uq_fabrics_identity"),
    )
    op.add_column("fabric_nodes", sa.Column("fabric_id", sa.Integer(), nullable=True))
    op.add_column("fabric_links", sa.Column("fabric_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("fabric_links", "fabric_id")
    op.drop_column("fabric_nodes", "fabric_id")
    op.drop_table("fabrics")
