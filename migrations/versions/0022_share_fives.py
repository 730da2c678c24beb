"""The slow-rank profile's shares per rank and UTC five minutes (`rank_share_fives`): per
job, rank and five minutes (its runs summed), the time its intervals cover (rank_fives),
the time inside MPI per category (mpi_p2p, mpi_completion, mpi_coll, mpi_rma, other), in
file I/O (MPI-IO calls, POSIX and stdio), start-up and shutdown; recomputed with the other
five-minute rollups (collector/store/rollups.py) and read by a job's profile at five-minute
steps instead of pivoting rank_op_fives at each reading. Filled here from the five-minute
rollups stored.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from stacklens.mpi_ops import MPI_CATEGORIES, op_classes

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The class columns, in stacklens.mpi_ops.op_class's order.
_CLASSES = ("mpi_p2p", "mpi_completion", "mpi_coll", "mpi_rma", "other", "io_ns", "startup_ns",
            "shutdown_ns")  # fmt: skip
_SAME = "{t}.run_id = r.run_id AND {t}.minute_ns = r.minute_ns AND {t}.world_rank = r.world_rank"


def upgrade() -> None:
    op.create_table(
        "rank_share_fives",
        sa.Column("job_id", sa.BigInteger(), primary_key=True),
        sa.Column("minute_ns", sa.BigInteger(), primary_key=True),
        sa.Column("world_rank", sa.Integer(), primary_key=True, autoincrement=False),
        *[sa.Column(name, sa.BigInteger(), nullable=False)
          for name in ("elapsed_ns", *_CLASSES)],
    )  # fmt: skip
    classes = f"'{{{','.join(map(str, op_classes()))}}}'::int2[]"
    cls = f"coalesce(({classes})[o.op_id + 1], {MPI_CATEGORIES.index('other')})"
    per_run = ", ".join(
        f"coalesce(sum(o.time_ns) FILTER (WHERE {cls} = {k}), 0)"
        + (" + coalesce(v.file_io_ns, 0)" if name == "io_ns" else "")
        + f" AS {name}"
        for k, name in enumerate(_CLASSES)
    )
    columns = ("elapsed_ns", *_CLASSES)
    op.execute(
        f"INSERT INTO rank_share_fives (job_id, minute_ns, world_rank, {', '.join(columns)}) "
        f"SELECT job_id, minute_ns, world_rank, {', '.join(f'sum({c})' for c in columns)} "
        "FROM (SELECT r.job_id, r.minute_ns, r.world_rank, "
        f"r.last_end_ns - r.first_start_ns AS elapsed_ns, {per_run} FROM rank_fives r "
        f"LEFT JOIN rank_op_fives o ON {_SAME.format(t='o')} "
        f"LEFT JOIN rank_value_fives v ON {_SAME.format(t='v')} "
        "GROUP BY r.job_id, r.run_id, r.minute_ns, r.world_rank, r.first_start_ns, "
        "r.last_end_ns, v.file_io_ns) per_run GROUP BY 1, 2, 3"
    )


def downgrade() -> None:
    op.drop_table("rank_share_fives")
