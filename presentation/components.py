# presentation/components.py — the job cards' pieces: API data in, Dash components and text out.
"""What the job cards show on the pages: the grids (long lists: rank pairs, files, RMA
pairs) and Markdown tables (short ones), their rows, captions and summary lines.

Every exact value is plain text in the DOM. Grid cells carry their column's field as
`col-id` (e.g. `[col-id=bytes]`) for readers and browser tests alike; the grid shows text
as text. Text from the job (paths, mounts) is escaped before it goes into a Markdown table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import dash_ag_grid as dag
from dash import dcc, html

from presentation.figures import loading_figure
from presentation.formatting import (
    communicator_label,
    counted_apart,
    format_bytes,
    format_duration_ns,
    format_size_bucket,
    format_utc_ns,
    rank_ranges,
    ranks_or_processes,
)
from stacklens.api_models import (
    Callsite,
    CommFamily,
    Comparison,
    JobCallsites,
    JobCollectives,
    JobFamilies,
    JobIo,
    JobOps,
    JobRanks,
    JobRma,
    JobSizes,
    Matrix,
)
from stacklens.constants import CATEGORY_LABELS

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


# Characters of table-cell text that Markdown could read as syntax: cell borders, escapes,
# code, emphasis, links and images, HTML, entities, autolinks. They are written as numeric
# character references, which every Markdown dialect shows as the literal character
# (dcc.Markdown's remark honours backslash escapes for only some of them).
_MARKDOWN_SYNTAX = re.compile(r"[\\`*_~\[\]()!<>&|:@]")


def chart(chart_id: str, height_px: int | None = None) -> dcc.Graph:
    """A Plotly chart (`height_px` high, else Plotly's default) that shows "Loading…" until
    its first figure comes, never an empty pair of axes."""
    style = None if height_px is None else {"height": f"{height_px}px"}
    return dcc.Graph(id=chart_id, style=style, config={"displaylogo": False},
                     figure=loading_figure())  # fmt: skip


def card(title: str, *children, section_id: str | None = None) -> html.Section:
    """A titled card of a page (`section_id`: its DOM id, if it needs one)."""
    ident: dict[str, Any] = {"id": section_id} if section_id else {}
    return html.Section(className="card", children=[html.H2(title), *children], **ident)


def markdown_table(table_id: str, extra_class: str = "") -> dcc.Markdown:
    """A scrolling Markdown table, for the short tables (the long ones are grids): a
    dcc.Markdown table costs the browser one Dash component, where an html.Table costs one
    per cell, far too slow to re-render every second at a few hundred rows."""
    return dcc.Markdown(id=table_id, className=f"scroll table-wrap md-table {extra_class}".strip())


#: Grid columns (dash-ag-grid column definitions): the field of the row dicts below, the
#: heading, and for numbers a numeric filter and right alignment. Human-readable values
#: ("1.5 MiB") are columns of their own beside the exact ones.
def text_column(field: str, heading: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": heading, "filter": "agTextColumnFilter", **extra}


def number_column(field: str, heading: str, **extra: Any) -> dict[str, Any]:
    return {"field": field, "headerName": heading, "type": "numericColumn",
            "filter": "agNumberColumnFilter", **extra}  # fmt: skip


PAIR_COLUMNS = [
    number_column("src", "Source rank"),
    number_column("dst", "Destination rank"),
    number_column("bytes", "Bytes", sort="desc"),
    text_column("sent", "Sent", type="rightAligned", sortable=False),
    number_column("messages", "Messages"),
]


FILE_COLUMNS = [
    text_column("layer", "Layer"),
    text_column("path", "Path", cellClass="mono", tooltipField="path", minWidth=260),
    text_column("fstype", "File system"),
    text_column("mount", "Mount", cellClass="mono"),
    number_column("ranks", "Ranks"),
    number_column("opens", "Opens"),
    number_column("reads", "Reads"),
    number_column("writes", "Writes"),
    number_column("bytes_read", "Bytes read"),
    number_column("bytes_written", "Bytes written"),
    text_column("read_time", "Read time", type="rightAligned", sortable=False),
    text_column("write_time", "Write time", type="rightAligned", sortable=False),
    text_column("meta_time", "Meta time", type="rightAligned", sortable=False),
]


RMA_COLUMNS = [
    number_column("origin", "Origin rank"),
    number_column("target", "Target rank"),
    number_column("calls", "Calls"),
    number_column("bytes", "Bytes"),
    text_column("moved", "Moved", type="rightAligned", sortable=False),
    text_column("per_op", "Per operation", minWidth=260),
]


#: A grid cell's tooltip: its column's tooltip field, else the text it shows.
CELL_TOOLTIP = (
    "params.colDef.tooltipField ? params.data[params.colDef.tooltipField] "
    ": (params.valueFormatted != null ? params.valueFormatted : params.value)"
)


#: The call sites grid: where each is, its op, time (ms, sortable), share, calls, bytes,
#: sizes, the rank with the most time and the imbalance, how it was resolved.
CALLSITE_COLUMNS = [
    text_column("where", "Call site", cellClass="mono", tooltipField="path", minWidth=200,
                pinned="left"),
    text_column("op", "Operation"),
    number_column("time_ms", "Time (ms)", sort="desc"),
    number_column("share_pct", "Share %"),
    number_column("calls", "Calls"),
    number_column("bytes", "Bytes"),
    number_column("mean_bytes", "Mean size"),
    text_column("sizes", "Size range", type="rightAligned", sortable=False),
    number_column("ranks", "Ranks"),
    number_column("most_time_rank", "Most time (rank)"),
    number_column("imbalance", "Imbalance"),
    text_column("quality", "Resolved as", tooltipField="reason"),
]  # fmt: skip


def callsite_path(site: Callsite) -> str:
    """A site's frames in full, innermost first (function, file:line or module+offset)."""
    parts = []
    for f in site.frames:
        where = f"{f.file}:{f.line}" if f.file and f.line else f"{f.module}+{f.offset:#x}"
        parts.append(f"{f.function} ({where})" if f.function else where)
    return " < ".join(parts) or site.label


def callsite_rows(sites: JobCallsites) -> list[dict[str, Any]]:
    """The call sites grid's rows, heaviest time first."""
    return [
        {
            "id": s.key,
            "where": s.label,
            "path": callsite_path(s),
            "op": s.op,
            "time_ms": round(s.time_ns / 1e6, 3),
            "share_pct": round(100 * s.share, 1),
            "calls": s.calls,
            "bytes": s.bytes,
            "mean_bytes": round(s.mean_bytes),
            "sizes": format_size_bucket(s.min_bytes, s.max_bytes + 1),
            "ranks": s.ranks,
            "most_time_rank": s.most_time_rank,
            "imbalance": round(s.imbalance, 2),
            "quality": s.frames[0].quality if s.frames else "",
            "reason": s.frames[0].reason if s.frames else "",
        }
        for s in sites.sites
    ]


def callsite_caption(sites: JobCallsites) -> str:
    """What the call sites grid holds, or a sentence when there are none."""
    n, total = len(sites.sites), sites.page.total
    if not total:
        return ("No call sites: the job's ranks recorded none in this window "
                "(STACKLENS_CALLSITE_DEPTH=0 switches them off).")  # fmt: skip
    held = (f"{total:,} call site{'s' * (total != 1)}" if n == total
            else f"The {n:,} of {total:,} call sites with the most time")  # fmt: skip
    return (f"{held}, heaviest time first: {format_duration_ns(sites.mpi_time_ns)} inside MPI "
            f"and {format_duration_ns(sites.io_time_ns)} in file I/O in all. Share: of the "
            "job's MPI (or file I/O) time; imbalance: the most time of a rank over the mean "
            "of the ranks calling from there; size range: the size buckets' bounds.")  # fmt: skip


#: The compared call sites grid: where, op, which runs have it, time in a and b (ms,
#: summed over ranks), the change (ms and %, ranked by its size), calls and bytes of both.
SITE_DIFF_COLUMNS = [
    text_column("where", "Call site", cellClass="mono", tooltipField="path", minWidth=200,
                pinned="left"),
    text_column("op", "Operation"),
    text_column("present", "In", tooltipField="present_text"),
    number_column("a_ms", "Time a (ms)"),
    number_column("b_ms", "Time b (ms)"),
    number_column("delta_ms", "Change (ms)"),
    number_column("delta_pct", "Change %"),
    number_column("a_calls", "Calls a"),
    number_column("b_calls", "Calls b"),
    number_column("a_bytes", "Bytes a"),
    number_column("b_bytes", "Bytes b"),
]  # fmt: skip

#: What the grid's "In" cell says in full.
_PRESENT = {"both": "in both runs", "a": "in run a only", "b": "in run b only"}


def site_difference_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """The compared call sites grid's rows, in the API's order (largest change first)."""
    return [
        {
            "id": f"{d.layer}:{d.op}@{d.path}",
            "where": d.label,
            "path": d.path,
            "op": d.op,
            "present": "both" if d.present == "both" else f"{d.present} only",
            "present_text": _PRESENT[d.present],
            "a_ms": round(d.a_ns / 1e6, 3),
            "b_ms": round(d.b_ns / 1e6, 3),
            "delta_ms": round(d.delta_ns / 1e6, 3),
            "delta_pct": None if d.delta_pct is None else round(d.delta_pct, 1),
            "a_calls": d.a_calls,
            "b_calls": d.b_calls,
            "a_bytes": d.a_bytes,
            "b_bytes": d.b_bytes,
        }
        for d in comparison.sites
    ]


def site_difference_caption(comparison: Comparison) -> str:
    """What the compared call sites grid holds, or a sentence when neither run has one."""
    n, total = len(comparison.sites), comparison.sites_total
    if not total:
        return "No call sites in either run (STACKLENS_CALLSITE_DEPTH=0 switches them off)."
    held = (f"{total:,} call site{'s' * (total != 1)}" if n == total
            else f"The {n:,} of {total:,} call sites whose time changed most")  # fmt: skip
    return (f"{held} of either run, the largest change of time first: a site is the same in "
            "both when its operation and frames are (file, line and function, else build-id "
            "and offset). Time: summed over the ranks, as each run's Call sites card shows "
            "it; change: b − a, in % of a; 'a only' or 'b only': a site of one run.")  # fmt: skip


def grid(grid_id: str, columns: list[dict[str, Any]], height_px: int = 420) -> Any:
    """A grid of rows (dash-ag-grid): virtual scrolling, every column sortable, filterable
    and resizable in the browser; rows carry an `id` field that keeps them apart across
    refreshes (a refresh then updates rows in place instead of redrawing the grid). Its
    columns are as wide as their heading and content when the first rows come, unless one
    has `flex`: that one then takes the width the others' own widths leave (AG Grid sizes
    no grid with a flex column to content)."""
    fitted = not any("flex" in c for c in columns)
    return dag.AgGrid(
        id=grid_id,
        className="grid",
        columnDefs=columns,
        rowData=[],
        getRowId="'' + params.data.id",  # AG Grid wants a string (a link id is a number)
        defaultColDef={"sortable": True, "filter": True, "resizable": True, "minWidth": 90,
                       # every cell says its whole text on hover (a long one is cut)
                       "tooltipValueGetter": {"function": CELL_TOOLTIP}},
        dashGridOptions={"animateRows": False, "suppressCellFocus": True,
                         "tooltipShowDelay": 300, "enableCellTextSelection": True,
                         "suppressColumnVirtualisation": True,  # every column in the DOM
                         # sized to content (above): a wider grid scrolls, each column resizable
                         **({"autoSizeStrategy": {"type": "fitCellContents"}} if fitted else {})},
        style={"height": f"{height_px}px", "width": "100%"},
    )  # fmt: skip


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
            "per_op": "; ".join(f"{o.op} {calls_text(o.calls)}, {o.bytes} B" for o in c.ops),
        }
        for c in rma.cells
    ]


