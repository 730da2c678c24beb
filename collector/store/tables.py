"""How each wire counter table is stored: its PostgreSQL table, layout and column types.

Every stored table starts with (job_id, run_id, world_rank, t_start_ns, t_end_ns): the
frame's job and run (their database ids) and its rank (a non-MPI process's number in its
run), and its interval from the frame header; the remaining columns come from the wire
record's fields of the same name (pad fields are not stored). Tables, columns and types
are read from the storage models (stacklens/schema.py), turned into PostgreSQL binary COPY
types here.

Numeric tables use the *array* layout: one row per frame, one array per field (`peer[i]`,
`bytes_sent[i]`, ... are record i). A frame of 64 peer records is one tuple instead of
64, which is what makes ingest fast and samples small on disk (PostgreSQL pays its per-
tuple header, index entry and WAL record once per frame, and compresses the arrays). A
view named `<...>_deltas` unnests them back into one row per record for queries. Tables
with text per record (file paths) use one row per record.

p2p_frames packs its five fields into two arrays (`peer_msgs`: peer, msgs_sent, msgs_recv;
`bytes`: bytes_sent, bytes_recv; stacklens.schema.P2P_PACKED): each array costs a header of
24 B, so a 16-peer row is ~75 B smaller and a sample ~37 B instead of 44 B on disk.

Message counts are stored as int4 (a 64-peer p2p row then stays under PostgreSQL's 2 KiB
TOAST threshold, uncompressed: fast to write, 32 B per sample). A count that does not fit
(over 2^31 messages to one peer in one interval) is split by the encoder over repeated
elements of the same key, so every sum stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, ColumnElement, Integer, SmallInteger, Text
from sqlalchemy.dialects.postgresql import ARRAY

from collector.codec import COLUMN
from collector.store.copy import INT_WIDTH
from stacklens import wire
from stacklens.schema import (
    P2P_PACKED,
    RANK_INTERVAL,
    Base,
    CallsiteDelta,
    CallsiteFrames,
    CallsitePath,
    CollDelta,
    CollFrames,
    CommMade,
    CommP2PDelta,
    CommP2PFrames,
    HcaRecords,
    IoDelta,
    MonitoredDelta,
    MonitoredFrames,
    OpDelta,
    OpFrames,
    OpHistDelta,
    OpHistFrames,
    P2PDelta,
    P2PFrames,
    RmaDelta,
    RmaFrames,
)
from stacklens.wire import fields_of

#: PostgreSQL binary COPY type of each column type the delta tables use.
_COPY_TYPES = {SmallInteger: "int2", Integer: "int4", BigInteger: "int8", Text: "text"}


def _copy_type(column: ColumnElement[Any]) -> str:
    """COPY type of a column (of its elements, for an array column)."""
    kind = column.type.item_type if isinstance(column.type, ARRAY) else column.type
    return _COPY_TYPES[type(kind)]


def _columns(model: type[Base], interval: bool) -> tuple[tuple[str, str], ...]:
    """(name, COPY type) of a storage model's interval columns, or of its record columns."""
    return tuple(
        (c.name, _copy_type(c))
        for c in model.__table__.columns
        if (c.name in RANK_INTERVAL) == interval
    )


#: Columns filled from the frame header, in table order, with their COPY types.
INTERVAL_COLUMNS = tuple(sorted(_columns(P2PFrames, True), key=lambda c: RANK_INTERVAL.index(c[0])))


