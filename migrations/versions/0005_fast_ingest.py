"""Fast ingest: p2p message counts as int4 arrays, array partitions kept uncompressed, and
no foreign key from the frame ledger to jobs.

A 64-peer p2p row with int8 message counts is just over PostgreSQL's 2 KiB TOAST
threshold, so every row was pglz-compressed on insert (a raw COPY ran at 0.74 M samples/s);
with int4 counts it is 1.8 KiB and is stored as is (3.8 M samples/s, 32 B per sample,
bench/RESULTS.md). Per-interval counts above 2^31 are split by the encoder over repeated
elements of the same peer (collector/store/tables.py), so sums stay exact. Partitions of
the array tables get toast_tuple_target = 8160 (collector/store/partitions.py), so rows
of up to ~290 peers are not compressed either; this revision applies it to the partitions
that exist already.

The ledger (`received_frames`) gets a row per frame; its foreign key to `jobs` made every
row check and KEY SHARE-lock the job's row, which concurrent writer transactions turned
into multixacts (10-40 µs per frame). Retention deletes the ledger rows of the jobs it
deletes instead (collector/store/partitions.py).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ARRAY_TABLES = ("p2p_frames", "op_frames", "op_hist_frames", "coll_frames", "rma_frames")
_VIEW = (
    "CREATE VIEW p2p_deltas AS SELECT f.job_id, f.world_rank, f.t_start_ns, f.t_end_ns, u.* "
    "FROM p2p_frames f CROSS JOIN LATERAL "
    "unnest(f.peer, f.bytes_sent, f.msgs_sent, f.bytes_recv, f.msgs_recv) "
    "AS u(peer, bytes_sent, msgs_sent, bytes_recv, msgs_recv)"
)


def _set_partitions(option: str) -> None:
    for table in ARRAY_TABLES:
        op.execute(
            f"DO $$ DECLARE p regclass; BEGIN "
            f"FOR p IN SELECT inhrelid::regclass FROM pg_inherits "
            f"WHERE inhparent = '{table}'::regclass LOOP "
            f"EXECUTE format('ALTER TABLE %s {option}', p); END LOOP; END $$"
        )


def _retype(kind: str, cast: str) -> None:
    op.execute("DROP VIEW p2p_deltas")
    for column in ("msgs_sent", "msgs_recv"):
        op.execute(
            f"ALTER TABLE p2p_frames ALTER COLUMN {column} TYPE {kind} USING {column}::{cast}"
        )
    op.execute(_VIEW)


def upgrade() -> None:
    # Existing int8 counts above 2^31 would not fit: none are written by any sender yet
    # that could exceed it in one interval (the cast fails loudly rather than wrap).
    _retype("integer[]", "integer[]")
    _set_partitions("SET (toast_tuple_target = 8160)")
    op.drop_constraint("received_frames_job_id_fkey", "received_frames", type_="foreignkey")


def downgrade() -> None:
    op.execute("DELETE FROM received_frames WHERE job_id NOT IN (SELECT id FROM jobs)")
    op.create_foreign_key(
        "received_frames_job_id_fkey", "received_frames", "jobs", ["job_id"], ["id"],
        ondelete="CASCADE",
    )  # fmt: skip
    _set_partitions("RESET (toast_tuple_target)")
    _retype("bigint[]", "bigint[]")
