"""p2p_frames packs its five per-record arrays into two (issue #30 point 1): `peer_msgs`
(int4: peer, msgs_sent, msgs_recv, n elements each) and `bytes` (int8: bytes_sent,
bytes_recv). Every array of a row costs a 24-byte header and its alignment: three fewer
make a 16-peer row ~75 B smaller, 37 B per sample on disk instead of 44 B
(bench/RESULTS.md). The view p2p_deltas reads the records back as before (same columns,
types and order of records), so no reader changes.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HEAD = "f.job_id, f.run_id, f.world_rank, f.t_start_ns, f.t_end_ns"

#: The records of a packed row: n = cardinality(bytes) / 2, each field a slice of n.
_PACKED_VIEW = (
    f"CREATE VIEW p2p_deltas AS SELECT {_HEAD}, u.* FROM p2p_frames f "
    "CROSS JOIN LATERAL (SELECT cardinality(f.bytes) / 2 AS n) c "
    "CROSS JOIN LATERAL unnest(f.peer_msgs[1:c.n], f.bytes[1:c.n], "
    "f.peer_msgs[c.n + 1:2 * c.n], f.bytes[c.n + 1:2 * c.n], f.peer_msgs[2 * c.n + 1:3 * c.n]) "
    "AS u(peer, bytes_sent, msgs_sent, bytes_recv, msgs_recv)"
)

_FIELDS = ("peer", "bytes_sent", "msgs_sent", "bytes_recv", "msgs_recv")

_SPREAD_VIEW = (
    f"CREATE VIEW p2p_deltas AS SELECT {_HEAD}, u.* FROM p2p_frames f "
    f"CROSS JOIN LATERAL unnest({', '.join(f'f.{n}' for n in _FIELDS)}) AS u({', '.join(_FIELDS)})"
)


def upgrade() -> None:
    op.execute("DROP VIEW p2p_deltas")
    op.execute("ALTER TABLE p2p_frames ADD COLUMN peer_msgs integer[], ADD COLUMN bytes bigint[]")
    op.execute(
        "UPDATE p2p_frames SET peer_msgs = peer || msgs_sent || msgs_recv, "
        "bytes = bytes_sent || bytes_recv"
    )
    op.execute(
        "ALTER TABLE p2p_frames ALTER COLUMN peer_msgs SET NOT NULL, "
        "ALTER COLUMN bytes SET NOT NULL, " + ", ".join(f"DROP COLUMN {n}" for n in _FIELDS)
    )
    op.execute(_PACKED_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW p2p_deltas")
    op.execute(
        "ALTER TABLE p2p_frames ADD COLUMN peer integer[], ADD COLUMN bytes_sent bigint[], "
        "ADD COLUMN msgs_sent integer[], ADD COLUMN bytes_recv bigint[], "
        "ADD COLUMN msgs_recv integer[]"
    )
    n = "(cardinality(bytes) / 2)"
    op.execute(
        f"UPDATE p2p_frames SET peer = peer_msgs[1:{n}], bytes_sent = bytes[1:{n}], "
        f"msgs_sent = peer_msgs[{n} + 1:2 * {n}], bytes_recv = bytes[{n} + 1:2 * {n}], "
        f"msgs_recv = peer_msgs[2 * {n} + 1:3 * {n}]"
    )
    op.execute(
        "ALTER TABLE p2p_frames "
        + ", ".join(f"ALTER COLUMN {n} SET NOT NULL" for n in _FIELDS)
        + ", DROP COLUMN peer_msgs, DROP COLUMN bytes"
    )
    op.execute(_SPREAD_VIEW)
