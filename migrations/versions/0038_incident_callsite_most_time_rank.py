"""An incident's call sites name `most_time_rank`, not `slowest_rank`: the rank with the
most time at a site is often one that waits there for a late rank, not the slow one
(issue #31). The call sites each stored incident job keeps in its evidence
(`incident_jobs.evidence -> <signal> -> callsites[]`) have the key renamed, in order, the
value kept; the downgrade renames it back.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Renames key :old to :new in every call site of every signal of an evidence object.
RENAME = """
UPDATE incident_jobs j SET evidence = (
    SELECT jsonb_object_agg(kind, CASE
        WHEN jsonb_typeof(signal -> 'callsites') = 'array' THEN jsonb_set(signal, '{{callsites}}', (
            SELECT coalesce(jsonb_agg(CASE WHEN site ? '{old}'
                                           THEN (site - '{old}')
                                                || jsonb_build_object('{new}', site -> '{old}')
                                           ELSE site END ORDER BY n), '[]'::jsonb)
            FROM jsonb_array_elements(signal -> 'callsites') WITH ORDINALITY AS s(site, n)))
        ELSE signal END)
    FROM jsonb_each(j.evidence) AS e(kind, signal))
WHERE jsonb_typeof(j.evidence) = 'object' AND j.evidence::text LIKE '%"{old}"%'
"""


def upgrade() -> None:
    op.execute(RENAME.format(old="slowest_rank", new="most_time_rank"))


def downgrade() -> None:
    op.execute(RENAME.format(old="most_time_rank", new="slowest_rank"))
