# frontend/components.py — component factories: API data in, Dash html components out (no I/O).
"""Reusable pieces of the stacklens pages: header, notices and the data tables.

Every exact value is plain text in the DOM. Jobs-table cells carry a class naming their
column (e.g. `td.bytes`) for readers and browser tests alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from dash import dcc, html

from frontend import ids
from frontend.api import Job, Matrix
from frontend.formatting import format_bytes, format_utc_ns

# Rows shown in the matrix table; with more rank pairs only the heaviest are listed.
MAX_MATRIX_ROWS = 200
# Rows shown in the jobs table (newest first, plus the selected job if it is older).
MAX_JOB_ROWS = 20


def page_header(pages: Sequence[dict]) -> html.Header:
    """The top bar: product name and a link per registered page."""
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
                [dcc.Link(page["name"], href=page["relative_path"]) for page in pages],
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


def jobs_table(jobs: Sequence[Job], selected: str | None) -> list:
    """Header and body of the jobs table; each row is clickable and `selected` is highlighted.

    Only the newest `MAX_JOB_ROWS` jobs are listed (and `selected`, if older); a caption says so.
    """
    shown = list(jobs[:MAX_JOB_ROWS])
    shown += [job for job in jobs[MAX_JOB_ROWS:] if job.job == selected]
    caption = (
        [html.Caption(f"Newest {MAX_JOB_ROWS} of {len(jobs)} jobs.")]
        if len(jobs) > MAX_JOB_ROWS
        else []
    )
    head = html.Thead(
        html.Tr(
            [
                html.Th("Job"),
                html.Th("User"),
                html.Th("Command"),
                html.Th("Ranks seen / world", className="num"),
                html.Th("Status"),
                html.Th("Started (UTC)"),
                html.Th("Sent", className="num"),
                html.Th("Bytes sent", className="num"),
                html.Th("Messages sent", className="num"),
            ]
        )
    )
    rows = [
        html.Tr(
            id={"type": ids.JOB_ROW, "job": job.job},
            className="job-row selected" if job.job == selected else "job-row",
            title="Show this job's rank x rank traffic",
            **{"data-job": job.job},
            children=[
                html.Td(job.job, className="job mono"),
                html.Td(job.user, className="user"),
                html.Td(job.command, className="command mono", title=job.command),
                html.Td(f"{job.ranks_seen} / {job.world_size}", className="ranks num"),
                html.Td(html.Span(job.status, className=f"badge badge-{job.status}")),
                html.Td(format_utc_ns(job.started_ns), className="started"),
                html.Td(format_bytes(job.bytes_sent), className="sent num"),
                html.Td(str(job.bytes_sent), className="bytes num"),
                html.Td(str(job.messages_sent), className="messages num"),
            ],
        )
        for job in shown
    ]
    return [*caption, head, html.Tbody(rows)]


def matrix_table_markdown(matrix: Matrix) -> str:
    """The matrix table as GitHub-flavoured Markdown: a caption line, then one row per
    non-zero (src, dst) pair, heaviest first, at most `MAX_MATRIX_ROWS` rows.

    Columns: source rank, destination rank, bytes (exact), sent (human-readable), messages.
    Markdown because a dcc.Markdown table costs the browser one Dash component, where an
    html.Table costs one per cell, far too slow to re-render every second at a few hundred rows.
    """
    cells = sorted(matrix.cells, key=lambda c: (-c.bytes, c.src, c.dst))
    if not cells:
        caption = "No point-to-point traffic recorded yet."
    elif len(cells) > MAX_MATRIX_ROWS:
        caption = f"Heaviest {MAX_MATRIX_ROWS} of {len(cells)} rank pairs with traffic."
    else:
        caption = f"{len(cells)} rank pair{'s' if len(cells) != 1 else ''} with traffic."
    lines = [
        caption,
        "",
        "| Source rank | Destination rank | Bytes | Sent | Messages |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {c.src} | {c.dst} | {c.bytes} | {format_bytes(c.bytes)} | {c.messages} |"
        for c in cells[:MAX_MATRIX_ROWS]
    ]
    return "\n".join(lines)


def matrix_title(job: Job, matrix: Matrix) -> list:
    """Heading of the matrix section: which job, its size, status and total p2p bytes."""
    total = sum(c.bytes for c in matrix.cells)
    details = f"{matrix.world_size} ranks · {job.status} · {format_bytes(total)} point-to-point"
    return [
        "Point-to-point traffic of ",
        html.Span(matrix.job, className="mono"),
        " ",
        html.Span(details, className="subtle"),
    ]
