"""The run comparison API: `GET /api/compare` (run b against run a, or against the median
of b's history) and `GET /api/compare/history` (a run and the runs of the same program
before it). Runs are named as on the job pages: job id, run ordinal, owner."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from server import export
from server.compare import service
from server.compare.sides import FromRef, ToRef, named_sides
from server.deps import SessionDep
from server.errors import error_responses
from server.export import FILE_RESPONSES, Format, FormatParam, model_table
from server.jobs.sections import SITE_LIMITS
from server.query_params import TEXT_PATTERN, id_query
from stacklens.api_models import (
    ClassDifference,
    Comparison,
    FamilyDifference,
    FileDifference,
    RunContext,
    RunDifference,
    RunHistory,
    SiteDifference,
    SizeDifference,
)

router = APIRouter(prefix="/api/compare", tags=["compare"])

MAX_HISTORY, DEFAULT_HISTORY = service.MAX_HISTORY, service.DEFAULT_HISTORY
_ERRORS = error_responses(404, 409, **{"422": "unknown query parameter, or no run b"})

JobRef = Annotated[str | None, Query(min_length=1, max_length=400, pattern=TEXT_PATTERN,
                                     description="job id of the run")]  # fmt: skip
RunRef = Annotated[int | None, id_query("run ordinal in the job; absent = its newest MPI run")]
OwnerRef = Annotated[str | None, Query(max_length=200, pattern=TEXT_PATTERN,
                                       description="the job's owner, when the id names jobs "
                                       "of several owners")]  # fmt: skip
LastParam = Annotated[int, Query(ge=1, le=MAX_HISTORY,
                                 description="runs of the program's history to use")]  # fmt: skip
SitesParam = Annotated[
    int,
    Query(
        ge=1,
        le=SITE_LIMITS.maximum,
        description=f"call sites listed at most (default {SITE_LIMITS.default}, at most "
        f"{SITE_LIMITS.maximum}), the largest change first",
    ),
]


#: The columns of a side's fabric context (the context table's, after the side's own).
CONTEXT_FIELDS = list(RunContext.model_fields)
TableParam = Annotated[
    Literal["sites", "families", "differences", "classes", "sizes", "files", "context"],
    Query(
        description="the table of a file (format=csv|parquet): sites (the call sites, the "
        "default), families (the communicator families), differences (the parts of the "
        "elapsed time that differ), classes (time per class: MPI traffic category, file "
        "I/O, computation), sizes (messages per op and size bucket), files (I/O "
        "per file), context (one row per side: its run, elapsed time, host names, late "
        "rank and fabric context)"
    ),
]


#: The comparison's tables kept as a list of rows: ?table= -> its field, row model, file.
_TABLES: dict[str, tuple[str, Any, str]] = {
    "sites": ("sites", SiteDifference, "compare-callsites"),
    "families": ("families", FamilyDifference, "compare-families"),
    "differences": ("differences", RunDifference, "compare-differences"),
    "classes": ("classes", ClassDifference, "compare-classes"),
    "sizes": ("sizes", SizeDifference, "compare-sizes"),
    "files": ("files", FileDifference, "compare-files"),
}


def _table(answer: Comparison, table: str, fmt: Format) -> Response:
    """One table of the comparison as a file named compare-<table>."""
    if table in _TABLES:
        field, model, name = _TABLES[table]
        return model_table(getattr(answer, field), model, fmt, name)
    rows = [
        {"side": letter, "job": side.job, "owner": side.owner, "run": side.run,
         "runs": side.runs, "build_id": side.build_id, "started_ns": side.started_ns,
         "window_from_ns": side.from_ns, "window_to_ns": side.to_ns,
         "elapsed_ns": side.elapsed_ns, "host_names": side.hosts,
         "late_rank": None if side.late is None else side.late.rank,
         "late_host": None if side.late is None else side.late.host,
         **(side.context.model_dump() if side.context else dict.fromkeys(CONTEXT_FIELDS))}
        for letter, side in (("a", answer.a), ("b", answer.b))
    ]  # fmt: skip
    columns = ["side", "job", "owner", "run", "runs", "build_id", "started_ns",
               "window_from_ns", "window_to_ns", "elapsed_ns", "host_names", "late_rank",
               "late_host", *CONTEXT_FIELDS]  # fmt: skip
    return export.table(rows, columns, fmt, "compare-context")


@router.get("", response_model=Comparison, responses={**_ERRORS, **FILE_RESPONSES})
def compare_runs(
    session: SessionDep,
    request: Request,
    b: JobRef = None,
    b_run: RunRef = None,
    b_owner: OwnerRef = None,
    b_from: FromRef = None,
    b_to: ToRef = None,
    a: JobRef = None,
    a_run: RunRef = None,
    a_owner: OwnerRef = None,
    a_from: FromRef = None,
    a_to: ToRef = None,
    last: LastParam = DEFAULT_HISTORY,
    sites: SitesParam = SITE_LIMITS.default,
    fmt: FormatParam = "json",
    table: TableParam = "sites",
) -> Comparison | Response:
    """Run b against run a: where each one's elapsed time went per rank (each MPI
    operation, file I/O per file, computation), the parts that differ ranked by their share
    of the elapsed-time difference, and the finding in one sentence; then every call site
    of either run (matched by file, line and function, else build-id and offset, and op)
    with its time, calls and bytes on each side, the largest change of time first, the
    sites of one run only among them. Without `a`: against the median of the `last` runs
    of b's program before b (the same executable path, arguments and world size; 404 when
    there are none), site by site too; every communicator family of either run (matched by its
    label, as the family card names it) with its time, calls and bytes on each side, the
    largest change of time first; the message-size histograms side by side, the files of
    either run (time, calls, bytes), each side's late rank and whether it moved; each
    side's fabric context. Either run named may be a window of it (`b_from`/`b_to`,
    `a_from`/`a_to`): its intervals that ended in the window, as its job pages read that
    window, the elapsed time the part of the run inside it. Files (`format=csv|parquet`):
    the `table` asked (the call sites by default), one row per item; the context's table
    one row per side, its incidents as JSON text."""
    side_b, side_a = named_sides(b, b_run, b_owner, (b_from, b_to),
                                 a, a_run, a_owner, (a_from, a_to))  # fmt: skip
    answer = service.compare(session, side_b, side_a, last, sites,
                             service.around(request.app.state))  # fmt: skip
    if fmt != "json":
        return _table(answer, table, fmt)
    return answer


@router.get("/history", response_model=RunHistory, responses=_ERRORS)
def run_history(
    session: SessionDep,
    job: JobRef = None,
    run: RunRef = None,
    owner: OwnerRef = None,
    last: LastParam = DEFAULT_HISTORY,
) -> RunHistory:
    """The run and the `last` runs of the same program before it (the same executable path,
    arguments and world size, among the runs the viewer may read, every build of it),
    newest first: elapsed time and the shares of MPI and file I/O in it, per rank on
    average, its build-id, whether it is of the run's build (the runs a comparison with
    the history's median uses) and whether it is the first run of a new build."""
    if job is None:
        raise HTTPException(status_code=422, detail="name the run: ?job=<job>[&run=<n>]")
    return service.history(session, service.Side(job, run, owner), last)
