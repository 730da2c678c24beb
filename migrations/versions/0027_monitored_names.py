"""Monitored traffic gets its own name: `wire_frames` / `wire_deltas` become
`monitored_frames` / `monitored_deltas` ("wire" is the wire format only; the traffic the
MPI's monitoring counts is "monitored", wire table 11 `monitored`).

Renamed in place, data kept: the partitioned table, each of its day partitions
(`<table>_pYYYYMMDD`, found by their parent as collector/store/partitions.py finds them),
the indexes of both whose names hold the table's name (`ix_wire_frames_job_time` and the
partitions' own copies of it) and the view over them (a view refers to its table by oid,
so it keeps reading the renamed one).

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (old, new) names of the array table and of its view.
TABLE = ("wire_frames", "monitored_frames")
VIEW = ("wire_deltas", "monitored_deltas")

_PARTITIONS = sa.text(
    "SELECT child.relname FROM pg_inherits "
    "JOIN pg_class parent ON parent.oid = pg_inherits.inhparent "
    "JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
    "WHERE parent.relname = :table ORDER BY child.relname"
)
_INDEXES = sa.text(
    "SELECT i.relname FROM pg_index JOIN pg_class i ON i.oid = pg_index.indexrelid "
    "JOIN pg_class t ON t.oid = pg_index.indrelid WHERE t.relname = :table ORDER BY i.relname"
)


def _rename_indexes(table: str, old: str, new: str) -> None:
    """Renames the indexes of `table` whose names hold `old` (`old` -> `new` in them)."""
    conn = op.get_bind()
    for (index,) in conn.execute(_INDEXES, {"table": table}).all():
        if old in index:
            op.execute(f'ALTER INDEX "{index}" RENAME TO "{index.replace(old, new)}"')


def _rename(table: tuple[str, str], view: tuple[str, str]) -> None:
    """Renames table[0] to table[1] with its partitions and indexes, and view[0] to view[1]."""
    old, new = table
    conn = op.get_bind()
    for (partition,) in conn.execute(_PARTITIONS, {"table": old}).all():
        renamed = new + partition.removeprefix(old)
        _rename_indexes(partition, partition, renamed)
        op.execute(f'ALTER TABLE "{partition}" RENAME TO "{renamed}"')
    _rename_indexes(old, old, new)
    op.execute(f'ALTER TABLE "{old}" RENAME TO "{new}"')
    op.execute(f'ALTER VIEW "{view[0]}" RENAME TO "{view[1]}"')


def upgrade() -> None:
    _rename(TABLE, VIEW)


def downgrade() -> None:
    _rename(TABLE[::-1], VIEW[::-1])
