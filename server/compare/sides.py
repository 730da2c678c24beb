# server/compare/sides.py — how a request names the two runs compared (no SQL here).
"""The query parameters the comparison's routes share with the comparison report's
(server/reports/routes.py): a window of each run (`a_from`/`a_to`, `b_from`/`b_to`) and the
two sides they name, read into `service.Side`s with the same 422s for both."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query

from server.compare import service
from server.query_params import make_window

FromRef = Annotated[
    str | None,
    Query(
        max_length=64,
        description="start of the window of the run compared, inclusive: RFC 3339 "
        "or epoch seconds (its intervals that ended in [from, to)); absent: the run's start",
    ),
]
ToRef = Annotated[str | None, Query(
    max_length=64, description="end of that window, exclusive (same forms); absent: the "
    "run's end")]  # fmt: skip


def named_sides(
    b: str | None, b_run: int | None, b_owner: str | None, b_window: tuple[str | None, str | None],
    a: str | None, a_run: int | None, a_owner: str | None, a_window: tuple[str | None, str | None],
) -> tuple[service.Side, service.Side | None]:  # fmt: skip
    """Runs b and a (None: the median of b's history) as the query names them, each with
    its window (from, to texts); 422 without b, for a window of a without a, or for a
    window that cannot be read or is empty."""
    if b is None:
        raise HTTPException(status_code=422, detail="name run b: ?b=<job>[&b_run=<n>]")
    if a is None and a_window != (None, None):
        raise HTTPException(status_code=422, detail="a_from and a_to are a window of run "
                            "a: name run a (?a=<job>), the history's median has none")  # fmt: skip
    side_b = service.Side(b, b_run, b_owner, make_window(*b_window, ("b_from", "b_to")))
    if a is None:
        return side_b, None
    return side_b, service.Side(a, a_run, a_owner, make_window(*a_window, ("a_from", "a_to")))
