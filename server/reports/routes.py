"""HTTP routes of the reports domain: a job's, an incident's and a fabric window's report
as an HTML or PDF file (`?format=html|pdf`), the file the dashboard's buttons and `stacklens
report` download.

A report reads through the request's session, restricted to what its viewer may read
(server/access/owner.py): another user's job is a 404 exactly like an unknown one. With
`?progress=true` the answer is a stream of JSON lines instead — `{"done", "total", "what"}`
as the report is built, then `{"filename", "media_type", "file"}` (the file in base64) or
`{"error", "status"}` — for clients that show a progress bar (`stacklens report`).
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from sqlalchemy.orm import Session

from presentation.report_model import Progress, Report
from server.access.owner import restrict
from server.access.viewer import request_viewer
from server.compare import service as compare_service
from server.compare.sides import FromRef, ToRef, named_sides
from server.errors import error_responses
from server.incidents import answers as incident_answers
from server.query_params import TEXT_PATTERN, OwnerParam, RunParam, Window, WindowDep, id_query
from server.reports import build, render
from server.reports import repository as reports_repo
from server.reports.compare import compare_report

router = APIRouter(prefix="/api/reports", tags=["reports"])

#: Hosts a window report may name at most.
MAX_HOSTS = 4096

FormatParam = Annotated[
    render.Format,
    Query(
        alias="format",
        description="html: self-contained, interactive, opens offline; "
        "pdf: static figures, for mail and print",
    ),
]
ProgressParam = Annotated[
    bool,
    Query(
        description="stream JSON lines of progress, then the file in base64 (for the "
        "command line); default: the file itself"
    ),
]

_FILES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/html": {}, "application/pdf": {}, "application/x-ndjson": {}}}
}


@contextmanager
def _viewer_session(request: Request) -> Iterator[Session]:
    """A session restricted to the request's viewer, as server.deps gives every route, but
    owned by the caller (a streamed answer outlives the route's dependencies)."""
    with Session(request.app.state.engine) as session:
        restrict(session, request_viewer(request))
        yield session


def _answer(
    make: Callable[[Session, Progress], Report],
    request: Request,
    fmt: render.Format,
    progress: bool,
) -> Response:
    """The file of the report `make` builds, or its progress stream (the renderer's
    browser, if it needs one, starting while the report is built)."""
    render.prepare(fmt)
    if not progress:
        with _viewer_session(request) as session:
            report = make(session, lambda *_: None)
            body = render.render(report, fmt)
        return Response(
            body,
            media_type=render.MEDIA_TYPES[fmt],
            headers={"Content-Disposition": render.disposition(report, fmt)},
        )
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def work() -> None:
        try:
            with _viewer_session(request) as session:
                steps = [0]

                def step(done: int, total: int, what: str) -> None:
                    steps[0] = total
                    lines.put({"done": done, "total": total + 1, "what": what})

                report = make(session, step)
                lines.put({"done": steps[0], "total": steps[0] + 1, "what": f"rendering {fmt}"})
                body = render.render(report, fmt)
            lines.put(
                {
                    "filename": f"{report.filename}.{fmt}",
                    "media_type": render.MEDIA_TYPES[fmt],
                    "file": base64.b64encode(body).decode(),
                }
            )
        except HTTPException as exc:
            lines.put({"error": exc.detail, "status": exc.status_code})
        except Exception as exc:  # the stream has started: say it in the stream
            lines.put({"error": f"the report failed: {exc}", "status": 500})
        finally:
            lines.put(None)

    def stream() -> Iterator[bytes]:
        threading.Thread(target=work, name="report", daemon=True).start()
        while (line := lines.get()) is not None:
            yield json.dumps(line).encode() + b"\n"

    return StreamingResponse(stream(), media_type="application/x-ndjson")


@router.get(
    "/jobs/{job:path}",
    responses={
        **error_responses(404, 409, **{"422": "unknown query parameter, or a bad window"}),
        **_FILES,
    },
)
def job_report(
    job: str,
    request: Request,
    window: WindowDep,
    run: RunParam = None,
    owner: OwnerParam = None,
    fmt: FormatParam = "html",
    progress: ProgressParam = False,
) -> Response:
    """The report of a job (or of its run `run`) over the window (default: the whole job):
    a first page to forward (what, who, when, how long, status; time in MPI, in I/O and
    outside over ranks; bytes by category; the links used with their peak utilisation,
    PortXmitWait and errors; findings in plain words), then timeline, rank x rank matrix,
    per-rank heat map, operations, collectives, message sizes, file I/O, topology, fabric
    series, and the evidence table (measured, routed or modelled)."""
    with _viewer_session(request) as session:  # a 404 before anything is streamed
        build.job_target(session, job, run, window, owner)
    traffic = (request.app.state.traffic, request.app.state.attributions)
    congested = request.app.state.congested_wait_per_s
    return _answer(lambda s, p: build.job_report(s, job, run, window, p, traffic, owner,
                                                 congested), request, fmt, progress)  # fmt: skip


@router.get(
    "/window",
    responses={
        **error_responses(**{"422": "unknown query parameter, a bad window, or too many hosts"}),
        **_FILES,
    },
)
def window_report(
    request: Request,
    window: WindowDep,
    hosts: Annotated[
        str | None,
        Query(
            max_length=65536,
            pattern=TEXT_PATTERN,
            description="comma-separated host names: their links and the switch links "
            "between them; default: the whole fabric",
        ),
    ] = None,
    fmt: FormatParam = "html",
    progress: ProgressParam = False,
) -> Response:
    """The report of the fabric over a window (default: the hour before now), on the links
    of `hosts` (default: every link): link load, PortXmitWait and errors, topology, fabric
    series, fabric events, and the jobs that ran there (another user's job is counted,
    never named)."""
    lo, hi = _window_bounds(window)
    names = sorted({h.strip() for h in (hosts or "").split(",") if h.strip()}) or None
    if names is not None and len(names) > MAX_HOSTS:
        raise HTTPException(status_code=422, detail=f"hosts: at most {MAX_HOSTS} names")
    with Session(request.app.state.engine) as everyone:  # a count: names nobody
        in_all = reports_repo.window_job_count(everyone, lo, hi, names)
    congested = request.app.state.congested_wait_per_s
    return _answer(lambda s, p: build.window_report(s, in_all, lo, hi, names, p, congested),
                   request, fmt, progress)  # fmt: skip


@router.get("/incidents/{incident_id}", responses={**error_responses(404), **_FILES})
def incident_report(
    incident_id: Annotated[int, Path(ge=1, le=2**63 - 1, description="incident id")],
    request: Request,
    fmt: FormatParam = "html",
    progress: ProgressParam = False,
) -> Response:
    """The report of an incident (as GET /api/incidents/{id} shows it to you: another
    user's job is "another job"): its links and jobs by role with their evidence series,
    the topology with its links highlighted, the fabric events and the links' load over
    its time (a minute of context at least on each side)."""
    with _viewer_session(request) as session:  # a 404 before anything is streamed
        incident_answers.details(session, incident_id)
    congested = request.app.state.congested_wait_per_s
    return _answer(lambda s, p: build.incident_report(s, incident_id, p, congested), request,
                   fmt, progress)  # fmt: skip


_RunRef = Annotated[int | None, id_query("run ordinal in the job; absent = its newest MPI run")]
_JobRef = Annotated[str | None, Query(min_length=1, max_length=400, pattern=TEXT_PATTERN,
                                      description="job id of the run")]  # fmt: skip


@router.get(
    "/compare",
    responses={**error_responses(404, 409, **{"422": "unknown query parameter, or no run b"}),
               **_FILES},
)  # fmt: skip
def comparison_report(
    request: Request,
    b: _JobRef = None,
    b_run: _RunRef = None,
    b_owner: OwnerParam = None,
    b_from: FromRef = None,
    b_to: ToRef = None,
    a: _JobRef = None,
    a_run: _RunRef = None,
    a_owner: OwnerParam = None,
    a_from: FromRef = None,
    a_to: ToRef = None,
    last: Annotated[
        int,
        Query(
            ge=1,
            le=compare_service.MAX_HISTORY,
            description="runs of b's history in the median (without a)",
        ),
    ] = compare_service.DEFAULT_HISTORY,
    fmt: FormatParam = "html",
    progress: ProgressParam = False,
) -> Response:
    """The report of a run comparison (as GET /api/compare answers it): run b against run
    a, or without `a` against the median of the `last` runs of b's program before it; the
    two runs, the finding and where the elapsed time went per rank on the first page, then
    the call sites of either run, the largest change of time first. Either run may be a
    window of it (`b_from`/`b_to`, `a_from`/`a_to`), as in GET /api/compare."""
    side_b, side_a = named_sides(b, b_run, b_owner, (b_from, b_to),
                                 a, a_run, a_owner, (a_from, a_to))  # fmt: skip
    with _viewer_session(request) as session:  # a 404 before anything is streamed
        for side in (side_b, side_a):
            if side is not None:
                compare_service.find(session, side.job, side.run, side.owner)
    around = compare_service.around(request.app.state)
    return _answer(lambda s, p: compare_report(s, side_b, side_a, around, last, p), request,
                   fmt, progress)  # fmt: skip


#: The window of a window report without bounds: the hour before now.
DEFAULT_WINDOW_NS = 3600 * 10**9


def _window_bounds(window: Window) -> tuple[int, int]:
    """[from, to) of a window report: an open end is now (or an hour after `from`), an open
    start an hour before the end; within the instants the fabric tables can be asked for
    (the samples' search reaches past the window's end by up to an hour)."""
    if window.to_ns is not None:
        hi = window.to_ns
    elif window.from_ns is not None:
        hi = window.from_ns + DEFAULT_WINDOW_NS
    else:
        hi = time.time_ns()
    hi = min(hi, build.LATEST_NS)
    lo = window.from_ns if window.from_ns is not None else max(0, hi - DEFAULT_WINDOW_NS)
    return min(lo, build.LATEST_NS - 1), max(hi, min(lo, build.LATEST_NS - 1) + 1)
