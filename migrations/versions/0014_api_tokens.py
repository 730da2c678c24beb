"""API bearer tokens (`stacklens token create|list|revoke`): one row per token, its SHA-256
(never the token), the user it acts as, when it expires and when it was revoked.

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("user", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("sha256", postgresql.BYTEA(), nullable=False),
        sa.Column("created_ns", sa.BigInteger(), nullable=False),
        sa.Column("expires_ns", sa.BigInteger(), nullable=False),
        sa.Column("revoked_ns", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("sha256", name="api_tokens_sha256_key"),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
