"""Incidents (server/incidents): detector signals joined in time and topology, and the jobs
each involves (one row per job, so the owner filter hides other users' jobs).

Revision ID: 0017
Revises: 0015
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("severity", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("start_ns", sa.BigInteger(), nullable=False),
        sa.Column("end_ns", sa.BigInteger(), nullable=True),
        sa.Column("detected_ns", sa.BigInteger(), nullable=False),
        sa.Column("updated_ns", sa.BigInteger(), nullable=False),
        sa.Column("links", postgresql.JSONB(), nullable=False),
        sa.Column("members", postgresql.JSONB(), nullable=False),
        sa.Column("link_ids", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("signals", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.UniqueConstraint("key", name="incidents_key_key"),
    )
    op.create_index("ix_incidents_start", "incidents", ["start_ns"])
    op.create_index(
        "ix_incidents_open", "incidents", ["end_ns"], postgresql_where=sa.text("end_ns IS NULL")
    )
    op.create_table(
        "incident_jobs",
        sa.Column("incident_id", sa.BigInteger(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("signals", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("ranks", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("files", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("link_bytes", sa.BigInteger(), nullable=True),
        sa.Column("evidence", postgresql.JSONB(), nullable=False),
        sa.ForeignKeyConstraint(["incident_id"], ["incidents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("incident_id", "slot"),
    )
    op.create_index("ix_incident_jobs_job", "incident_jobs", ["job_id"])


def downgrade() -> None:
    op.drop_table("incident_jobs")
    op.drop_table("incidents")
