"""Tables and series as files: `?format=csv|parquet` on the routes that answer a table (the
answer's main list, one row per item) or a series (one row per step and key); and large
answers built as plain data sent as JSON as they are (`plain_json`).

Columns are the item model's fields, in order; a nested value (a list or a mapping, e.g.
an RMA pair's ops) is one JSON text cell. Parquet has int64 integers, float64 floats,
UTF-8 strings and booleans as they are.

CSV is RFC 4180: a header line, CRLF line ends, and a field quoted (its double quotes
doubled) exactly when it holds a comma, a double quote, a CR or an LF; other fields are
left bare, so numbers stay numbers to a spreadsheet (Python's csv writer with
QUOTE_MINIMAL and a CRLF line terminator writes exactly that). A text cell is never read
as a formula: one that starts with `=`, `+`, `-`, `@`, a tab or a CR gets a single quote
before it (OWASP's rule against CSV injection; numbers, negative ones included, are
numbers, not text, and stay as they are). `csv_text` is that rule and `csv_field_sql` the
same rule with the quoting, in SQL, for a CSV made in the database (server/jobs/series.py);
every CSV the server writes goes through one or the other. Parquet keeps every value raw:
it is typed, and nothing evaluates its strings.
"""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pydantic_core
from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy import ColumnElement, case, func

from server import compression

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


class SplicedJson:
    """A JSON object answer whose first fields (`head`) many requests share and whose last
    ones each request gives: the head encoded, and compressed, once (`plain_json`'s
    encoding; gzip and brotli as server/compression.py codes answers), each answer its own
    last fields added to them, so a page of 600 KB that only its window's end tells apart
    costs each request its few last bytes."""

    def __init__(self, head: dict[str, Any]) -> None:
        self._head = pydantic_core.to_json(head)[:-1] + b","  # without its closing brace
        self._gzip = zlib.compressobj(compression.GZIP_LEVEL, zlib.DEFLATED, 31)  # gzip stream
        self._gzipped = self._gzip.compress(self._head)
        self._brotli = compression.brotli_head(self._head)

    def response(self, accept_encoding: str | None, tail: dict[str, Any]) -> Response:
        """The answer with `tail`'s fields last (at least one), in the coding that
        `accept_encoding` (the request's header) accepts for its size (the app's
        compression then passes it as it is)."""
        rest = pydantic_core.to_json(tail)[1:]  # without its opening brace
        coding = compression.negotiate(accept_encoding).for_size(len(self._head) + len(rest))
        headers = {"Vary": "Accept-Encoding"}
        if coding == "identity":
            return Response(self._head + rest, media_type="application/json", headers=headers)
        if coding == "br":
            body = self._brotli + compression.brotli_tail(rest)
        else:
            stream = self._gzip.copy()  # the head's compressor state, continued for this tail
            body = self._gzipped + stream.compress(rest) + stream.flush()
        headers["Content-Encoding"] = coding
        return Response(body, media_type="application/json", headers=headers)


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


#: The first characters that make a spreadsheet read a text cell as a formula (OWASP: `=`,
#: `+`, `-`, `@`, tab, carriage return).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: The characters that make a CSV field quoted (RFC 4180, as Python's csv module does).
CSV_SPECIAL = ',"\r\n'


def csv_text(value: str) -> str:
    """A text cell as it goes into a CSV file: with a single quote before it when it starts
    with one of FORMULA_STARTS, so that no spreadsheet runs it (`=1+2` -> `'=1+2`)."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_field_sql(text: ColumnElement[Any]) -> ColumnElement[Any]:
    """SQL: the CSV field of a text column: `csv_text` of it, then quoted as RFC 4180 and
    Python's csv writer quote it (in double quotes, its double quotes doubled) when it
    holds one of CSV_SPECIAL."""
    cell = case((func.left(text, 1).in_(FORMULA_STARTS), func.concat("'", text)), else_=text)
    plain = func.translate(cell, CSV_SPECIAL, "") == cell
    return case((plain, cell), else_=func.concat('"', func.replace(cell, '"', '""'), '"'))


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
        writer.writerows([csv_text(v) if isinstance(v, str) else v for v in r] for r in records)
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
