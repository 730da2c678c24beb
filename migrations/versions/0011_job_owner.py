"""Job ownership: `jobs.owner_uid`, the Unix user the job's senders proved (SO_PEERCRED or
MUNGE, docs/identity.md), and the job's identity becomes (owner, job id): the same job id
sent by another user is another job, so nobody can pre-empt or add to someone else's.
Jobs received before this revision get owner -1 (unknown).

Revision ID: 0011
Revises: 0012 (numbered before it, merged after it)
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("owner_uid", sa.BigInteger(), nullable=True))
    op.execute("UPDATE jobs SET owner_uid = -1")
    op.alter_column("jobs", "owner_uid", nullable=False)
    op.drop_constraint("jobs_job_key_key", "jobs", type_="unique")
    op.create_unique_constraint("uq_jobs_owner_job_key", "jobs", ["owner_uid", "job_key"])


def downgrade() -> None:
    # Jobs of one id but different owners cannot all stay: keep each id's oldest.
    op.execute("DELETE FROM jobs j USING jobs k WHERE j.job_key = k.job_key AND j.id > k.id")
    op.drop_constraint("uq_jobs_owner_job_key", "jobs", type_="unique")
    op.create_unique_constraint("jobs_job_key_key", "jobs", ["job_key"])
    op.drop_column("jobs", "owner_uid")
