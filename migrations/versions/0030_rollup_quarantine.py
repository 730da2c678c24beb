"""A rollup bucket whose sums do not fit their columns is quarantined instead of failing
every rollup pass: `rollup_dirty.quarantined` (never claimed again, still dirty, so read
from the raw deltas; collector/store/rollups.py).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "rollup_dirty",
        sa.Column("quarantined", sa.Boolean(), server_default="false", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("rollup_dirty", "quarantined")