@dataclass(frozen=True)
class DeltaTable:
    """A wire table stored as per-interval deltas (see the module doc for the layouts)."""

    wire: str
    sql: str  # the table written to
    fields: tuple[tuple[str, str], ...]  # (record field, COPY element type), in table order
    arrays: bool = True  # array layout (one row per frame) or one row per record
    view: str | None = None  # the one-row-per-record view over an array table
    keys: tuple[str, ...] = ()  # fields that identify a record (the rest are counters)
    # a present but empty section is stored too (a row of empty arrays): its presence
    # means something (monitored: monitored, nothing sent)
    empty_rows: bool = False
    # array columns holding several fields one after the other ((column, fields), in table
    # order; `fields` then lists those fields in the same order); none: a column per field
    packed: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def stored_columns(self) -> list[str]:
        """The table's record columns, in table order (COPY order)."""
        return [c for c, _ in self.packed] if self.packed else [f for f, _ in self.fields]

    @property
    def copy_statement(self) -> str:
        """The COPY ... FROM STDIN (FORMAT BINARY) statement for this table."""
        names = [c for c, _ in INTERVAL_COLUMNS] + self.stored_columns
        return f"COPY {self.sql} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"

    @cached_property
    def columns(self) -> np.ndarray:
        """The array columns as the compiled encoder reads them (collector/codec.py)."""
        record = wire.SPEC.table(self.wire).dtype
        joined = {f for _, fields in self.packed for f in fields[1:]}
        out = np.zeros(len(self.fields), dtype=COLUMN)
        for i, (name, kind) in enumerate(self.fields):
            field, offset = fields_of(record)[name][:2]
            out[i] = (offset, field.itemsize, INT_WIDTH[kind], name in self.keys,
                      name in joined, 0, ELEMENT_OID[kind])  # fmt: skip
        return out


#: PostgreSQL type oids of the array elements.
ELEMENT_OID = {"int2": 21, "int4": 23, "int8": 20}


def _stored(
    wire_table: str,
    model: type[Base],
    view: str | None = None,
    keys: tuple[str, ...] = (),
    empty_rows: bool = False,
    packed: dict[str, tuple[str, ...]] | None = None,
    view_model: type[Base] | None = None,
) -> DeltaTable:
    """How wire table `wire_table` is stored: in `model`'s table (its record columns are
    the record fields of the same name, or `packed` several to a column: their types are
    then `view_model`'s), read through `view` if an array table."""
    fields = _columns(model, False)
    if packed:
        assert view_model is not None, "a packed table's fields are typed by its view"
        types = dict(_columns(view_model, False))
        fields = tuple((f, types[f]) for names in packed.values() for f in names)
    return DeltaTable(
        wire_table,
        model.__tablename__,
        fields,
        arrays=view is not None,
        view=view,
        keys=keys,
        empty_rows=empty_rows,
        packed=tuple(packed.items()) if packed else (),
    )


DELTA_TABLES: tuple[DeltaTable, ...] = (
    _stored(
        "p2p",
        P2PFrames,
        P2PDelta.__tablename__,
        keys=("peer",),
        packed=P2P_PACKED,
        view_model=P2PDelta,
    ),  # fmt: skip
    _stored("op", OpFrames, OpDelta.__tablename__, keys=("op_id",)),
    _stored("hist", OpHistFrames, OpHistDelta.__tablename__, keys=("op_id", "bucket")),
    # the wire's 0xFFFFFFFF "no root" becomes -1 in coll.root (int4)
    _stored(
        "coll", CollFrames, CollDelta.__tablename__, keys=("op_id", "comm_id", "comm_size", "root")
    ),
    _stored("rma", RmaFrames, RmaDelta.__tablename__, keys=("target", "op_id")),
    _stored("io", IoDelta),  # one row per record (a path each)
    _stored("hca", HcaRecords),  # read through the view hca_deltas (unknown counters NULL)
    _stored("comm", CommMade),  # one row per record (texts: grid, module, name)
    # the wire's 0xFFFFFFFF "no peer" of an overflow record becomes -1 (int4)
    _stored(
        "comm_p2p",
        CommP2PFrames,
        CommP2PDelta.__tablename__,
        keys=("comm_id", "op_id", "peer", "received"),
    ),
    _stored(
        "callsite",
        CallsiteFrames,
        CallsiteDelta.__tablename__,
        keys=("site_id", "layer", "op_id", "comm_id", "bucket"),
    ),
    _stored("callsite_frame", CallsitePath),  # one row per record (texts: build-id, module)
    # every frame of a monitoring rank has a row, empty or not (absent = not monitored)
    _stored(
        "monitored", MonitoredFrames, MonitoredDelta.__tablename__, keys=("peer",), empty_rows=True
    ),
)
