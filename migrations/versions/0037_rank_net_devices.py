"""The network devices each rank's MPI was told to use (issue #27 point 3, rails): the
hooks send "NAME=value" of the first of UCX_NET_DEVICES, OMPI_MCA_btl_openib_if_include,
FI_VERBS_DEVICE_NAME, MV2_IBA_HCA set in the rank's environment (rank_info.net_devices);
`ranks.net_devices` keeps it, and the traffic attribution binds the rank to those rails
(server/traffic/rails.py). Ranks stored before have none (bound by the default policy).

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("ranks", sa.Column("net_devices", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("ranks", "net_devices")
