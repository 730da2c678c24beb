"""The collector's call-site answers keyed by the module path too (issue #26, one user must
never label another's call sites): `callsite_symbols` becomes one row per (module path,
build-id, offset), serving only frames that name the path the resolver read. Before, one
row per (build-id, offset) served every job of that build-id, so a user whose program's
note claimed another user's build-id had the collector read their own file and name the
other user's call sites with it.

The rows stored before carry no path, and a row among them may be such a lie, so they are
deleted, not kept: the collector's catch-up at start (collector/resolver.py, CATCH_UP_NS)
resolves again the frames of the jobs seen in its window, from the file at each frame's
own path; older jobs' frames read "not resolved yet" (node answers and fallbacks, already
per owner or per path, are kept). The downgrade deletes the rows too (one per path cannot
be folded into one per build-id without choosing whose answer to trust).

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM callsite_symbols")
    op.add_column("callsite_symbols", sa.Column("module", sa.Text(), nullable=False))
    op.drop_constraint("callsite_symbols_pkey", "callsite_symbols", type_="primary")
    op.create_primary_key(
        "callsite_symbols_pkey", "callsite_symbols", ["module", "build_id", "site_offset"]
    )


def downgrade() -> None:
    op.execute("DELETE FROM callsite_symbols")
    op.drop_constraint("callsite_symbols_pkey", "callsite_symbols", type_="primary")
    op.drop_column("callsite_symbols", "module")
    op.create_primary_key("callsite_symbols_pkey", "callsite_symbols", ["build_id", "site_offset"])
