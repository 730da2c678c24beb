"""Per-second rollups of MPI operations: `op_seconds`, the calls, bytes and time per op
summed over the ranks of a run in each UTC second (by interval end), recomputed with
`p2p_minutes` for every dirty minute; a job's series at whole-second steps read them
instead of every rank's intervals.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "op_seconds",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.BigInteger(), primary_key=True),
        sa.Column("second_ns", sa.BigInteger(), primary_key=True),
        sa.Column("op_id", sa.SmallInteger(), primary_key=True, autoincrement=False),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("time_ns", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_op_seconds_job_time", "op_seconds", ["job_id", "second_ns"])
    # every minute with MPI operations stored before this revision is marked dirty: the
    # next rollup pass writes its seconds (until then it is read raw, exactly)
    op.execute(
        "INSERT INTO rollup_dirty (run_id, minute_ns, job_id) "
        "SELECT DISTINCT run_id, t_end_ns / 60000000000 * 60000000000, job_id FROM op_frames "
        "ON CONFLICT DO NOTHING"
    )


def downgrade() -> None:
    op.drop_index("ix_op_seconds_job_time", table_name="op_seconds")
    op.drop_table("op_seconds")
