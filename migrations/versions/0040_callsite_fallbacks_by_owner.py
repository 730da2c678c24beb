"""The collector's call-site fallbacks keyed by the jobs' owner too (issue #26 point 2, a
cross-user leak): `callsite_fallbacks` becomes one row per (owner, module path, build-id,
offset). The resolver now reads a module file only when the job's owner may read it
(stacklens/symbols.owner_access), so its reason (missing, too large, rebuilt with a
build-id that begins ...) is what that owner may see, shown on that owner's jobs only.
Before, one row per path served every job naming the path, its reason read as the
collector's user: a job could name another user's private file and learn from the reason
whether it exists, and part of its build-id.

The rows stored before were read as the collector's user, which is what uid 0 may see
(uid 0 may read all): they are kept as uid 0's. Another owner's frames find no fallback of
theirs and are pending again: the collector's catch-up at start (collector/resolver.py,
CATCH_UP_NS) resolves the frames of the jobs seen in its window for their owners; older
jobs' frames read "not resolved yet". The downgrade keeps uid 0's rows only (one per path
cannot hold several owners' reasons).

Revision ID: 0040
Revises: 0039
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040"
down_revision: str | None = "0039"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "callsite_fallbacks",
        sa.Column(
            "owner_uid", sa.BigInteger(), autoincrement=False, nullable=False, server_default="0"
        ),
    )
    op.alter_column("callsite_fallbacks", "owner_uid", server_default=None)
    op.drop_constraint("callsite_fallbacks_pkey", "callsite_fallbacks", type_="primary")
    op.create_primary_key(
        "callsite_fallbacks_pkey",
        "callsite_fallbacks",
        ["owner_uid", "module", "build_id", "site_offset"],
    )


def downgrade() -> None:
    op.execute("DELETE FROM callsite_fallbacks WHERE owner_uid <> 0")
    op.drop_constraint("callsite_fallbacks_pkey", "callsite_fallbacks", type_="primary")
    op.drop_column("callsite_fallbacks", "owner_uid")
    op.create_primary_key(
        "callsite_fallbacks_pkey", "callsite_fallbacks", ["module", "build_id", "site_offset"]
    )
