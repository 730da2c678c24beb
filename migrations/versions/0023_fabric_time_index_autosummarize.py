"""The fabric samples' time index (`ix_fabric_port_samples_time_brin`, a BRIN on ts_ns)
summarizes each block range as soon as it is filled (`autosummarize`), instead of only
when the day's partition is vacuumed. A range without a summary matches every time, so a
raw read by time (a window's partial first and last 10 s, a playback step) rechecked
every row written since the last vacuum (by default after 20 % more rows: up to ~17 M
samples of 1,000 ports at 1 s). Recreated on the partitioned table: every partition's
index is rebuilt with the option, and the partitions made later inherit it.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX, TABLE = "ix_fabric_port_samples_time_brin", "fabric_port_samples"


def upgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.create_index(
        INDEX, TABLE, ["ts_ns"], postgresql_using="brin", postgresql_with={"autosummarize": "on"}
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.create_index(INDEX, TABLE, ["ts_ns"], postgresql_using="brin")
