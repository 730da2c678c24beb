"""What each user has stored, per day: `owner_storage` (frames and their wire bytes per
owner and UTC day of their interval end), kept by the writer in the transaction that stores
the frames and deleted by retention with the day's partitions; the collector bounds each
user's total by it (STACKLENS_MAX_STORED_MB). Frames stored before this migration are not
counted (their wire length was not kept).

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "owner_storage",
        sa.Column("owner_uid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("frames", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner_uid", "day"),
    )


def downgrade() -> None:
    op.drop_table("owner_storage")
