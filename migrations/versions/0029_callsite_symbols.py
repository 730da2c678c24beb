"""Call sites resolved: `callsite_symbols`, one row per (build-id, offset) resolved from
the file that ran (function, file, line, quality, reason, where and when), shared by every
job of that binary (stacklens/symbols.py, docs/callsites.md).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "callsite_symbols",
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("site_offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("quality", sa.Text(), nullable=False),
        sa.Column("function", sa.Text(), nullable=True),
        sa.Column("function_offset", sa.BigInteger(), nullable=True),
        sa.Column("file", sa.Text(), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("resolved", sa.Text(), nullable=False),
        sa.Column("resolved_ns", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("build_id", "site_offset"),
    )


def downgrade() -> None:
    op.drop_table("callsite_symbols")
