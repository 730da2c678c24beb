"""Tables and series as files: `?format=csv|parquet` on the routes that answer a table (the
answer's main list, one row per item) or a series (one row per step and key); and large
answers built as plain data sent as JSON as they are (`plain_json`).

Columns are the item model's fields, in order; a nested value (a list or a mapping, e.g.
an RMA pair's ops) is one JSON text cell. CSV has a header line and RFC 4180 quoting;
Parquet has int64 integers, float64 floats, UTF-8 strings and booleans as they are.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pydantic_core
from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel

Format = Literal["json", "csv", "parquet"]

FormatParam = Annotated[
    Format,
    Query(
        alias="format",
        description="json (default); csv or parquet: the answer's table, one row per item "
        "(nested values as JSON text)",
    ),
]

#: Media types of the file formats.
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}

#: `responses=` entry documenting the file formats of a route's 200 answer.
FILE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/csv": {}, "application/vnd.apache.parquet": {}}}
}


def plain_json(body: dict[str, Any]) -> Response:
    """`body` (plain data with exactly the fields of the route's response model, as
    tests/test_api_contract.py checks) as JSON, without building and validating a model of
    it first: a series of 3,600 steps x keys is ten thousand items, which pydantic would
    build and check twice over."""
    return Response(pydantic_core.to_json(body), media_type="application/json")


#: Cell values written as they are (checked first: most cells are numbers).
_PLAIN = frozenset((int, float, str, bool, type(None)))


def _cell(value: Any) -> Any:
    """A cell of a file: a plain value as it is; a nested one (a model, or a list or mapping,
    of models too) as compact JSON text, as the JSON answer writes it."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, BaseModel | list | dict):
        return pydantic_core.to_json(value).decode()
    return value


def table(
    rows: Sequence[BaseModel | dict[str, Any]], columns: Sequence[str], fmt: Format, name: str
) -> Response:
    """`rows` (models or mappings with `columns`) as a CSV or Parquet file named `name`."""
    records = [
        [_cell(getattr(r, c) if isinstance(r, BaseModel) else r[c]) for c in columns] for r in rows
    ]
    if fmt == "csv":
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\r\n")
        writer.writerow(columns)
        writer.writerows(records)
        body = text.getvalue().encode()
    else:
        data = pa.table({c: pa.array([r[i] for r in records]) for i, c in enumerate(columns)})
        buffer = io.BytesIO()
        pq.write_table(data, buffer)
        body = buffer.getvalue()
    return file(body, fmt, name)


def file(body: bytes, fmt: Format, name: str) -> Response:
    """`body` (a CSV or Parquet file's bytes) as an attachment named `name`."""
    disposition = f'attachment; filename="{name}.{fmt}"'
    return Response(body, media_type=MEDIA_TYPES[fmt], headers={"Content-Disposition": disposition})


def model_table(
    rows: Sequence[BaseModel], model: type[BaseModel], fmt: Format, name: str
) -> Response:
    """`rows` of `model` as a file: one column per field of the model."""
    return table(rows, list(model.model_fields), fmt, name)
