"""A run records the GNU build-id of its ranks' executable (wire rank_info.exe_build_id):
runs of a rebuilt program are told apart from the runs before the rebuild (server/compare).

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("exe_build_id", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "exe_build_id")
