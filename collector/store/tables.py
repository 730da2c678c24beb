"""How each wire counter table is stored: its PostgreSQL table and column types.

Every delta table starts with (job_id, world_rank, t_start_ns, t_end_ns), taken from the
frame header; the remaining columns come from the wire record's fields of the same name
(pad fields are not stored). Column types are PostgreSQL binary COPY types.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Columns filled from the frame header, in table order, with their COPY types.
INTERVAL_COLUMNS = (
    ("job_id", "int8"),
    ("world_rank", "int4"),
    ("t_start_ns", "int8"),
    ("t_end_ns", "int8"),
)


@dataclass(frozen=True)
class DeltaTable:
    """A wire table stored as per-interval delta rows."""

    wire: str
    sql: str
    fields: tuple[tuple[str, str], ...]  # (record field, COPY type), in table order

    @property
    def copy_statement(self) -> str:
        """The COPY ... FROM STDIN (FORMAT BINARY) statement for this table."""
        names = [c for c, _ in INTERVAL_COLUMNS] + [f for f, _ in self.fields]
        return f"COPY {self.sql} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"


def _counters(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, "int8") for name in names)


DELTA_TABLES: tuple[DeltaTable, ...] = (
    DeltaTable(
        "p2p",
        "p2p_deltas",
        (("peer", "int4"), *_counters("bytes_sent", "msgs_sent", "bytes_recv", "msgs_recv")),
    ),
    DeltaTable("op", "op_deltas", (("op_id", "int2"), *_counters("calls", "bytes", "time_ns"))),
    DeltaTable(
        "hist", "op_hist_deltas", (("op_id", "int2"), ("bucket", "int2"), *_counters("count"))
    ),
    DeltaTable(
        "coll",
        "coll_deltas",
        (
            ("op_id", "int2"),
            ("comm_id", "int8"),
            ("comm_size", "int4"),
            ("root", "int4"),  # the wire's 0xFFFFFFFF "no root" becomes -1
            *_counters("calls", "bytes", "time_ns"),
        ),
    ),
    DeltaTable(
        "rma", "rma_deltas", (("target", "int4"), ("op_id", "int2"), *_counters("calls", "bytes"))
    ),
    DeltaTable(
        "io",
        "io_deltas",
        (
            ("layer", "int2"),
            *_counters(
                "opens",
                "reads",
                "writes",
                "bytes_read",
                "bytes_written",
                "read_time_ns",
                "write_time_ns",
                "meta_time_ns",
            ),
            ("path", "text"),
            ("mount", "text"),
            ("fstype", "text"),
        ),
    ),
)
