"""A run records the path of its ranks' executable (wire rank_info.exe_path, the target of
/proc/self/exe): runs of one binary are the same program whatever argv[0] says, and two
binaries of one name in different directories are not (server/compare).

Revision ID: 0041
Revises: 0040
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0041"
down_revision: str | None = "0040"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("exe_path", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "exe_path")
