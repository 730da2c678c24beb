"""Launch records of `stacklens run` (wire frame type launch): a run knows the launch its
ranks belong to and how that launch ended (exit status, signal, the launcher's last lines);
a launch whose ranks never reported is a run of its own (collector/store/launches.py).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("launch_key", sa.BigInteger()),
    ("ranks_expected", sa.Integer()),
    ("exit_code", sa.Integer()),
    ("exit_signal", sa.Integer()),
    ("forwarded_signal", sa.Integer()),
    ("launch_output", sa.Text()),
)


def upgrade() -> None:
    for name, kind in _COLUMNS:
        op.add_column("runs", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    for name, _ in reversed(_COLUMNS):
        op.drop_column("runs", name)
