"""Paging of the API's lists: every list answer holds at most `limit` rows (each list has a
documented maximum) and says how many rows there are in all (`total`) and where the next
page starts (`next_cursor`, null on the last page).

A cursor is opaque to clients: it is the sort key of the last row sent (a keyset), tagged
with the list it belongs to. The next page is the rows after that key, so rows inserted
meanwhile before it never repeat a row and never push one out of sight. A cursor of
another list, or one that is not ours, names no page: 404 with a JSON reason.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import HTTPException, Query

from stacklens.api_models import PageInfo
from stacklens.wire import clean_text

#: Characters of a cursor the API accepts (a cursor it made is far shorter).
MAX_CURSOR_CHARS = 2048

#: The description of every `cursor` query parameter.
CURSOR_HELP = "next_cursor of the previous page; absent = the first page"

#: What a cursor looks like (base64url without padding).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"

#: The `cursor` query parameter of every paged list.
CursorParam = Annotated[
    str | None,
    Query(
        min_length=1, max_length=MAX_CURSOR_CHARS, pattern=CURSOR_PATTERN, description=CURSOR_HELP
    ),
]

Key = tuple[Any, ...]


@dataclass(frozen=True)
class PageSizes:
    """The page sizes of one list: `default` rows unless `limit` is given, at most `maximum`."""

    default: int
    maximum: int

    def help(self, what: str) -> str:
        """The description of the list's `limit` query parameter."""
        return f"{what} per page (default {self.default}, at most {self.maximum})"


def encode(kind: str, key: Key) -> str:
    """The cursor of the row whose sort key is `key` in the list `kind`."""
    raw = json.dumps([kind, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, cursor: str | None, types: Sequence[type]) -> Key | None:
    """The sort key a cursor of the list `kind` holds (`types`: the type of each part), None
    without a cursor; 404 for a cursor this list did not make (it names no page)."""
    if cursor is None:
        return None
    try:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError
        parts = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(parts, list) or parts[:1] != [kind] or len(parts) != len(types) + 1:
            raise ValueError
        key = tuple(parts[1:])
        if not all(type(v) is t and _storable(v) for v, t in zip(key, types, strict=True)):
            raise ValueError
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise HTTPException(
            status_code=404,
            detail=f"no such page: the cursor is not a next_cursor of this {kind} list",
        ) from None
    return key


def _storable(value: object) -> bool:
    """Whether a key part fits the database: a 64-bit integer, or text without NUL and lone
    surrogates."""
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, str) and clean_text(value)


def page(
    kind: str, rows: list[dict[str, Any]], limit: int, total: int, key: Callable[[Any], Key]
) -> tuple[list[dict[str, Any]], PageInfo]:
    """The first `limit` of `rows` (a query's `limit + 1` rows after the cursor) and the page's
    info: `total` rows in all, the cursor after the last row kept when `rows` had more."""
    more = len(rows) > limit
    kept = rows[:limit]
    cursor = encode(kind, key(kept[-1])) if more else None
    return kept, PageInfo(total=total, limit=limit, next_cursor=cursor)
