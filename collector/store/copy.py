"""PostgreSQL binary COPY encoding of numpy columns, for the one-row-per-record tables.

Integer-only tables are encoded fully vectorised (one structured array, no per-row
Python); tables with text columns (a file path per row) row by row. The array-layout
tables are encoded by the compiled codec (collector/codec.py).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from stacklens.wire import fields_of

COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)
INT_WIDTH = {"int2": 2, "int4": 4, "int8": 8}


Column = tuple[str, np.ndarray] | tuple[str, np.ndarray, np.ndarray | None]


def binary_copy(columns: Sequence[Column]) -> bytes:
    """Encode equal-length columns as one PostgreSQL binary COPY stream.

    `columns` is a list of (type, values) or (type, values, null mask) in table column
    order; type is int2, int4 or int8 (integers wrap to the column width: an unsigned
    0xFFFFFFFF becomes int4 -1; True in the mask means NULL) or text (a numpy bytes
    array; invalid UTF-8 is replaced, never rejected by the server).
    """
    rows = len(columns[0][1]) if columns else 0
    if any(len(column[1]) != rows for column in columns):
        raise ValueError("binary_copy: columns differ in length")
    if all(column[0] in INT_WIDTH for column in columns):
        return COPY_SIGNATURE + _integer_rows(columns, rows) + COPY_TRAILER
    return COPY_SIGNATURE + _mixed_rows(columns, rows) + COPY_TRAILER


def _integer_rows(columns: Sequence[Column], rows: int) -> bytes:
    """Fixed-width rows in one structured array; NULL fields are cut out with a byte mask."""
    fields: list[tuple[str, str]] = [("nfields", ">i2")]
    for i, column in enumerate(columns):
        fields += [(f"len{i}", ">i4"), (f"val{i}", f">i{INT_WIDTH[column[0]]}")]
    dtype = np.dtype(fields)
    out = np.zeros(rows, dtype=dtype)
    out["nfields"] = len(columns)
    keep = None
    for i, (pg_type, values, *mask) in enumerate(columns):
        width = INT_WIDTH[pg_type]
        out[f"len{i}"] = width
        out[f"val{i}"] = np.asarray(values).astype(f"<i{width}", casting="unsafe")
        null = mask[0] if mask else None
        if null is not None and null.any():
            out[f"len{i}"][null] = -1
            if keep is None:
                keep = np.ones((rows, dtype.itemsize), dtype=bool)
            offset = fields_of(dtype)[f"val{i}"][1]
            keep[np.ix_(null, np.arange(offset, offset + width))] = False
    if keep is None:
        return out.tobytes()
    return out.view(np.uint8).reshape(rows, dtype.itemsize)[keep].tobytes()


def _mixed_rows(columns: Sequence[Column], rows: int) -> bytes:
    """Rows of variable width: each column is encoded in one piece, then cut per row."""
    header = struct.pack(">h", len(columns))
    encoded = [_encode_column(pg_type, values, rows) for pg_type, values, *_ in columns]
    return b"".join(header + b"".join(col[i] for col in encoded) for i in range(rows))


def _encode_column(pg_type: str, values: np.ndarray, rows: int) -> list[bytes]:
    """Every field of one column, each with its length prefix (no NULLs here)."""
    if pg_type == "text":
        # C strings: text ends at the first NUL; invalid UTF-8 is replaced.
        texts = [v.split(b"\0", 1)[0].decode("utf-8", "replace").encode() for v in values]
        return [struct.pack(">i", len(t)) + t for t in texts]
    width = INT_WIDTH[pg_type]
    ints = np.asarray(values).astype(f">i{width}", casting="unsafe").tobytes()
    prefix = struct.pack(">i", width)
    return [prefix + ints[i * width : (i + 1) * width] for i in range(rows)]
