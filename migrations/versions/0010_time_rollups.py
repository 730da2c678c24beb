"""Rollups for series over time, recomputed with `p2p_minutes` for every dirty minute (by
interval end): `op_seconds`, the calls, bytes and time per op summed over the ranks of a
run in each UTC second (a job's series at whole-second steps); per rank and UTC minute,
`rank_minutes` (first interval start, last interval end), `rank_op_minutes` (calls and time
per op) and `coll_minutes` (calls and time per communicator and op) (the slow-rank profile
and per-rank series at whole-minute steps).

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


#: The per-rank minute rollups: table, key columns after the rank, value columns.
_RANK_MINUTES = (
    ("rank_minutes", (), ("first_start_ns", "last_end_ns")),
    ("rank_op_minutes", (("op_id", sa.SmallInteger),), ("calls", "time_ns")),
    ("coll_minutes",
     (("comm_id", sa.BigInteger), ("comm_size", sa.Integer), ("op_id", sa.SmallInteger)),
     ("calls", "time_ns")),
)  # fmt: skip


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
    for table, keys, values in _RANK_MINUTES:
        op.create_table(
            table,
            sa.Column("job_id", sa.BigInteger(), nullable=False),
            sa.Column("run_id", sa.BigInteger(), primary_key=True),
            sa.Column("minute_ns", sa.BigInteger(), primary_key=True),
            sa.Column("world_rank", sa.Integer(), primary_key=True, autoincrement=False),
            *[sa.Column(name, kind(), primary_key=True, autoincrement=False)
              for name, kind in keys],
            *[sa.Column(name, sa.BigInteger(), nullable=False) for name in values],
        )  # fmt: skip
        op.create_index(f"ix_{table}_job_time", table, ["job_id", "minute_ns"])
    # every minute with MPI operations or file I/O stored before this revision is marked
    # dirty: the next rollup pass writes its rollups (until then it is read raw, exactly)
    for frames in ("op_frames", "io_deltas"):
        op.execute(
            "INSERT INTO rollup_dirty (run_id, minute_ns, job_id) SELECT DISTINCT run_id, "
            f"t_end_ns / 60000000000 * 60000000000, job_id FROM {frames} "
            "ON CONFLICT DO NOTHING"
        )


def downgrade() -> None:
    for table, _, _ in _RANK_MINUTES:
        op.drop_index(f"ix_{table}_job_time", table_name=table)
        op.drop_table(table)
    op.drop_index("ix_op_seconds_job_time", table_name="op_seconds")
    op.drop_table("op_seconds")
