"""Five-minute rollups of the per-rank minute rollups, recomputed with them for every dirty
minute (collector/store/rollups.py): `rank_fives`, `rank_op_fives`, `coll_fives`,
`peer_fives`, `rank_value_fives` hold the columns of `rank_minutes`, `rank_op_minutes`,
`coll_minutes`, `peer_minutes`, `rank_value_minutes` summed (rank_fives: min / max) over
each UTC five minutes; per-rank readings (series by rank and peer, the slow-rank profile)
at steps of whole five minutes read them. Filled here from the minute rollups stored
(exact for every clean minute; a five minutes with a dirty minute is read from its minutes
until the next pass recomputes both).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

I2, I4, I8 = sa.SmallInteger, sa.Integer, sa.BigInteger
FIVE_NS = 300_000_000_000

#: (table, its minute rollup, key columns after the run and time, value columns and their
#: aggregate).
_TABLES = (
    ("rank_fives", "rank_minutes", (("world_rank", I4),),
     (("first_start_ns", "min"), ("last_end_ns", "max"))),
    ("rank_op_fives", "rank_op_minutes", (("world_rank", I4), ("op_id", I2)),
     (("calls", "sum"), ("time_ns", "sum"))),
    ("coll_fives", "coll_minutes",
     (("world_rank", I4), ("comm_id", I8), ("comm_size", I4), ("op_id", I2)),
     (("calls", "sum"), ("time_ns", "sum"))),
    ("peer_fives", "peer_minutes", (("peer", I4),),
     (("bytes_sent", "sum"), ("msgs_sent", "sum"))),
    ("rank_value_fives", "rank_value_minutes", (("world_rank", I4),),
     tuple((v, "sum") for v in ("mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes",
                                "io_time_ns", "file_io_ns"))),
)  # fmt: skip


def upgrade() -> None:
    for table, minutes, keys, values in _TABLES:
        op.create_table(
            table,
            sa.Column("job_id", I8(), nullable=False),
            sa.Column("run_id", I8(), primary_key=True),
            sa.Column("minute_ns", I8(), primary_key=True),
            *[sa.Column(name, kind(), primary_key=True, autoincrement=False)
              for name, kind in keys],
            *[sa.Column(name, I8(), nullable=False) for name, _ in values],
        )  # fmt: skip
        op.create_index(f"ix_{table}_job_time", table, ["job_id", "minute_ns"])
        names = [name for name, _ in keys]
        op.execute(
            f"INSERT INTO {table} (job_id, run_id, minute_ns, {', '.join(names)}, "
            f"{', '.join(v for v, _ in values)}) "
            f"SELECT job_id, run_id, minute_ns / {FIVE_NS} * {FIVE_NS}, {', '.join(names)}, "
            f"{', '.join(f'{agg}({v})' for v, agg in values)} FROM {minutes} "
            f"GROUP BY job_id, run_id, minute_ns / {FIVE_NS} * {FIVE_NS}, {', '.join(names)}"
        )


def downgrade() -> None:
    for table, _minutes, _, _ in reversed(_TABLES):
        op.drop_index(f"ix_{table}_job_time", table_name=table)
        op.drop_table(table)
