"""How each wire counter table is stored: its PostgreSQL table, layout and column types.

Every stored table starts with (job_id, run_id, world_rank, t_start_ns, t_end_ns): the
frame's job and run (their database ids) and its rank (a non-MPI process's number in its
run), and its interval from the frame header; the remaining columns come from the wire
record's fields of the same name (pad fields are not stored). Column types are PostgreSQL
binary COPY types.

Numeric tables use the *array* layout: one row per frame, one array per field (`peer[i]`,
`bytes_sent[i]`, ... are record i). A frame of 64 peer records is one tuple instead of
64, which is what makes ingest fast and samples small on disk (PostgreSQL pays its per-
tuple header, index entry and WAL record once per frame, and compresses the arrays). A
view named `<...>_deltas` unnests them back into one row per record for queries. Tables
with text per record (file paths) use one row per record.

Message counts are stored as int4 (a 64-peer p2p row then stays under PostgreSQL's 2 KiB
TOAST threshold, uncompressed: fast to write, 32 B per sample). A count that does not fit
(over 2^31 messages to one peer in one interval) is split by the encoder over repeated
elements of the same key, so every sum stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from collector.codec import COLUMN
from collector.store.copy import INT_WIDTH
from stacklens import wire
from stacklens.schema import IO_COUNTERS, PORT_COUNTERS

#: Columns filled from the frame header, in table order, with their COPY types.
INTERVAL_COLUMNS = (
    ("job_id", "int8"),
    ("run_id", "int8"),
    ("world_rank", "int4"),
    ("t_start_ns", "int8"),
    ("t_end_ns", "int8"),
)


@dataclass(frozen=True)
class DeltaTable:
    """A wire table stored as per-interval deltas (see the module doc for the layouts)."""

    wire: str
    sql: str  # the table written to
    fields: tuple[tuple[str, str], ...]  # (record field, COPY element type), in table order
    arrays: bool = True  # array layout (one row per frame) or one row per record
    view: str | None = None  # the one-row-per-record view over an array table
    keys: tuple[str, ...] = ()  # fields that identify a record (the rest are counters)

    @property
    def copy_statement(self) -> str:
        """The COPY ... FROM STDIN (FORMAT BINARY) statement for this table."""
        names = [c for c, _ in INTERVAL_COLUMNS] + [f for f, _ in self.fields]
        return f"COPY {self.sql} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"

    @cached_property
    def columns(self) -> np.ndarray:
        """The array columns as the compiled encoder reads them (collector/codec.py)."""
        record = wire.SPEC.table(self.wire).dtype
        out = np.zeros(len(self.fields), dtype=COLUMN)
        for i, (name, kind) in enumerate(self.fields):
            field, offset = record.fields[name][:2]
            out[i] = (offset, field.itemsize, INT_WIDTH[kind], name in self.keys, 0,
                      ELEMENT_OID[kind])  # fmt: skip
        return out


#: PostgreSQL type oids of the array elements.
ELEMENT_OID = {"int2": 21, "int4": 23, "int8": 20}


def _counters(*names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, "int8") for name in names)


DELTA_TABLES: tuple[DeltaTable, ...] = (
    DeltaTable(
        "p2p",
        "p2p_frames",
        (
            ("peer", "int4"),
            ("bytes_sent", "int8"),
            ("msgs_sent", "int4"),
            ("bytes_recv", "int8"),
            ("msgs_recv", "int4"),
        ),
        view="p2p_deltas",
        keys=("peer",),
    ),
    DeltaTable(
        "op",
        "op_frames",
        (("op_id", "int2"), *_counters("calls", "bytes", "time_ns")),
        view="op_deltas",
        keys=("op_id",),
    ),
    DeltaTable(
        "hist",
        "op_hist_frames",
        (("op_id", "int2"), ("bucket", "int2"), *_counters("count")),
        view="op_hist_deltas",
        keys=("op_id", "bucket"),
    ),
    DeltaTable(
        "coll",
        "coll_frames",
        (
            ("op_id", "int2"),
            ("comm_id", "int8"),
            ("comm_size", "int4"),
            ("root", "int4"),  # the wire's 0xFFFFFFFF "no root" becomes -1
            *_counters("calls", "bytes", "time_ns"),
        ),
        view="coll_deltas",
        keys=("op_id", "comm_id", "comm_size", "root"),
    ),
    DeltaTable(
        "rma",
        "rma_frames",
        (("target", "int4"), ("op_id", "int2"), *_counters("calls", "bytes")),
        view="rma_deltas",
        keys=("target", "op_id"),
    ),
    DeltaTable(
        "io",
        "io_deltas",
        (
            ("layer", "int2"),
            *_counters(*IO_COUNTERS),
            ("path", "text"),
            ("mount", "text"),
            ("fstype", "text"),
        ),
        arrays=False,
    ),
    DeltaTable(
        "hca",
        "hca_records",  # read through the view hca_deltas (unknown counters are NULL)
        (
            ("device", "text"),
            ("port", "int2"),
            ("valid", "int4"),
            ("node_guid", "int8"),  # the u64 GUID wraps to its two's complement
            *_counters(*PORT_COUNTERS),
        ),
        arrays=False,
    ),
)
