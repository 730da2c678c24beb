"""What the API accepts in a query string, for every route alike: only the parameters the
route declares (anything else is refused with 422, never ignored), the time window
(`from`, `to`) of the routes that read data over time, and the bounds of the numbers every
route takes alike (a run's ordinal or a row's id, a series' step): one declaration each, so
a value the database could not hold is a 422 here, never a failed query (500).

The window is half-open, `from` <= t < `to`, and an interval of a rank belongs to it when
its *end* lies in it (the same rule as the 1-minute rollups, which file an interval under
the minute its end falls in): the sums over a window are the sums of exactly the intervals
that ended in it, and two adjacent windows never count an interval twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

#: Largest instant a window may name (ns since the epoch, a signed 64-bit value).
MAX_NS = 2**63 - 1

#: Largest value of a PostgreSQL `integer` column: a run's ordinal, a link's or an
#: incident's id.
MAX_DB_INT = 2**31 - 1

#: Bounds of a series' step in seconds: a millisecond to 366 days (one step over any
#: window of a year; its ns stay far inside a 64-bit integer).
MIN_STEP_S = 0.001
MAX_STEP_S = 366 * 86_400


def id_query(description: str) -> Any:
    """A query parameter naming a stored row by its integer id or ordinal: 1 to MAX_DB_INT."""
    return Query(ge=1, le=MAX_DB_INT, description=description)


def step_query(description: str) -> Any:
    """A query parameter giving a series' step in seconds: MIN_STEP_S to MAX_STEP_S."""
    return Query(ge=MIN_STEP_S, le=MAX_STEP_S, description=description)


#: Text a query parameter naming a job, a user, a command or a host may hold: no control
#: characters.
TEXT_PATTERN = r"^[^\x00-\x1f\x7f]*$"

#: The `owner` query parameter of every route naming a job by its id.
OwnerParam = Annotated[
    str | None,
    Query(
        max_length=200,
        pattern=TEXT_PATTERN,
        description="the job's owner (its `user` in the job list): which of the jobs with "
        "this id is meant; needed only when the id names jobs of several owners (else 409)",
    ),
]

#: The `run` query parameter of every route reading a job or one of its runs.
RunParam = Annotated[int | None, id_query("ordinal of one run of the job; absent = the whole job")]


def refuse_unknown_parameters(request: Request) -> None:
    """A dependency of the whole app: 422 when the query string names a parameter the
    matched route does not declare (read from the route itself, its dependencies included);
    routes outside the OpenAPI document (the unknown-path answer, /docs) are left alone."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.include_in_schema:
        return
    declared = _query_names(route.dependant)
    unknown = sorted({name for name in request.query_params if name not in declared})
    if unknown:
        allowed = ", ".join(sorted(declared)) or "none"
        raise HTTPException(
            status_code=422,
            detail=f"unknown query parameter(s) {', '.join(map(repr, unknown))}; "
            f"this route takes: {allowed}",
        )


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameter names a route (or dependency) and all its dependencies read."""
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def parse_instant(text: str, name: str) -> int:
    """ns since the Unix epoch of `text`: RFC 3339 with a UTC offset
    (`2026-12-01T10:00:00Z`, `...+01:00`, fractions of a second allowed) or epoch seconds
    (`1764583200`, `1764583200.25`). 422 with the reason for anything else."""
    if len(text) > 64:
        raise _bad(name, text, "longer than 64 characters")
    try:
        seconds = Decimal(text.strip())
    except InvalidOperation:
        seconds = None
    if seconds is not None:
        if not seconds.is_finite() or abs(seconds) > MAX_NS // 10**9:
            raise _bad(name, text, "not a number of seconds within 1970-01-01 .. 2262-04-11")
        ns = int(seconds * 10**9)  # exact: a decimal, truncated below 1 ns
    else:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise _bad(name, text, "neither RFC 3339 nor epoch seconds") from None
        if moment.tzinfo is None:
            raise _bad(name, text, "RFC 3339 needs a UTC offset (Z or +hh:mm)")
        delta = moment - datetime.fromtimestamp(0, UTC)
        ns = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    if not 0 <= ns <= MAX_NS:
        raise _bad(name, text, "outside 1970-01-01 .. 2262-04-11")
    return ns


def _bad(name: str, text: str, why: str) -> HTTPException:
    shown = text if len(text) <= 64 else text[:64] + "..."
    return HTTPException(status_code=422, detail=f"{name}={shown!r}: {why}")


@dataclass(frozen=True)
class Window:
    """A half-open time window [from_ns, to_ns) in ns since the epoch; None = open."""

    from_ns: int | None = None
    to_ns: int | None = None

    def astuple(self) -> tuple[int | None, int | None]:
        """(from_ns, to_ns)."""
        return self.from_ns, self.to_ns


#: The window of every interval (no bound).
ALL_TIME = Window()


def window(
    from_: Annotated[
        str | None,
        Query(
            alias="from",
            description="window start, inclusive: RFC 3339 (2026-12-01T10:00:00Z) or epoch "
            "seconds; an interval counts when its end is in [from, to); default: unbounded",
        ),
    ] = None,
    to: Annotated[
        str | None,
        Query(description="window end, exclusive (same forms as from); default: unbounded"),
    ] = None,
) -> Window:
    """The window of a request; 422 if a bound cannot be read or `to` is not after `from`."""
    return make_window(from_, to)


def make_window(from_: str | None, to: str | None, names: tuple[str, str] = ("from", "to")
                ) -> Window:  # fmt: skip
    """The window of two query texts (`names`: their parameters' names, for the 422 when a
    bound cannot be read or the end is not after the start)."""
    chosen = Window(
        None if from_ is None else parse_instant(from_, names[0]),
        None if to is None else parse_instant(to, names[1]),
    )
    if chosen.from_ns is not None and chosen.to_ns is not None and chosen.to_ns <= chosen.from_ns:
        raise HTTPException(status_code=422, detail=f"the window is empty or inverted: "
                            f"{names[1]} <= {names[0]}")  # fmt: skip
    return chosen


WindowDep = Annotated[Window, Depends(window)]
