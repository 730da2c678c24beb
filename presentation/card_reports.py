# presentation/card_reports.py — each job card's part of a report: its tables and figures (pure).
"""What a report shows of each job card (presentation/cards.py): an introduction, figures
and tables built from the card's API model alone, as plain report data
(presentation/report_model.py); server/reports/build.py puts them in the job report's
sections."""

from __future__ import annotations

from collections.abc import Iterable

from presentation import figures as page_figures
from presentation import report_figures
from presentation.components import callsite_path, family_headings, family_rows
from presentation.formatting import (
    communicator_label,
    counted_apart,
    format_bytes,
    format_duration_ns,
    format_utc_ns,
)
from presentation.report_model import Figure, Table
from stacklens.api_models import (
    JobCallsites,
    JobCollectives,
    JobFamilies,
    JobIo,
    JobOps,
    JobRanks,
    JobRma,
    JobRuns,
    JobSizes,
    Matrix,
    RunSummary,
)
from stacklens.constants import CATEGORY_LABELS

#: Rows of a section's table at most (a report stays readable; the API has the rest).
SECTION_ROWS = 200

#: A card's part of a report: its introduction, figures and tables.
ReportPart = tuple[str, list[Figure], list[Table]]


def ranked(rows: Iterable[list[str]], limit: int = SECTION_ROWS) -> tuple[list[list[str]], str]:
    """At most `limit` of the rows, and a note saying so when some were left out."""
    chosen = list(rows)
    if len(chosen) > limit:
        return chosen[:limit], f"The first {limit} of {len(chosen)} rows."
    return chosen, ""


def matrix_report(matrix: Matrix) -> ReportPart:
    """The rank x rank heat map and the pairs, most bytes first."""
    pairs = sorted(matrix.cells, key=lambda c: -c.bytes)
    rows, note = ranked(
        [str(c.src), str(c.dst), format_bytes(c.bytes), f"{c.messages:,}"] for c in pairs
    )
    if matrix.page.next_cursor is not None:
        note = (
            f"The {len(matrix.cells)} pairs read of {matrix.page.total}; "
            "the matrix above sums all of them."
        )
    return (
        "Point-to-point bytes sent per (source, destination) pair.",
        [Figure(page_figures.matrix_heatmap(matrix), "bytes sent per pair", 560)],
        [Table(["source", "destination", "bytes", "messages"], rows, [True] * 4, note)],
    )


def ops_report(ops: JobOps) -> ReportPart:
    """Time inside per MPI operation, and the operations heaviest first."""
    rows, note = ranked(
        [o.op, CATEGORY_LABELS.get(o.category, o.category), f"{o.calls:,}",
         format_bytes(o.bytes), format_duration_ns(o.time_ns), str(o.ranks)]
        for o in ops.ops
    )  # fmt: skip
    return (
        "",
        [Figure(report_figures.op_times(ops.ops), "time inside per MPI operation")],
        [
            Table(
                ["operation", "category", "calls", "bytes", "time inside", "ranks"],
                rows,
                [False, False, True, True, True, True],
                note,
            )
        ],
    )


def collectives_report(coll: JobCollectives) -> ReportPart:
    """Time inside per collective, and the communicators heaviest first."""
    rows = [
        [communicator_label(c.comm_id, c.overflow), str(c.comm_size), str(c.ranks),
         f"{c.calls:,}", format_bytes(c.bytes), format_duration_ns(c.time_ns)]
        for c in coll.communicators
    ]  # fmt: skip
    return (
        "",
        [Figure(report_figures.collective_times(coll.collectives), "time inside per collective")],
        [
            Table(
                ["communicator", "size", "ranks", "calls", "bytes", "time inside"],
                rows,
                [False, True, True, True, True, True],
            )
        ],
    )


def sizes_report(sizes: JobSizes) -> ReportPart:
    """The message-size histogram and its buckets per operation."""
    rows = [
        [s.op, f"{s.messages:,}", ", ".join(
            f"{format_bytes(b.lower_bytes)}–{format_bytes(b.upper_bytes)}: {b.count:,}"
            for b in s.buckets)]
        for s in sizes.ops
    ]  # fmt: skip
    return (
        "",
        [Figure(page_figures.size_histogram(sizes), "messages per size bucket", 360)],
        [Table(["operation", "messages", "buckets"], rows, [False, True, False])],
    )


def rma_report(rma: JobRma) -> ReportPart:
    """One-sided calls and bytes per operation and per (origin, target) pair."""
    op_rows = [[o.op, f"{o.calls:,}", format_bytes(o.bytes)] for o in rma.ops]
    pair_rows, note = ranked(
        [str(c.origin), str(c.target), f"{c.calls:,}", format_bytes(c.bytes)]
        for c in sorted(rma.cells, key=lambda c: -c.bytes)
    )
    if rma.page.next_cursor is not None:
        note = f"The {len(rma.cells)} pairs read of {rma.page.total}."
    intro = "" if rma.ops else "No one-sided (RMA) calls in this window."
    return (
        intro,
        [],
        [
            Table(["operation", "calls", "bytes"], op_rows, [False, True, True]),
            Table(["origin", "target", "calls", "bytes"], pair_rows, [True] * 4, note),
        ],
    )


