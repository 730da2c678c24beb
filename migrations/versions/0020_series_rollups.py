"""Rollups for the job series that had none, recomputed with the others for every dirty
minute (collector/store/rollups.py), exact sums of the raw deltas by interval end:
`io_seconds`, file I/O per second, phase, layer and path summed over a run's ranks (series
by category and by file at whole-second steps); `peer_minutes`, point-to-point traffic per
destination rank and minute summed over the senders (series by peer); `rank_value_minutes`,
per rank and minute what a by-rank series point holds and the file I/O time of the slow-rank
profile (series by rank, profile at whole-minute steps).

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

I2, I4, I8 = sa.SmallInteger, sa.Integer, sa.BigInteger

#: (table, time column, key columns after the run and time, value columns).
_TABLES = (
    ("io_seconds", "second_ns", (("phase", I2), ("layer", I2), ("path", sa.Text)),
     ("reads", "writes", "bytes_read", "bytes_written", "time_ns")),
    ("peer_minutes", "minute_ns", (("peer", I4),), ("bytes_sent", "msgs_sent")),
    ("rank_value_minutes", "minute_ns", (("world_rank", I4),),
     ("mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes", "io_time_ns", "file_io_ns")),
)  # fmt: skip


def upgrade() -> None:
    for table, time, keys, values in _TABLES:
        op.create_table(
            table,
            sa.Column("job_id", I8(), nullable=False),
            sa.Column("run_id", I8(), primary_key=True),
            sa.Column(time, I8(), primary_key=True),
            *[sa.Column(name, kind(), primary_key=True, autoincrement=False)
              for name, kind in keys],
            *[sa.Column(name, I8(), nullable=False) for name in values],
        )  # fmt: skip
        op.create_index(f"ix_{table}_job_time", table, ["job_id", time])
    # every minute stored before this revision is marked dirty: the next rollup pass writes
    # its rollups (until then it is read raw, exactly)
    for frames in ("p2p_frames", "op_frames", "io_deltas"):
        op.execute(
            "INSERT INTO rollup_dirty (run_id, minute_ns, job_id) SELECT DISTINCT run_id, "
            f"t_end_ns / 60000000000 * 60000000000, job_id FROM {frames} "
            "ON CONFLICT DO NOTHING"
        )


def downgrade() -> None:
    for table, _time, _, _ in reversed(_TABLES):
        op.drop_index(f"ix_{table}_job_time", table_name=table)
        op.drop_table(table)
