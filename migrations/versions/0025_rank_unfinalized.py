"""Ranks record whether their process ended without MPI_Finalize (`ranks.unfinalized`,
set by a final frame of type exited: a return from main, exit or _exit without it).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "ranks",
        sa.Column("unfinalized", sa.Boolean(), server_default="false", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("ranks", "unfinalized")
