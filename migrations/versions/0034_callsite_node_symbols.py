"""Call sites resolved on the compute node and fallbacks kept (issue #26 point 2):
`callsite_node_symbols`, one row per (owner, build-id, offset) resolved by `stacklens run`
on the node where the module ran, for that owner's jobs only; `callsite_fallbacks`, one
row per (module path, build-id, offset) the collector's resolver could not read, with the
reason (docs/callsites.md).

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "callsite_node_symbols",
        sa.Column("owner_uid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("site_offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("quality", sa.Text(), nullable=False),
        sa.Column("function", sa.Text(), nullable=True),
        sa.Column("function_offset", sa.BigInteger(), nullable=True),
        sa.Column("file", sa.Text(), nullable=True),
        sa.Column("line", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("resolved_ns", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_uid", "build_id", "site_offset"),
    )
    op.create_table(
        "callsite_fallbacks",
        sa.Column("module", sa.Text(), nullable=False),
        sa.Column("build_id", sa.Text(), nullable=False),
        sa.Column("site_offset", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("resolved_ns", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("module", "build_id", "site_offset"),
    )


def downgrade() -> None:
    op.drop_table("callsite_fallbacks")
    op.drop_table("callsite_node_symbols")
