"""The collective rollups carry the root and the bytes (issue #30 point 6): `coll_minutes`
and `coll_fives` become one row per (run, minute, rank, communicator, size, op, root) with
calls, time and bytes, so the sums over a long window that need the bytes or the root (the
traffic attribution's modelled collectives, the families' collectives, a job's collective
totals) read the rollups instead of unnesting every interval's collective array.

The rows stored before cannot be split by root, so both tables are emptied and filled
again here: `coll_minutes` from the raw deltas for every minute not marked dirty (a dirty
one, quarantined or not yet rolled up, is read raw by every reader and recomputed by the
collector's next pass, as before), `coll_fives` from those minutes. The downgrade does the
same with the former keys.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039"
down_revision: str | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MINUTE_NS = 60_000_000_000
FIVE_NS = 300_000_000_000
_TABLES = ("coll_minutes", "coll_fives")
_KEYS = ("run_id", "minute_ns", "world_rank", "comm_id", "comm_size", "op_id")


def _fill(keys: Sequence[str], values: Sequence[str]) -> None:
    """Both tables filled again: the minutes from the raw deltas of every clean minute, the
    five minutes from those minutes; `keys` after the rank, `values` summed."""
    minute = f"d.t_end_ns / {MINUTE_NS} * {MINUTE_NS}"
    clean = (
        "NOT EXISTS (SELECT 1 FROM rollup_dirty r WHERE r.run_id = d.run_id "
        f"AND r.minute_ns = {minute})"
    )
    names = ", ".join(keys)
    op.execute(
        f"INSERT INTO coll_minutes (job_id, run_id, minute_ns, world_rank, {names}, "
        f"{', '.join(values)}) "
        f"SELECT d.job_id, d.run_id, {minute}, d.world_rank, "
        f"{', '.join(f'd.{k}' for k in keys)}, {', '.join(f'sum(d.{v})' for v in values)} "
        f"FROM coll_deltas d WHERE {clean} "
        f"GROUP BY d.job_id, d.run_id, {minute}, d.world_rank, "
        f"{', '.join(f'd.{k}' for k in keys)}"
    )
    five = f"minute_ns / {FIVE_NS} * {FIVE_NS}"
    op.execute(
        f"INSERT INTO coll_fives (job_id, run_id, minute_ns, world_rank, {names}, "
        f"{', '.join(values)}) "
        f"SELECT job_id, run_id, {five}, world_rank, {names}, "
        f"{', '.join(f'sum({v})' for v in values)} FROM coll_minutes "
        f"GROUP BY job_id, run_id, {five}, world_rank, {names}"
    )


def upgrade() -> None:
    for table in _TABLES:
        op.execute(f"DELETE FROM {table}")
        op.add_column(table, sa.Column("root", sa.Integer(), nullable=False,
                                       autoincrement=False))  # fmt: skip
        op.add_column(table, sa.Column("bytes", sa.BigInteger(), nullable=False))
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, [*_KEYS, "root"])
    _fill(("comm_id", "comm_size", "op_id", "root"), ("calls", "time_ns", "bytes"))


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"DELETE FROM {table}")
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.drop_column(table, "bytes")
        op.drop_column(table, "root")
        op.create_primary_key(f"{table}_pkey", table, list(_KEYS))
    _fill(("comm_id", "comm_size", "op_id"), ("calls", "time_ns"))
