"""Endings and start-up I/O: `ranks.aborted` and `ranks.abort_code`, set by a final frame
of type aborted (the rank called MPI_Abort; its abort record carries the error code; the
job's status becomes `aborted`), and `io_deltas.phase`: 1 for the I/O a rank did before
MPI_Init (start-up: an interpreter's imports), 0 for the program's.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "ranks", sa.Column("aborted", sa.Boolean(), nullable=False, server_default="false")
    )
    op.add_column("ranks", sa.Column("abort_code", sa.Integer(), nullable=True))
    op.add_column(
        "io_deltas", sa.Column("phase", sa.SmallInteger(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    op.drop_column("io_deltas", "phase")
    op.drop_column("ranks", "abort_code")
    op.drop_column("ranks", "aborted")
