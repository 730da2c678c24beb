"""Vectorised PostgreSQL binary COPY encoding of integer columns (numpy, no per-row Python)."""

from __future__ import annotations

import numpy as np

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
_TRAILER = (-1).to_bytes(2, "big", signed=True)
_PG_WIDTH = {"int2": 2, "int4": 4, "int8": 8}


def binary_copy(columns: list[tuple[str, np.ndarray]]) -> bytes:
    """Encode equal-length integer columns as one PostgreSQL binary COPY stream.

    `columns` is a list of (PostgreSQL type: int2/int4/int8, values) in table column order.
    """
    rows = len(columns[0][1]) if columns else 0
    fields: list[tuple[str, str]] = [("nfields", ">i2")]
    for i, (pg_type, _) in enumerate(columns):
        fields += [(f"len{i}", ">i4"), (f"val{i}", f">i{_PG_WIDTH[pg_type]}")]
    out = np.empty(rows, dtype=np.dtype(fields))
    out["nfields"] = len(columns)
    for i, (pg_type, values) in enumerate(columns):
        if len(values) != rows:
            raise ValueError("binary_copy: columns differ in length")
        out[f"len{i}"] = _PG_WIDTH[pg_type]
        out[f"val{i}"] = values
    return _SIGNATURE + out.tobytes() + _TRAILER
