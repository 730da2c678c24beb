# frontend/components.py — component factories: API data in, Dash html components out (no I/O).
"""Reusable pieces of the stacklens pages: header, notices, the grids (long lists: jobs,
rank pairs, files) and the Markdown tables (short ones).

Every exact value is plain text in the DOM. Grid cells carry their column's field as
`col-id` (e.g. `[col-id=bytes]`) for readers and browser tests alike; the grid shows text
as text. Text from the job (paths, mounts) is escaped before it goes into a Markdown table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import dash_ag_grid as dag
from dash import dcc, html

from frontend.formatting import (
    format_bytes,
    format_duration_ns,
    format_size_bucket,
    format_utc_ns,
    rank_ranges,
)
from stacklens.api_models import (
    FabricEvent,
    IncidentDetails,
    IncidentList,
    JobCollectives,
    JobIo,
    JobList,
    JobOps,
    JobPlacement,
    JobRanks,
    JobRma,
    JobSizes,
    LinkAttribution,
    LinkEnd,
    LinkPage,
    Matrix,
    NodeJobs,
    SlowRanks,
)
from stacklens.constants import ERROR_COUNTERS

# Rows shown in the MPI operations table (heaviest time first).
MAX_OP_ROWS = 50
# Rows shown in the collectives table (heaviest time first) and the communicators table.
MAX_COLL_ROWS = 100
MAX_COMM_ROWS = 20
# Rows shown in the message-size table (one per op and bucket).
MAX_SIZE_ROWS = 200
# Rows shown in the ranks table (by rank); ranks with lost or folded counts come first.
MAX_RANK_ROWS = 256
# Hosts named in the ranks summary line.
MAX_SUMMARY_HOSTS = 8
# Rows of a page of the fabric links grid.
LINK_PAGE_ROWS = 100
# Fabric events shown (newest first).
MAX_EVENT_ROWS = 20


def _heading(counter: str) -> str:
    """A counter name as a column heading: "symbol_errors" -> "Symbol errors",
    "vl15_dropped" -> "VL15 dropped"."""
    first, *rest = counter.replace("vl15", "VL15").split("_")
    return " ".join([first[:1].upper() + first[1:], *rest])


#: Error counters of a fabric link as the links table heads them (API name -> heading).
ERROR_HEADINGS = {c: _heading(c) for c in ERROR_COUNTERS}

#: How the API's traffic categories of MPI operations read on the page.
CATEGORY_LABELS = {
    "mpi_p2p": "point-to-point",
    "mpi_completion": "wait/test",
    "mpi_coll": "collective",
    "mpi_rma": "RMA",
    "io": "MPI-IO",
    "mpi_startup": "start-up (MPI_Init, MPI_Finalize, MPI_Abort)",
    "other": "other",
}

# Characters of table-cell text that Markdown could read as syntax: cell borders, escapes,
# code, emphasis, links and images, HTML, entities, autolinks. They are written as numeric
# character references, which every Markdown dialect shows as the literal character
# (dcc.Markdown's remark honours backslash escapes for only some of them).
_MARKDOWN_SYNTAX = re.compile(r"[\\`*_~\[\]()!<>&|:@]")


def page_header(pages: Sequence[dict]) -> html.Header:
    """The top bar: product name and a link per registered page (not to the pages of one
    thing, like a job's: they are reached by their links)."""
    return html.Header(
        className="topbar",
        children=[
            html.Div(
                className="brand",
                children=[
                    html.H1("stacklens"),
                    html.Span("HPC communication profiler", className="tagline"),
                ],
            ),
            html.Nav(
                [
                    dcc.Link(page["name"], href=page["relative_path"])
                    for page in pages
                    if not page.get("path_template")
                ],
                className="nav",
            ),
        ],
    )


def notice(children: str | list, kind: str) -> html.Div:
    """A banner; `kind` is "info" or "error"."""
    return html.Div(children, className=f"notice notice-{kind}")


def no_jobs_notice() -> html.Div:
    """What to show while the server knows no job at all."""
    return notice(
        [
            "No jobs yet — attach the hooks with ",
            html.Code("stacklens run -- mpirun ..."),
        ],
        "info",
    )


def report_href(path: str, params: dict[str, object], fmt: str) -> str:
    """The URL of a report file (`path` under /api/reports, e.g. `jobs/<quoted id>`) with
    the query parameters that are set, in `fmt` (html or pdf); the browser downloads it
    from the server the pages come from, as the viewer."""
    given = {k: v for k, v in params.items() if v not in (None, "")}
    return f"/api/reports/{path}?{urlencode({**given, 'format': fmt})}"


def report_buttons(pdf_id: str, html_id: str) -> html.Span:
    """Two download links for a report, PDF and HTML (their hrefs set by a callback)."""
    return html.Span(
        className="report-buttons",
        children=[
            html.A("⤓ Report (PDF)", id=pdf_id, href="", download="", className="button"),
            html.A("⤓ Report (HTML)", id=html_id, href="", download="", className="button"),
        ],
    )


def card(title: str, *children, section_id: str | None = None) -> html.Section:
    """A titled card of a page (`section_id`: its DOM id, if it needs one)."""
    ident: dict[str, Any] = {"id": section_id} if section_id else {}
    return html.Section(className="card", children=[html.H2(title), *children], **ident)


def card_head(title: str, updated_id: str) -> html.Div:
    """A page's first card heading: the title and the time of the last refresh."""
    return html.Div(
        className="card-head",
        children=[html.H2(title), html.Span(id=updated_id, className="subtle")],
    )


def markdown_table(table_id: str, extra_class: str = "") -> dcc.Markdown:
    """A scrolling Markdown table, for the short tables (the long ones are grids): a
    dcc.Markdown table costs the browser one Dash component, where an html.Table costs one
    per cell, far too slow to re-render every second at a few hundred rows."""
    return dcc.Markdown(id=table_id, className=f"scroll table-wrap md-table {extra_class}".strip())


#: Grid columns (dash-ag-grid column definitions): the field of the row dicts below, the
#: heading, and for numbers a numeric filter and right alignment. Human-readable values
#: ("1.5 MiB") are columns of their own beside the exact ones.
def _text(field: str, heading: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": heading, "filter": "agTextColumnFilter", **extra}


def _number(field: str, heading: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": heading, "type": "numericColumn",
            "filter": "agNumberColumnFilter", **extra}  # fmt: skip


JOB_COLUMNS = [
    _text("job", "Job", cellClass="mono"),
    _text("user", "User"),
    _text("command", "Command", cellClass="mono", tooltipField="command"),
    _text("ranks", "Ranks seen / world", type="rightAligned"),
    _text("status", "Status"),
    _text("started", "Started (UTC)"),
    _text("sent", "Sent", type="rightAligned", sortable=False),
    _number("bytes", "Bytes sent"),
    _number("messages", "Messages sent"),
]
PAIR_COLUMNS = [
    _number("src", "Source rank"),
    _number("dst", "Destination rank"),
    _number("bytes", "Bytes", sort="desc"),
    _text("sent", "Sent", type="rightAligned", sortable=False),
    _number("messages", "Messages"),
]
FILE_COLUMNS = [
    _text("layer", "Layer"),
    _text("path", "Path", cellClass="mono", tooltipField="path", minWidth=260),
    _text("fstype", "File system"),
    _text("mount", "Mount", cellClass="mono"),
    _number("ranks", "Ranks"),
    _number("opens", "Opens"),
    _number("reads", "Reads"),
    _number("writes", "Writes"),
    _number("bytes_read", "Bytes read"),
    _number("bytes_written", "Bytes written"),
    _text("read_time", "Read time", type="rightAligned", sortable=False),
    _text("write_time", "Write time", type="rightAligned", sortable=False),
    _text("meta_time", "Meta time", type="rightAligned", sortable=False),
]
RMA_COLUMNS = [
    _number("origin", "Origin rank"),
    _number("target", "Target rank"),
    _number("calls", "Calls"),
    _number("bytes", "Bytes"),
    _text("moved", "Moved", type="rightAligned", sortable=False),
    _text("per_op", "Per operation", minWidth=260),
]


def grid(grid_id: str, columns: list[dict[str, Any]], height_px: int = 420) -> Any:
    """A grid of rows (dash-ag-grid): virtual scrolling, every column sortable, filterable
    and resizable in the browser; rows carry an `id` field that keeps them apart across
    refreshes (a refresh then updates rows in place instead of redrawing the grid)."""
    return dag.AgGrid(
        id=grid_id,
        className="grid",
        columnDefs=columns,
        rowData=[],
        getRowId="params.data.id",
        defaultColDef={"sortable": True, "filter": True, "resizable": True, "minWidth": 90},
        dashGridOptions={"animateRows": False, "suppressCellFocus": True,
                         "tooltipShowDelay": 300, "enableCellTextSelection": True},
        columnSize="responsiveSizeToFit",
        style={"height": f"{height_px}px", "width": "100%"},
    )  # fmt: skip


def job_rows(jobs: JobList) -> list[dict[str, Any]]:
    """The jobs grid's rows: a page of the job list, newest first (row id = the path of the
    job's page, qualified by its owner: unique even where two owners used one job id)."""
    return [
        {
            "id": job_path(job.job, job.user),
            "job": job.job,
            "user": job.user,
            "command": job.command,
            "ranks": f"{job.ranks_seen} / {job.world_size}",
            "status": job.status,
            "started": format_utc_ns(job.started_ns),
            "sent": format_bytes(job.bytes_sent),
            "bytes": job.bytes_sent,
            "messages": job.messages_sent,
        }
        for job in jobs.jobs
    ]


def job_page_info(jobs: JobList, first: int) -> str:
    """Where the page of the job list stands: "jobs 101–200 of 20,000" (`first`: the
    number of the page's first job), or "no job matches"."""
    if not jobs.jobs:
        return "no job matches" if jobs.page.total else "no jobs"
    last = first + len(jobs.jobs) - 1
    return f"jobs {first:,}–{last:,} of {jobs.page.total:,}, newest first"


def pair_rows(matrix: Matrix) -> list[dict[str, Any]]:
    """The rank pairs grid's rows: the matrix's page of (source, destination) pairs."""
    return [
        {"id": f"{c.src}-{c.dst}", "src": c.src, "dst": c.dst, "bytes": c.bytes,
         "sent": format_bytes(c.bytes), "messages": c.messages}
        for c in matrix.cells
    ]  # fmt: skip


def pair_caption(matrix: Matrix) -> str:
    """What the rank pairs grid holds: all pairs with traffic, or the first page of them."""
    n, total = len(matrix.cells), matrix.page.total
    if not total:
        return "No point-to-point traffic recorded yet."
    held = f"{total:,} rank pair{'s' * (total != 1)}" if n == total else (
        f"The first {n:,} of {total:,} rank pairs (by source rank)"
    )  # fmt: skip
    return f"{held} with traffic; sort and filter in the grid."


def file_rows(io: JobIo) -> list[dict[str, Any]]:
    """The files grid's rows: the page of (layer, path) rows, most bytes first."""
    return [
        {
            "id": f"{f.layer}:{f.path}",
            "layer": f.layer,
            "path": f.path,
            "fstype": f.fstype,
            "mount": f.mount,
            "ranks": f.ranks,
            "opens": f.opens,
            "reads": f.reads,
            "writes": f.writes,
            "bytes_read": f.bytes_read,
            "bytes_written": f.bytes_written,
            "read_time": format_duration_ns(f.read_time_ns),
            "write_time": format_duration_ns(f.write_time_ns),
            "meta_time": format_duration_ns(f.meta_time_ns),
        }
        for f in io.files
    ]


def file_caption(io: JobIo) -> str:
    """What the files grid holds, or a sentence when the job did no file I/O; the start-up
    I/O (before MPI_Init), which the grid leaves out, in a sentence of its own."""
    n, total = len(io.files), io.page.total
    if not total:
        return (
            "No file I/O: the job has not opened, read or written any file "
            "through POSIX, stdio or MPI-IO." + _startup_io(io)
        )
    if n == total:
        held = f"{total:,} file{'s' * (total != 1)} (per I/O layer), most bytes first."
    else:
        held = f"The {n:,} of {total:,} files (per I/O layer) with the most bytes."
    return f"{held} Counts, bytes and times are summed over all ranks.{_startup_io(io)}"


def rma_rows(rma: JobRma) -> list[dict[str, Any]]:
    """The RMA grid's rows: the page of (origin, target) pairs, each with its ops."""
    return [
        {
            "id": f"{c.origin}-{c.target}",
            "origin": c.origin,
            "target": c.target,
            "calls": c.calls,
            "bytes": c.bytes,
            "moved": format_bytes(c.bytes),
            "per_op": "; ".join(f"{o.op} {_calls(o.calls)}, {o.bytes} B" for o in c.ops),
        }
        for c in rma.cells
    ]


def rma_caption(rma: JobRma) -> str:
    """The one-sided totals per op, and what the RMA grid holds; a sentence without RMA."""
    n, total = len(rma.cells), rma.page.total
    if not total:
        return "No one-sided (RMA) calls in this job."
    totals = "; ".join(f"{o.op} {_calls(o.calls)}, {format_bytes(o.bytes)}" for o in rma.ops)
    held = f"{total:,} (origin, target) pair{'s' * (total != 1)}" if n == total else (
        f"The first {n:,} of {total:,} (origin, target) pairs"
    )  # fmt: skip
    return f"{held}. In all: {totals}."


def matrix_title(matrix: Matrix, owner: str | None = None) -> list:
    """Heading of the matrix section: which job (a link to its own page, where any window
    of it can be chosen; `owner` qualifies it), its size and total point-to-point bytes."""
    total = sum(b.bytes for b in matrix.blocks)
    details = f"{matrix.world_size} ranks · {format_bytes(total)} point-to-point"
    return [
        "Point-to-point traffic of ",
        dcc.Link(matrix.job, href=job_path(matrix.job, owner), className="mono job-link"),
        " ",
        html.Span(details, className="subtle"),
    ]


def job_path(job: str, owner: str | None = None) -> str:
    """The path of a job's own page (the key quoted: it may hold a slash), qualified by its
    owner (`?owner=`, the job list's `user`) when one is given: the id alone names one job
    only while no two owners used it (docs/access.md, "Job URLs")."""
    path = f"/jobs/{quote(job, safe='')}"
    return f"{path}?owner={quote(owner, safe='')}" if owner else path


def ops_summary(ops: JobOps) -> list | str:
    """One line: time inside MPI communication calls and, per traffic category with calls,
    its time and bytes sent (received too where there are such), summed over ranks;
    start-up (MPI_Init, MPI_Finalize, MPI_Abort) after it, apart."""
    used = [c for c in ops.categories if c.calls]
    if not used:
        return "No MPI operations recorded for this job."
    talk = [c for c in used if c.communication]
    parts: list = [f"{format_duration_ns(sum(c.time_ns for c in talk))} inside MPI "
                   "communication calls: "]  # fmt: skip
    for i, c in enumerate(used):
        parts += [" · " if c.communication else "; apart from it: "] if i else []
        moved = f"{format_bytes(c.bytes_sent)} sent"
        if c.bytes_received:
            moved += f", {format_bytes(c.bytes_received)} received"
        parts.append(
            html.Span(
                [html.B(_category_label(c.category)), f" {format_duration_ns(c.time_ns)}, {moved}"],
                className=f"category category-{c.category}",
            )
        )
    return parts


def ops_table_markdown(ops: JobOps) -> str:
    """The MPI operations table as Markdown (see `markdown_table` on why): a caption
    line, then one row per op called, heaviest time first, at most `MAX_OP_ROWS` rows.

    Columns: op, category, ranks, calls, bytes (exact), payload (human-readable), time inside.
    """
    n = len(ops.ops)
    if not n:
        return "No MPI operations recorded for this job."
    if n > MAX_OP_ROWS:
        caption = f"Heaviest {MAX_OP_ROWS} of {n} MPI operations by time inside the calls."
    else:
        caption = f"{n} MPI operation{'s' if n != 1 else ''} called, heaviest time first."
    headings = ("Operation", "Category", "Ranks", "Calls", "Bytes", "Payload", "Time inside")
    align = "llrrrrr"
    rows = [
        (
            _md(o.op),
            _md(_category_label(o.category)),
            o.ranks,
            o.calls,
            o.bytes,
            format_bytes(o.bytes),
            format_duration_ns(o.time_ns),
        )
        for o in ops.ops[:MAX_OP_ROWS]
    ]
    return _table(
        f"{caption} Calls, bytes and time are summed over all ranks.", headings, align, rows
    )


def no_fabric_notice() -> html.Div:
    """What to show while no fabric has been discovered."""
    return notice(
        [
            "No InfiniBand fabric discovered yet — the fabric sampler of ",
            html.Code("stacklens up"),
            " sweeps a reachable fabric (a simulated one: ",
            html.Code("stacklens fabric-sim"),
            ").",
        ],
        "info",
    )


#: Columns of the fabric links grid (one row per link, `fabric_link_rows`); numbers are
#: exact (whole bytes/s), "?" where unknown, never 0.
LINK_COLUMNS: list[dict[str, Any]] = [
    {"field": "link", "headerName": "Link", "minWidth": 220, "tooltipField": "link"},
    {"field": "state", "headerName": "State", "maxWidth": 110},
    {"field": "utilisation", "headerName": "Utilisation", "type": "rightAligned"},
    {"field": "a_to_b", "headerName": "A → B bytes/s", "type": "rightAligned"},
    {"field": "b_to_a", "headerName": "B → A bytes/s", "type": "rightAligned"},
    {"field": "capacity", "headerName": "Capacity bytes/s", "type": "rightAligned"},
    {"field": "errors", "headerName": "Errors", "type": "rightAligned",
     "tooltipField": "error_detail"},
    {"field": "xmit_wait", "headerName": "Xmit wait/s", "type": "rightAligned"},
    {"field": "sampled", "headerName": "Newest sample (UTC)", "minWidth": 190},
]  # fmt: skip


def fabric_link_rows(page: LinkPage) -> list[dict[str, Any]]:
    """The fabric links grid's rows: a page of the links list (row id = link id). Errors:
    the sum of the known error deltas, "saturated" or "?" when some counter is saturated or
    unknown (the tooltip names each counter's value)."""
    rows = []
    for x in page.links:
        detail = ", ".join(
            f"{ERROR_HEADINGS[c]}: {'saturated' if c in x.saturated else _known(x.errors.get(c))}"
            for c in ERROR_HEADINGS
        )
        errors = str(x.errors_total)
        if x.saturated:
            errors += " (saturated)"
        elif any(x.errors.get(c) is None for c in ERROR_HEADINGS):
            errors += " (some ?)"
        rows.append(
            {
                "id": x.id,
                "link": f"{x.a.label()} - {x.b.label()}",
                "state": x.state,
                "utilisation": _percent(x.utilisation),
                "a_to_b": _rate(x.a_to_b_bytes_per_s),
                "b_to_a": _rate(x.b_to_a_bytes_per_s),
                "capacity": _known(x.capacity_bytes_per_s),
                "errors": errors,
                "error_detail": detail,
                "xmit_wait": _rate(x.xmit_wait_per_s),
                "sampled": format_utc_ns(x.ts_ns) if x.ts_ns is not None else "?",
            }
        )
    return rows


def fabric_links_caption(page: LinkPage, first: int, scope: str) -> str:
    """What the links grid holds: "links 1–100 of 3,584, busiest first, <scope>"."""
    order = "busiest first" if page.sort == "utilisation" else "most errors first"
    if not page.links:
        return f"No link, {scope}."
    last = first + len(page.links) - 1
    return (
        f"links {first:,}–{last:,} of {page.page.total:,}, {order}, {scope} "
        "(? = unknown; a down link has no rate)"
    )


def fabric_events_markdown(events: Sequence[FabricEvent], total: int, scope: str) -> str:
    """Fabric events of a window (newest start first; `total` of them in all) as a
    Markdown table: start, end ("open" while it lasts), kind, subject; `scope` names the
    window."""
    shown = events[:MAX_EVENT_ROWS]
    if not shown:
        return f"No fabric event {scope} (links down or up, nodes gone or new, error bursts)."
    caption = f"{len(shown)} of {total} fabric event{'s' * (total != 1)} {scope}, newest first."
    headings = ("Start (UTC)", "End (UTC)", "Event", "Subject")
    rows = [
        (format_utc_ns(e.start_ns), "open" if e.end_ns is None else format_utc_ns(e.end_ns),
         _md(e.kind), _md(e.subject))
        for e in shown
    ]  # fmt: skip
    return _table(caption, headings, "llll", rows)


def link_jobs_markdown(attribution: LinkAttribution) -> str:
    """The jobs on a link over a window (GET /api/fabric/links/{link}/attribution): per
    job, its bytes each way (all layers), and `other` (measured - attributed)."""
    per: dict[tuple[str, str], dict[str, float]] = {}
    for d in attribution.directions:
        for x in d.by_job:
            key = (x.job or "another job", x.user or "")
            per.setdefault(key, {}).setdefault(d.direction, 0.0)
            per[key][d.direction] += x.bytes
    other = {d.direction: d.other_bytes for d in attribution.directions}
    if not per:
        return "No job's traffic is attributed to this link in the window."
    caption = (
        f"{len(per)} job{'s' * (len(per) != 1)} on this link (routed over the forwarding "
        f"tables, paths: {attribution.paths}); other = measured − attributed."
    )
    rows = [
        (_md(job), _md(user), format_bytes(ways.get("a_to_b", 0.0)),
         format_bytes(ways.get("b_to_a", 0.0)))
        for (job, user), ways in sorted(per.items(), key=lambda kv: -sum(kv[1].values()))
    ]  # fmt: skip
    a_to_b, b_to_a = (
        "?" if other.get(w) is None else format_bytes(other[w] or 0.0) for w in ("a_to_b", "b_to_a")
    )
    rows.append(("other", "", a_to_b, b_to_a))
    return _table(caption, ("Job", "User", "A → B", "B → A"), "llrr", rows)


def node_jobs_markdown(answer: NodeJobs) -> str:
    """The jobs on a node over a window (GET /api/fabric/nodes/{guid}/jobs): per job, its
    hosts on the node (an HCA) and its bytes over the node's links each way."""
    if not answer.jobs:
        return "No job's traffic is on this node in the window."
    n = len(answer.jobs)
    caption = (
        f"{n} job{'s' * (n != 1)} on this node (bytes over its links, routed over the "
        f"forwarding tables, paths: {answer.paths})."
    )
    rows = [
        (_md(j.job or "another job"), _md(j.user or ""), _md(", ".join(j.hosts)),
         format_bytes(j.bytes_out), format_bytes(j.bytes_in))
        for j in answer.jobs
    ]  # fmt: skip
    return _table(caption, ("Job", "User", "Hosts here", "Out", "In"), "lllrr", rows)


def communicator_label(comm_id: int, overflow: bool) -> str:
    """How a communicator id reads on the page: 8 hex digits, or "overflow" for the key that
    holds the communicators beyond STACKLENS_MAX_KEYS."""
    return "overflow" if overflow else f"{comm_id:08x}"


def communicators_table_markdown(coll: JobCollectives) -> str:
    """The communicators of the job's collectives as Markdown (see `markdown_table` on why):
    a caption line, then one row per communicator, heaviest time first, at most
    `MAX_COMM_ROWS`; a sentence instead when the job called no collective.

    Columns: communicator, size, ranks, (op, root) rows, calls, bytes (exact), payload, time.
    """
    n = len(coll.communicators)
    if not n:
        return "No collective calls recorded for this job."
    if n > MAX_COMM_ROWS:
        caption = f"Heaviest {MAX_COMM_ROWS} of {n} communicators by time inside collectives."
    else:
        caption = f"{n} communicator{'s' if n != 1 else ''} with collective calls."
    headings = ("Communicator", "Size", "Ranks", "Ops", "Calls", "Bytes", "Payload", "Time inside")
    align = "lrrrrrrr"
    rows = [
        (
            communicator_label(c.comm_id, c.overflow),
            c.comm_size,
            c.ranks,
            c.ops,
            c.calls,
            c.bytes,
            format_bytes(c.bytes),
            format_duration_ns(c.time_ns),
        )
        for c in coll.communicators[:MAX_COMM_ROWS]
    ]
    return _table(
        f"{caption} Communicator ids are the same on every member.", headings, align, rows
    )


def collectives_table_markdown(coll: JobCollectives) -> str:
    """The collectives table as Markdown: a caption line, then one row per (communicator, op,
    root), heaviest time first, at most `MAX_COLL_ROWS` rows; empty without collectives (the
    communicators table says so).

    Columns: communicator, size, op, root (world rank, "none"), ranks, calls, bytes (exact),
    payload (human-readable), time inside.
    """
    n = len(coll.collectives)
    if not n:
        return ""
    overflow = {c.comm_id for c in coll.communicators if c.overflow}
    if n > MAX_COLL_ROWS:
        caption = f"Heaviest {MAX_COLL_ROWS} of {n} collectives by time inside the calls."
    else:
        caption = f"{n} collective{'s' if n != 1 else ''} (per communicator, op and root)."
    headings = (
        "Communicator",
        "Size",
        "Operation",
        "Root",
        "Ranks",
        "Calls",
        "Bytes",
        "Payload",
        "Time inside",
    )
    align = "lrlrrrrrr"
    rows = [
        (
            communicator_label(c.comm_id, c.comm_id in overflow),
            c.comm_size,
            _md(c.op),
            c.root if c.root >= 0 else "none",
            c.ranks,
            c.calls,
            c.bytes,
            format_bytes(c.bytes),
            format_duration_ns(c.time_ns),
        )
        for c in coll.collectives[:MAX_COLL_ROWS]
    ]
    caption += " Calls, bytes and time are summed over the ranks taking part."
    return _table(caption, headings, align, rows)


def sizes_table_markdown(sizes: JobSizes) -> str:
    """The message-size histogram as Markdown: a caption line, then one row per (op, size
    bucket) with messages, the ops with the most messages first, buckets smallest first, at
    most `MAX_SIZE_ROWS` rows; a sentence instead when nothing was recorded.

    Columns: op, size range, from (bytes, included), below (bytes, excluded), messages.
    """
    rows = [(o, b) for o in sizes.ops for b in o.buckets]
    if not rows:
        return "No message sizes recorded for this job."
    n = len(rows)
    if n > MAX_SIZE_ROWS:
        caption = f"First {MAX_SIZE_ROWS} of {n} (operation, size) rows, busiest ops first."
    else:
        caption = f"{n} (operation, size) row{'s' if n != 1 else ''}, busiest ops first."
    caption += (
        " Each range holds sizes from its lower bound up to, not including, its upper "
        "bound; messages are summed over all ranks."
    )
    headings = ("Operation", "Size", "From (bytes)", "Below (bytes)", "Messages")
    align = "llrrr"
    cells = [
        (
            _md(o.op),
            format_size_bucket(b.lower_bytes, b.upper_bytes),
            b.lower_bytes,
            b.upper_bytes,
            b.count,
        )
        for o, b in rows[:MAX_SIZE_ROWS]
    ]
    return _table(caption, headings, align, cells)


def _startup_io(io: JobIo) -> str:
    """A sentence on the I/O before MPI_Init (start-up: the loader, an interpreter's
    imports), which the grid leaves out; "" when there was none."""
    n = io.startup.files
    if not n:
        return ""
    read, written = io.startup.bytes_read, io.startup.bytes_written
    return (
        f" Start-up I/O before MPI_Init, not in the grid: {n} file{'s' if n != 1 else ''}, "
        f"{format_bytes(read)} read, {format_bytes(written)} written."
    )


def ranks_summary(ranks: JobRanks) -> list:
    """One line: ranks reported of the world, the hosts they ran on (ranks per host), and a
    warning per health counter that is not zero (counts folded, frames lost)."""
    n = ranks.page.total
    hosts = ranks.hosts
    named = ", ".join(f"{h.host} ({h.ranks})" for h in hosts[:MAX_SUMMARY_HOSTS])
    more = f" and {len(hosts) - MAX_SUMMARY_HOSTS} more" if len(hosts) > MAX_SUMMARY_HOSTS else ""
    parts: list = [
        f"{n} of {ranks.world_size} ranks reported"
        + (f", on {len(hosts)} host{'s' if len(hosts) != 1 else ''}: {named}{more}." if n else ".")
    ]
    health = ranks.health
    folded, lost = health.ranks_folded, health.ranks_lost
    if folded:
        parts.append(
            html.Span(
                f" {folded} rank{'s' if folded != 1 else ''} folded "
                f"{health.keys_dropped} new keys into overflow rows "
                "(STACKLENS_MAX_KEYS): totals are exact, per-peer/file/communicator detail is not.",
                className="health-warning",
            )
        )
    if lost:
        parts.append(
            html.Span(
                f" {lost} rank{'s' if lost != 1 else ''} lost "
                f"{health.frames_dropped} frames: this job's counts are incomplete.",
                className="health-error",
            )
        )
    return parts


def ranks_table_markdown(ranks: JobRanks) -> str:
    """The ranks table as Markdown: a caption line, then one row per rank that reported, ranks
    with folded keys or lost frames first, then by rank, at most `MAX_RANK_ROWS` rows.
    Non-zero folded/lost counts are bold with a warning sign.

    Columns: rank, host, pid, status (with MPI_Abort's error code), first and last interval
    seen (UTC), keys folded, frames lost, frames spooled.
    """
    n = ranks.page.total
    if not n:
        return "No rank has reported yet."
    shown = sorted(ranks.ranks, key=lambda r: (not (r.keys_dropped or r.frames_dropped), r.rank))
    if n > min(len(shown), MAX_RANK_ROWS):
        caption = (
            f"{min(len(shown), MAX_RANK_ROWS)} of {n} ranks, those with folded or lost "
            "counts first."
        )
    else:
        caption = f"{n} rank{'s' if n != 1 else ''}, those with folded or lost counts first."
    caption += (
        " Keys folded: new peers/files/communicators counted in an overflow row; "
        "frames lost: counts that never arrived; frames spooled: delivered late, via disk."
    )
    headings = (
        "Rank",
        "Host",
        "PID",
        "Status",
        "First seen",
        "Last seen",
        "Keys folded",
        "Frames lost",
        "Frames spooled",
    )
    align = "rlrlllrrr"
    rows = [
        (
            r.rank,
            _md(r.host),
            r.pid,
            _md(r.status if r.abort_code is None else f"{r.status} (code {r.abort_code})"),
            _md(format_utc_ns(r.first_seen_ns)),
            _md(format_utc_ns(r.last_seen_ns)),
            _alarm(r.keys_dropped),
            _alarm(r.frames_dropped),
            r.frames_spooled,
        )
        for r in shown[:MAX_RANK_ROWS]
    ]
    return _table(caption, headings, align, rows)


def link_name(a: LinkEnd, b: LinkEnd) -> str:
    """A link as `name[port] - name[port]`, the ends in text order."""
    return " - ".join(sorted((a.label(), b.label())))


def placement_hosts_markdown(placement: JobPlacement) -> str:
    """The job's hosts on the fabric as Markdown: a caption, then one row per host (by
    name; unmatched ones included). Columns: host, ranks, match (guid | host name |
    unmatched, the last bold with a warning sign), HCA ports (name[port] node GUID)."""
    hosts = placement.hosts
    if not hosts:
        return "No rank reported a host in this window."
    lost = sum(h.match == "unmatched" for h in hosts)
    caption = f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}"
    caption += f", {lost} not found on the fabric." if lost else ", all found on the fabric."
    rows = [
        (
            _md(h.host),
            rank_ranges(h.ranks),
            "**⚠ unmatched**" if h.match == "unmatched" else h.match,
            ", ".join(f"{_md(p.label())} {p.guid}" for p in h.ports) or "—",
        )
        for h in hosts
    ]
    return _table(caption, ("Host", "Ranks", "Match", "HCA ports"), "lrll", rows)


def placement_links_markdown(placement: JobPlacement) -> str:
    """The job's links as Markdown: a caption saying what the candidates are, then one row
    per link, host links first. Columns: link (`link_name`), kind, job hosts on it, mean
    and peak utilisation over the window, bytes/s left to right and right to left as the
    link is written (whole bytes), PortXmitWait ticks and ticks/s ("?" = unknown)."""
    links = sorted(placement.links, key=lambda lk: (lk.kind != "host", lk.id))
    if not links:
        return "No link: no host of this job was found on the fabric."
    caption = (
        f"{len(links)} links over the window: the hosts' own links, and as {placement.crossed} "
        "every switch-to-switch link on a shortest path between their switches (the "
        "forwarding tables decide which of them a flow crosses)."
    )
    headings = ("Link", "Kind", "Hosts", "Utilisation", "Peak", "→ B/s", "← B/s",
                "PortXmitWait", "Wait/s")  # fmt: skip
    rows = []
    for lk in links:
        rates = (lk.a_to_b_bytes_per_s, lk.b_to_a_bytes_per_s)
        right, left = rates if lk.a.label() <= lk.b.label() else rates[::-1]
        rows.append((
            _md(link_name(lk.a, lk.b)), lk.kind, _md(", ".join(lk.hosts)) or "—",
            _percent(lk.utilisation), _percent(lk.peak_utilisation), _rate(right),
            _rate(left), _known(lk.xmit_wait), _rate(lk.xmit_wait_per_s),
        ))  # fmt: skip
    return _table(caption, headings, "lllrrrrrr", rows)


def _table(caption: str, headings: Sequence[str], align: str, rows: Iterable[Sequence]) -> str:
    """A Markdown table under a caption line: a column per heading, aligned as its letter in
    `align` says ("l" left, "r" right), and each row the values of its cells in that order."""
    assert len(align) == len(headings)
    lines = [
        caption,
        "",
        "| " + " | ".join(headings) + " |",
        "|" + "".join("---:|" if a == "r" else "---|" for a in align),
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction * 100:.1f} %"


def _rate(bytes_per_s: float | None) -> str:
    return "?" if bytes_per_s is None else f"{bytes_per_s:.0f}"


def _known(value: int | None) -> str:
    return "?" if value is None else str(value)


def _alarm(count: int) -> str:
    """A count that should be zero: bold with a warning sign when it is not."""
    return f"**⚠ {count}**" if count else "0"


def _calls(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


def _category_label(category: str) -> str:
    return CATEGORY_LABELS.get(category, category)


def _md(text: str) -> str:
    """`text` as literal Markdown table-cell text: syntax characters as numeric character
    references, control characters (a newline would end the row) shown as U+FFFD."""
    text = "".join(ch if ch >= " " and ch != "\x7f" else "\ufffd" for ch in text)
    return _MARKDOWN_SYNTAX.sub(lambda m: f"&#{ord(m.group())};", text)


def outlier_items(profile: SlowRanks) -> list:
    """The slow ranks and the collective imbalances of a profile, one list item each in
    words; one item saying so when there is none."""
    items = [html.Li(o.text, className="outlier") for o in profile.outliers]
    items += [html.Li(g.text, className="imbalance") for g in profile.imbalance]
    return items or [html.Li("No rank stands out in this window.", className="subtle")]


# ---- incidents -----------------------------------------------------------------------------

INCIDENT_COLUMNS = [
    _number("id", "#", maxWidth=80),
    _text("severity", "Severity", maxWidth=110, cellClass="severity"),
    _text("kind", "Kind", maxWidth=140),
    _text("summary", "Incident", tooltipField="summary", minWidth=420),
    _text("state", "State", maxWidth=100),
    _text("start", "Start (UTC)"),
    _text("end", "End (UTC)"),
    _number("jobs", "Jobs", maxWidth=90),
]


def incident_rows(incidents: IncidentList) -> list[dict[str, Any]]:
    """The incidents grid's rows (row id = incident id), newest first."""
    return [
        {
            "id": i.id,
            "severity": i.severity,
            "kind": i.kind,
            "summary": i.summary,
            "state": "open" if i.open else "ended",
            "start": format_utc_ns(i.start_ns),
            "end": "" if i.end_ns is None else format_utc_ns(i.end_ns),
            "jobs": i.jobs,
        }  # fmt: skip
        for i in incidents.incidents
    ]


def incident_banner(incidents: IncidentList) -> list[Any]:
    """The banner of every page while incidents are open (empty when none): how many, the
    newest's severity and summary, and a link to the Incidents page."""
    if not incidents.incidents:
        return []
    newest = incidents.incidents[0]
    count = incidents.page.total
    head = f"{count} open incident{'s' if count != 1 else ''}"
    return [html.Div(className=f"notice notice-error incident-banner severity-{newest.severity}",
                     role="alert", children=[
        html.Strong(head), f" — {newest.severity}: {newest.summary} ",
        dcc.Link("see incidents", href="/incidents"),
    ])]  # fmt: skip


def incident_jobs_markdown(incident: IncidentDetails) -> str:
    """A Markdown table of an incident's jobs: role, job (or "another job"), its signals,
    bytes on the links, ranks and files."""
    if not incident.members:
        return "No job crosses the link or slowed during it."
    lines = ["| Role | Job | User | Signals | Bytes on the links | Ranks | Files |",
             "|---|---|---|---|---:|---|---|"]  # fmt: skip
    for m in incident.members:
        job = _md(m.job) if m.job else "another job"
        nbytes = "" if m.link_bytes is None else format_bytes(m.link_bytes)
        ranks = ", ".join(map(str, m.ranks[:16]))
        files = ", ".join(_md(f) for f in m.files[:4])
        lines.append(f"| {m.role} | {job} | {_md(m.user or '')} | {', '.join(m.signals)} | "
                     f"{nbytes} | {ranks} | {files} |")  # fmt: skip
    return "\n".join(lines)