def rma_caption(rma: JobRma) -> str:
    """The one-sided totals per op, and what the RMA grid holds; a sentence without RMA."""
    n, total = len(rma.cells), rma.page.total
    if not total:
        return "No one-sided (RMA) calls in this job."
    totals = "; ".join(f"{o.op} {calls_text(o.calls)}, {format_bytes(o.bytes)}" for o in rma.ops)
    held = f"{total:,} (origin, target) pair{'s' * (total != 1)}" if n == total else (
        f"The first {n:,} of {total:,} (origin, target) pairs"
    )  # fmt: skip
    return f"{held}. In all: {totals}."


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
            md_text(o.op),
            md_text(_category_label(o.category)),
            o.ranks,
            o.calls,
            o.bytes,
            format_bytes(o.bytes),
            format_duration_ns(o.time_ns),
        )
        for o in ops.ops[:MAX_OP_ROWS]
    ]
    return table_markdown(
        f"{caption} Calls, bytes and time are summed over all ranks.", headings, align, rows
    )


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
    return table_markdown(
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
            md_text(c.op),
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
    return table_markdown(caption, headings, align, rows)


#: Groups whose members a family's row lists (the rest are counted).
MAX_MEMBER_GROUPS = 4
#: Where a family's bytes go, as its table's columns say: (API reach, heading).
FAMILY_REACH_HEADINGS = (("host", "In a host"), ("leaf", "Crossing a leaf"),
                         ("spine", "Crossing the spine"), ("unplaced", "Not placed"))  # fmt: skip


def family_members(family: CommFamily) -> str:
    """A family's groups as world-rank ranges ("0–3; 4–7"), by their lowest rank, the
    first `MAX_MEMBER_GROUPS`, then how many more."""
    groups = sorted(family.groups, key=lambda g: min(g.members, default=-1))
    shown = "; ".join(rank_ranges(g.members) for g in groups[:MAX_MEMBER_GROUPS])
    more = family.groups_total - min(len(family.groups), MAX_MEMBER_GROUPS)
    return f"{shown}; … {more} more" if more > 0 else shown


def family_group_sizes(family: CommFamily) -> str:
    """The ranks per group of a family's listed groups: "8", or "2–4" when they differ."""
    sizes = sorted({len(g.members) for g in family.groups})
    if not sizes:
        return ""
    return str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"


def family_reaches(families: JobFamilies) -> list[tuple[str, str]]:
    """The reach columns of the families table: inside a host, crossing a leaf and the spine
    always; "not placed" only when some family has bytes there."""
    used = {r.reach for f in families.families for r in f.reach}
    return [(k, h) for k, h in FAMILY_REACH_HEADINGS if k != "unplaced" or k in used]


def family_headings(families: JobFamilies) -> list[str]:
    """The families table's headings (page and report)."""
    return ["Family", "Communicators", "Ranks per group", "Members (world ranks)", "Calls",
            "Collective bytes", "Collective time", "Point-to-point bytes",
            "Point-to-point time", *(h for _, h in family_reaches(families))]  # fmt: skip


def family_rows(families: JobFamilies) -> list[list[str]]:
    """One row per family, as the API lists them (heaviest time first), cells as text: its
    label, communicators, ranks per group, members, calls (messages for point-to-point),
    bytes and time by op class (collective, point-to-point) and its bytes by reach ("—"
    where the API gives none)."""
    rows = []
    for f in families.families:
        by_kind = {kind: [0, 0] for kind in ("collective", "p2p")}
        for o in f.ops:
            by_kind[o.kind][0] += o.bytes
            by_kind[o.kind][1] += o.time_ns
        reach: dict[str, int] = {}
        for r in f.reach:
            reach[r.reach] = reach.get(r.reach, 0) + r.bytes
        rows.append([
            f.label, str(f.groups_total), family_group_sizes(f), family_members(f),
            f"{sum(o.calls for o in f.ops):,}",
            *(text for kind in ("collective", "p2p") for text in (
                format_bytes(by_kind[kind][0]), format_duration_ns(by_kind[kind][1]))),
            *(format_bytes(reach[k]) if k in reach else "—" for k, _ in family_reaches(families)),
        ])  # fmt: skip
    return rows


def families_table_markdown(families: JobFamilies) -> str:
    """The communicator families as Markdown (see `markdown_table` on why): a caption
    line, then one row per family (`family_rows`); a sentence instead when none."""
    n = len(families.families)
    if not n:
        return "No communicator families recorded for this job."
    total = families.page.total
    caption = (f"{n} communicator famil{'ies' if n != 1 else 'y'}" if n == total
               else f"The first {n} of {total} communicator families")  # fmt: skip
    caption += (", heaviest time first (a family: the communicators one call made, or of one "
                "name). Calls, bytes and time are summed over the ranks; bytes by reach "
                "are point-to-point bytes routed and collective bytes modelled.")  # fmt: skip
    headings = family_headings(families)
    rows = [[md_text(cell) for cell in row] for row in family_rows(families)]
    return table_markdown(caption, headings, "lrrl" + "r" * (len(headings) - 4), rows)


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
            md_text(o.op),
            format_size_bucket(b.lower_bytes, b.upper_bytes),
            b.lower_bytes,
            b.upper_bytes,
            b.count,
        )
        for o, b in rows[:MAX_SIZE_ROWS]
    ]
    return table_markdown(caption, headings, align, cells)


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
    """One line: MPI ranks reported of the world and, apart, the non-MPI processes (a batch
    script's shell: "2 of 2 ranks reported, and 1 process"; only processes: "1 process
    reported"), the hosts they ran on (ranks and processes per host), and a warning per
    health counter that is not zero (counts folded, frames lost)."""
    n = ranks.page.total
    hosts = ranks.hosts
    named = ", ".join(f"{h.host} ({h.ranks})" for h in hosts[:MAX_SUMMARY_HOSTS])
    more = f" and {len(hosts) - MAX_SUMMARY_HOSTS} more" if len(hosts) > MAX_SUMMARY_HOSTS else ""
    parts: list = [
        _reported(ranks)
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


def _reported(ranks: JobRanks) -> str:
    """How many MPI ranks of the world and, apart, how many non-MPI processes reported."""
    mpi, processes = ranks.ranks_reported, ranks.processes_reported
    if processes and not mpi:
        return f"{ranks_or_processes('processes', processes)} reported"
    also = f", and {ranks_or_processes('processes', processes)}" if processes else ""
    return f"{mpi} of {ranks.world_size} ranks reported{also}"


def ranks_table_markdown(ranks: JobRanks) -> str:
    """The ranks table as Markdown: a caption line, then one row per rank that reported, ranks
    with folded keys or lost frames first, then by rank (non-MPI processes after the ranks),
    at most `MAX_RANK_ROWS` rows. Non-zero folded/lost counts are bold with a warning sign.

    Columns: rank (a non-MPI process of the processes run: "process N"), host, pid, status
    (with MPI_Abort's error code), first and last interval seen (UTC), keys folded, frames
    lost, frames spooled.
    """
    n = ranks.page.total
    if not n:
        return "No rank has reported yet."
    shown = sorted(
        ranks.ranks,
        key=lambda r: (not (r.keys_dropped or r.frames_dropped), r.kind == "processes", r.rank),
    )
    said = " and ".join(counted_apart(ranks.ranks_reported, ranks.processes_reported))
    if n > min(len(shown), MAX_RANK_ROWS):
        said = f"{min(len(shown), MAX_RANK_ROWS)} of {said}"
    caption = f"{said}, those with folded or lost counts first."
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
            f"process {r.rank}" if r.kind == "processes" else r.rank,
            md_text(r.host),
            r.pid,
            md_text(r.status if r.abort_code is None else f"{r.status} (code {r.abort_code})"),
            md_text(format_utc_ns(r.first_seen_ns)),
            md_text(format_utc_ns(r.last_seen_ns)),
            _alarm(r.keys_dropped),
            _alarm(r.frames_dropped),
            r.frames_spooled,
        )
        for r in shown[:MAX_RANK_ROWS]
    ]
    return table_markdown(caption, headings, align, rows)


def table_markdown(
    caption: str, headings: Sequence[str], align: str, rows: Iterable[Sequence]
) -> str:
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


def _alarm(count: int) -> str:
    """A count that should be zero: bold with a warning sign when it is not."""
    return f"**⚠ {count}**" if count else "0"


def calls_text(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


def _category_label(category: str) -> str:
    return CATEGORY_LABELS.get(category, category)


def md_text(text: str) -> str:
    """`text` as literal Markdown table-cell text: syntax characters as numeric character
    references, control characters (a newline would end the row) shown as U+FFFD."""
    text = "".join(ch if ch >= " " and ch != "\x7f" else "\ufffd" for ch in text)
    return _MARKDOWN_SYNTAX.sub(lambda m: f"&#{ord(m.group())};", text)
