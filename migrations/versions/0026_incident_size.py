"""Incidents record the size of their effect and how they ended: `lost_ns` (the time their
jobs lost), `hit` (jobs with a signal of their own) and `unobserved_ns` (ended unobserved:
the last time their signals could be observed).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("incidents", sa.Column("unobserved_ns", sa.BigInteger(), nullable=True))
    op.add_column(
        "incidents", sa.Column("lost_ns", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column("incidents", sa.Column("hit", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    op.drop_column("incidents", "hit")
    op.drop_column("incidents", "lost_ns")
    op.drop_column("incidents", "unobserved_ns")
