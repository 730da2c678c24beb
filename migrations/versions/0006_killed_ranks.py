"""Ranks ended by a signal: `ranks.killed`, set by a final frame of type 3 (wire format:
the final frame of a rank whose SIGTERM or SIGINT handler delivered it). A job with such a
rank gets status `killed` instead of `finished`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "ranks", sa.Column("killed", sa.Boolean(), nullable=False, server_default="false")
    )


def downgrade() -> None:
    op.drop_column("ranks", "killed")
