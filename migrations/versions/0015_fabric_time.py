"""Fabric over time: per-minute and per-10-second port rollups (`fabric_port_minutes`,
`fabric_port_10s`, kept exact by the fabric store with every sweep; filled here from the
stored samples) and fabric events with a start and an end (`start_ns`, `end_ns` null
while open): a link_down is closed by the
link_up that followed it, a node_gone by the node_new; the link_up / node_new events that
closed one are merged into it, the others (a link or node seen for the first time) become
points (end = start). Events name their link (`link_id`), port (`port_id`, error bursts)
or node (`node_guid`).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Counter columns of fabric_port_samples (stacklens.constants.PORT_COUNTERS) and the rate
#: counters among them (RATE_COUNTERS), as of this revision.
COUNTERS = (
    "xmit_bytes", "rcv_bytes", "xmit_pkts", "rcv_pkts", "xmit_wait", "symbol_errors",
    "link_error_recovery", "link_downed", "rcv_errors", "xmit_discards", "vl15_dropped",
)  # fmt: skip
RATES = COUNTERS[:5]
#: The rollup tables: name, key column, span (ns).
ROLLUPS = (
    ("fabric_port_minutes", "minute_ns", 60 * 10**9),
    ("fabric_port_10s", "start_ns", 10**10),
)

#: An event's GUID text ('0x' + 16 hex digits) as the stored signed bigint.
_GUID = "('x' || lpad(substr({}, 3), 16, '0'))::bit(64)::bigint"


def upgrade() -> None:
    sums = ", ".join(f"sum(d_{c})" for c in COUNTERS)
    known = ", ".join(
        f"coalesce(sum(dt_ns) FILTER (WHERE d_{c} IS NOT NULL AND dt_ns > 0), 0)" for c in RATES
    )
    columns = ", ".join((*(f"d_{c}" for c in COUNTERS), *(f"t_{c}" for c in RATES)))
    for table, key, width in ROLLUPS:
        op.create_table(
            table,
            sa.Column("port_id", sa.Integer(), primary_key=True, autoincrement=False),
            sa.Column(key, sa.BigInteger(), primary_key=True, autoincrement=False),
            sa.Column("samples", sa.Integer(), nullable=False),
            sa.Column("last_ns", sa.BigInteger(), nullable=False),
            sa.Column("flags", sa.Integer(), nullable=False),
            *[sa.Column(f"d_{c}", sa.BigInteger(), nullable=True) for c in COUNTERS],
            *[sa.Column(f"t_{c}", sa.BigInteger(), nullable=False) for c in RATES],
        )
        op.execute(
            f"INSERT INTO {table} (port_id, {key}, samples, last_ns, flags, {columns}) "
            f"SELECT port_id, ts_ns / {width} * {width}, count(*), max(ts_ns), bit_or(flags), "
            f"{sums}, {known} FROM fabric_port_samples GROUP BY 1, 2"
        )
        op.create_index(f"ix_{table}_time", table, [key])

    op.alter_column("fabric_events", "ts_ns", new_column_name="start_ns")
    op.drop_index("ix_fabric_events_time", table_name="fabric_events")
    op.add_column("fabric_events", sa.Column("end_ns", sa.BigInteger(), nullable=True))
    op.add_column("fabric_events", sa.Column("link_id", sa.Integer(), nullable=True))
    op.add_column("fabric_events", sa.Column("port_id", sa.Integer(), nullable=True))
    op.add_column("fabric_events", sa.Column("node_guid", sa.BigInteger(), nullable=True))
    op.create_index("ix_fabric_events_start", "fabric_events", ["start_ns"])
    op.create_index("ix_fabric_events_link", "fabric_events", ["link_id", "start_ns"])
    a_guid, b_guid = _GUID.format("e.details->'a'->>0"), _GUID.format("e.details->'b'->>0")
    op.execute(
        f"UPDATE fabric_events e SET link_id = l.id FROM fabric_links l "
        f"WHERE e.kind IN ('link_down', 'link_up') AND l.a_guid = {a_guid} "
        f"AND l.a_port = (e.details->'a'->>1)::int AND l.b_guid = {b_guid} "
        f"AND l.b_port = (e.details->'b'->>1)::int"
    )
    op.execute(
        f"UPDATE fabric_events SET node_guid = {_GUID.format('details->>' + repr('guid'))} "
        "WHERE kind IN ('node_gone', 'node_new')"
    )
    for key, opened, closing in (("link_id", "link_down", "link_up"),
                                 ("node_guid", "node_gone", "node_new")):  # fmt: skip
        op.execute(f"""
            WITH seq AS (
                SELECT id, kind, lead(kind) OVER w AS next_kind,
                       lead(start_ns) OVER w AS next_start, lead(id) OVER w AS next_id
                FROM fabric_events
                WHERE kind IN ('{opened}', '{closing}') AND {key} IS NOT NULL
                WINDOW w AS (PARTITION BY {key} ORDER BY start_ns, id)
            ), closed AS (
                UPDATE fabric_events e SET end_ns = s.next_start FROM seq s
                WHERE e.id = s.id AND s.kind = '{opened}' AND s.next_kind = '{closing}'
                RETURNING s.next_id
            )
            DELETE FROM fabric_events WHERE id IN (SELECT next_id FROM closed)
        """)  # fmt: skip
    op.execute("UPDATE fabric_events SET end_ns = start_ns WHERE kind IN ('link_up', 'node_new')")


def downgrade() -> None:
    for opened, closing in (("link_down", "link_up"), ("node_gone", "node_new")):
        op.execute(
            "INSERT INTO fabric_events (start_ns, kind, subject, details) "
            f"SELECT end_ns, '{closing}', subject, details FROM fabric_events "
            f"WHERE kind = '{opened}' AND end_ns IS NOT NULL"
        )
    op.execute("DELETE FROM fabric_events WHERE kind = 'error_burst'")
    op.drop_index("ix_fabric_events_link", table_name="fabric_events")
    op.drop_index("ix_fabric_events_start", table_name="fabric_events")
    for column in ("node_guid", "port_id", "link_id", "end_ns"):
        op.drop_column("fabric_events", column)
    op.alter_column("fabric_events", "start_ns", new_column_name="ts_ns")
    op.create_index("ix_fabric_events_time", "fabric_events", ["ts_ns"])
    for table, _, _ in ROLLUPS:
        op.drop_index(f"ix_{table}_time", table_name=table)
        op.drop_table(table)