def io_report(io: JobIo) -> ReportPart:
    """Bytes per file and the files, most bytes first; the start-up I/O in a sentence."""
    rows, note = ranked(
        [f.layer, f.path, f.mount, f.fstype, str(f.ranks), f"{f.reads:,}", f"{f.writes:,}",
         format_bytes(f.bytes_read), format_bytes(f.bytes_written),
         format_duration_ns(f.read_time_ns + f.write_time_ns + f.meta_time_ns)]
        for f in io.files
    )  # fmt: skip
    if io.page.next_cursor is not None:
        note = f"The first {len(io.files)} of {io.page.total} (layer, file) rows."
    headings = ["layer", "path", "mount", "fs", "ranks", "reads", "writes", "read", "written",
                "time"]  # fmt: skip
    return (
        f"Start-up I/O (before MPI_Init): {io.startup.files} files, "
        f"{format_bytes(io.startup.bytes_read)} read, "
        f"{format_bytes(io.startup.bytes_written)} written.",
        [Figure(report_figures.file_bytes(io.files), "bytes per file")],
        [Table(headings, rows, [False] * 4 + [True] * 6, note)],
    )


def callsites_report(sites: JobCallsites) -> ReportPart:
    """The call sites, heaviest time first, as the page's grid shows them."""
    rows, note = ranked(
        [s.label, s.op, format_duration_ns(s.time_ns), f"{100 * s.share:.1f} %",
         f"{s.calls:,}", format_bytes(s.bytes), format_bytes(s.mean_bytes),
         str(s.most_time_rank), f"{s.imbalance:.2f}",
         s.frames[0].quality if s.frames else "", callsite_path(s)]
        for s in sites.sites
    )  # fmt: skip
    if sites.page.next_cursor is not None:
        note = f"The first {len(sites.sites)} of {sites.page.total} call sites."
    headings = ["site", "op", "time", "share", "calls", "bytes", "mean size", "most time (rank)",
                "imbalance", "resolved as", "path"]  # fmt: skip
    intro = (f"{format_duration_ns(sites.mpi_time_ns)} inside MPI and "
             f"{format_duration_ns(sites.io_time_ns)} in file I/O at "
             f"{sites.page.total} call sites.")  # fmt: skip
    return intro, [], [Table(headings, rows, [False] * 2 + [True] * 7 + [False] * 2, note)]


def families_report(families: JobFamilies) -> ReportPart:
    """Where each family's traffic goes (the page's figure) and the families table."""
    rows, note = ranked(family_rows(families))
    if families.page.next_cursor is not None:
        note = f"The first {len(families.families)} of {families.page.total} families."
    headings = family_headings(families)
    intro = (
        "Communicator families: the communicators one creating call made (a split, a "
        "Cart_sub, a dup) or of one MPI_Comm_set_name name, named by that name or by how and "
        "where they were made. Bytes by reach: point-to-point bytes routed over the hosts' "
        "placement and the forwarding tables, collective bytes modelled from the algorithm."
        if families.families
        else "No communicator families recorded for this job."
    )
    return (
        intro,
        [Figure(page_figures.family_reach(families), "bytes per family by reach", 420)],
        [
            Table(headings, rows, [False, True, True, False] + [True] * (len(headings) - 4), note)
        ],  # fmt: skip
    )


def ranks_report(ranks: JobRanks) -> ReportPart:
    """The ranks (and non-MPI processes: "process N") that reported, with their health
    counters."""
    rows = [
        [f"process {r.rank}" if r.kind == "processes" else str(r.rank), r.host, str(r.pid),
         r.status, f"{r.keys_dropped:,}", f"{r.frames_dropped:,}"]
        for r in ranks.ranks[:SECTION_ROWS]
    ]  # fmt: skip
    total = ranks.page.total
    note = " and ".join(counted_apart(ranks.ranks_reported, ranks.processes_reported)) + (
        f"; the first {SECTION_ROWS} listed." if total > SECTION_ROWS else "."
    )
    return (
        "",
        [],
        [
            Table(
                ["rank", "host", "pid", "status", "keys folded", "frames lost"],
                rows,
                [True, False, True, False, True, True],
                note,
            )
        ],
    )


def runs_report(runs: JobRuns) -> ReportPart:
    """The runs (launches) of the job seen in the window; for each launch that did not end
    well, the launcher's last lines."""
    tables = [Table(RUN_HEADINGS, run_rows(runs), [True, False, True, False, False, False, False])]
    for run, lines in launch_outputs(runs):
        tables.append(Table([f"Run {run}: the launcher's last lines"], [[line] for line in lines]))
    return ("", [], tables)


#: The columns of the runs table (page and report).
RUN_HEADINGS = ["run", "kind", "ranks", "status", "launch ended", "started", "command"]

#: Lines of a launcher's output shown at most (the API keeps up to 4 KiB of them).
OUTPUT_LINES = 25


def run_rows(runs: JobRuns) -> list[list[str]]:
    """One row per run: ordinal, kind, ranks seen of its size, status, how its launch ended,
    start, command."""
    return [
        [str(r.run), r.kind, f"{r.ranks_seen} / {r.world_size}", r.status, launch_ending(r),
         format_utc_ns(r.started_ns), r.command]
        for r in runs.runs
    ]  # fmt: skip


def launch_ending(run: RunSummary) -> str:
    """How a run's launch by `stacklens run` ended: "exit 0", "exit 255", "SIGKILL",
    "exit 143 after SIGTERM (forwarded)"; "" without a launch record."""
    if run.exit_signal is not None:
        ended = run.exit_signal
    elif run.exit_code is not None:
        ended = f"exit {run.exit_code}"
    else:
        return ""
    if run.forwarded_signal is not None:
        ended += f" after {run.forwarded_signal} (forwarded)"
    return ended


def launch_outputs(runs: JobRuns) -> list[tuple[int, list[str]]]:
    """(ordinal, the launcher's last lines, at most OUTPUT_LINES) of every run whose launch
    ended with a signal or a non-zero exit status and printed something."""
    found = []
    for r in runs.runs:
        failed = r.exit_signal is not None or (r.exit_code or 0) != 0
        lines = [line for line in (r.launch_output or "").splitlines() if line.strip()]
        if failed and lines:
            found.append((r.run, lines[-OUTPUT_LINES:]))
    return found
