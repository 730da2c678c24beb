# server/reports/compare.py — the report of a run comparison (issue #28 point 4).
"""The comparison of run b with run a (or with the median of the earlier runs of b's
program) as a report (HTML or PDF, server/reports/render.py): the two runs and the finding
on the first page with where the elapsed time went per rank, then the call sites of either
run, the largest change of time first, the communicator families, the message sizes, the
files and each side's late rank. The figures are GET /api/compare's
(server/compare/service.py), read through the viewer's session like every report."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from presentation import figures
from presentation.card_reports import SECTION_ROWS, ranked
from presentation.formatting import (
    format_duration_ns,
    format_size_bucket,
    format_utc_ns,
    format_utc_window_ns,
)
from presentation.report_model import Figure, Progress, Report, Section, Table, no_progress
from server.compare import service
from stacklens.api_models import ComparedRun, Comparison, FamilyDifference, SiteDifference

#: What each figure of a comparison report is and how it was obtained.
EVIDENCE = [
    ["Time per operation and per file, per rank", "measured",
     "wall time inside every MPI and I/O call (PMPI/POSIX/stdio/MPI-IO hooks), summed over "
     "the run's intervals and divided by its ranks"],
    ["Computation", "derived", "the run's elapsed time minus its parts (never below 0)"],
    ["Call sites: time, calls, bytes", "measured",
     "the hooks' call-site tables summed over the ranks, as the run's Call sites card shows "
     "them; a site matched across the runs by its op and frames (file, line and function, "
     "else build-id and offset)"],
    ["Communicator families: time, calls, bytes", "measured",
     "each run's Communicator families card (the hooks' communicator descriptions and their "
     "collective and point-to-point tables), a family matched across the runs by its label"],
    ["Message sizes", "measured",
     "the hooks' message-size histograms (messages per op and log2 size bucket) summed over "
     "the ranks, as each run's Message sizes card shows them"],
    ["File I/O per file", "measured",
     "the hooks' I/O tables after MPI_Init (POSIX, stdio, MPI-IO) summed over the ranks and "
     "layers, as each run's File I/O card shows them"],
    ["The late rank", "derived",
     "each run's profile over its whole life: the rank with far more time outside MPI than "
     "the median rank, at the op where the others' time inside exceeds its own most"],
    ["A median side", "derived", "per part, site, family, size bucket and file, the median "
     "over the runs of the program's history (a run without it counts 0); its late rank "
     "that of the run with the median elapsed time"],
]  # fmt: skip


def side_name(side: ComparedRun, letter: str) -> str:
    """How a side is named: "a: job 42 run 2" (with the window compared when there is one:
    "a: job 42 run 2, 2023-11-14 22:16:40–22:16:45 UTC") or "a: median of 5 earlier
    runs"."""
    if side.job is None:
        return f"{letter}: median of {side.runs} earlier run{'s' * (side.runs != 1)}"
    window = format_utc_window_ns(side.from_ns, side.to_ns)
    return f"{letter}: job {side.job} run {side.run}" + (f", {window}" if window else "")


def _signed(ns: int) -> str:
    return ("+" if ns >= 0 else "−") + format_duration_ns(abs(ns))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f} %"


def site_finding(site: SiteDifference) -> str:
    """The call site whose time changed most, in words."""
    where = {"both": "", "a": " (in run a only)", "b": " (in run b only)"}[site.present]
    return (f"Largest change at a call site: {site.op} at {site.label}{where} "
            f"{_signed(site.delta_ns)} over the ranks ({format_duration_ns(site.a_ns)} → "
            f"{format_duration_ns(site.b_ns)}, {_pct(site.delta_pct)}; calls {site.a_calls:,} → "
            f"{site.b_calls:,}).")  # fmt: skip


def family_finding(family: FamilyDifference) -> str:
    """The communicator family whose time changed most, in words."""
    where = {"both": "", "a": " (in run a only)", "b": " (in run b only)"}[family.present]
    return (f"Largest change in a communicator family: {family.label}{where} "
            f"{_signed(family.delta_ns)} over the ranks ({format_duration_ns(family.a_ns)} → "
            f"{format_duration_ns(family.b_ns)}, {_pct(family.delta_pct)}; bytes "
            f"{family.a_bytes:,} → {family.b_bytes:,}).")  # fmt: skip


def sites_table(comparison: Comparison) -> Table:
    """The call sites of either run, the largest change of time first."""
    rows, note = ranked(
        [
            [
                s.label,
                s.op,
                {"both": "both", "a": "a only", "b": "b only"}[s.present],
                format_duration_ns(s.a_ns),
                format_duration_ns(s.b_ns),
                _signed(s.delta_ns),
                _pct(s.delta_pct),
                f"{s.a_calls:,}",
                f"{s.b_calls:,}",
                f"{s.a_bytes:,}",
                f"{s.b_bytes:,}",
            ]
            for s in comparison.sites
        ]  # fmt: skip
    )
    if comparison.sites_total > len(comparison.sites):
        note = (f"The {len(comparison.sites):,} of {comparison.sites_total:,} call sites whose "
                f"time changed most. {note}").strip()  # fmt: skip
    return Table(
        ["call site", "operation", "in", "time a", "time b", "change", "change %", "calls a",
         "calls b", "bytes a", "bytes b"],
        rows, [False, False, False, True, True, True, True, True, True, True, True],
        (note + " " if note else "") + "Times summed over the ranks; change: b − a.",
    )  # fmt: skip


def families_table(comparison: Comparison) -> Table:
    """The communicator families of either run, the largest change of time first."""
    rows, note = ranked(
        [
            [
                f.label,
                {"both": "both", "a": "a only", "b": "b only"}[f.present],
                format_duration_ns(f.a_ns),
                format_duration_ns(f.b_ns),
                _signed(f.delta_ns),
                _pct(f.delta_pct),
                f"{f.a_calls:,}",
                f"{f.b_calls:,}",
                f"{f.a_bytes:,}",
                f"{f.b_bytes:,}",
            ]
            for f in comparison.families
        ]  # fmt: skip
    )
    return Table(
        ["family", "in", "time a", "time b", "change", "change %", "calls a", "calls b",
         "bytes a", "bytes b"],
        rows, [False, False, True, True, True, True, True, True, True, True],
        (note + " " if note else "") + "Times summed over the ranks; change: b − a."
        if comparison.families else "Neither run describes a communicator family.",
    )  # fmt: skip


def sizes_table(comparison: Comparison) -> Table:
    """The message-size histograms of both runs, the op with the most messages first."""
    rows, note = ranked([
        [r.op, format_size_bucket(r.lower_bytes, r.upper_bytes), f"{r.a_messages:,}",
         f"{r.b_messages:,}", f"{r.delta:+,}"]
        for r in comparison.sizes
    ])  # fmt: skip
    return Table(
        ["operation", "message size", "messages a", "messages b", "change"], rows,
        [False, False, True, True, True],
        (note + " " if note else "") + "Messages summed over the ranks; change: b − a."
        if comparison.sizes else "Neither run sent a message.",
    )  # fmt: skip


def files_table(comparison: Comparison) -> Table:
    """The files of either run's I/O, the largest change of time first."""
    rows, note = ranked([
        [f.label, {"both": "both", "a": "a only", "b": "b only"}[f.present],
         format_duration_ns(f.a_ns), format_duration_ns(f.b_ns), _signed(f.delta_ns),
         f"{f.a_calls:,}", f"{f.b_calls:,}", f"{f.a_bytes:,}", f"{f.b_bytes:,}"]
        for f in comparison.files
    ])  # fmt: skip
    return Table(
        ["file", "in", "time a", "time b", "change", "reads + writes a", "reads + writes b",
         "bytes a", "bytes b"],
        rows, [False, False, True, True, True, True, True, True, True],
        (note + " " if note else "") + "Summed over the ranks and I/O layers; change: b − a."
        if comparison.files else "Neither run did file I/O after MPI_Init.",
    )  # fmt: skip


def late_table(comparison: Comparison) -> Table:
    """Each side's late rank, in words."""
    rows = []
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        late = side.late
        rows.append([side_name(side, letter), "none" if late is None else f"rank {late.rank}",
                     "—" if late is None else (late.host or "unknown"),
                     "no rank stands out" if late is None else late.text])  # fmt: skip
    moved = {None: "Either run has no late rank.", True: "The late rank moved.",
             False: "The late rank stayed."}[comparison.late_moved]  # fmt: skip
    return Table(["side", "late rank", "host", "in words"], rows,
                 [False, False, False, False], moved)  # fmt: skip


def compare_report(
    session: Session,
    b: service.Side,
    a: service.Side | None,
    around: service.Around,
    last: int = service.DEFAULT_HISTORY,
    progress: Progress = no_progress,
) -> Report:
    """The report of run `b` against run `a` (None: the median of the `last` runs of b's
    program before it)."""
    progress(0, 2, "comparing the runs")
    comparison = service.compare(session, b, a, last, SECTION_ROWS, around)
    progress(1, 2, "call sites")
    facts = [("Command", comparison.b.command)]
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        if side.exe_path is not None and (letter == "b" or side.exe_path != comparison.b.exe_path):
            facts.append((f"Executable of run {letter}", side.exe_path))
    facts.append(("World size", str(comparison.b.world_size)))
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        started = "" if side.started_ns is None else f", started {format_utc_ns(side.started_ns)}"
        facts.append((f"Run {letter}", f"{side_name(side, letter)[3:]}{started}, "
                      f"{format_duration_ns(side.elapsed_ns)} elapsed, on "
                      f"{', '.join(side.hosts[:8]) or 'no host'}"
                      f"{' …' if len(side.hosts) > 8 else ''}"))  # fmt: skip
    findings = [comparison.finding]
    if comparison.sites and comparison.sites[0].delta_ns:
        findings.append(site_finding(comparison.sites[0]))
    if comparison.families and comparison.families[0].delta_ns:
        findings.append(family_finding(comparison.families[0]))
    parts = Table(
        ["part", "a", "b", "change per rank", "share of the change"],
        [[d.name, format_duration_ns(d.a_ns), format_duration_ns(d.b_ns), _signed(d.delta_ns),
          "—" if d.share is None else f"{d.share:.0%}"] for d in comparison.differences],
        [False, True, True, True, True],
        "" if comparison.differences else "No part of the elapsed time differs.",
    )  # fmt: skip
    classes = Table(
        ["class", "a", "b", "change per rank", "share of the change"],
        [[c.name, format_duration_ns(c.a_ns), format_duration_ns(c.b_ns), _signed(c.delta_ns),
          "—" if c.share is None else f"{c.share:.0%}"] for c in comparison.classes],
        [False, True, True, True, True],
        "Per rank on average, per MPI traffic category, file I/O and computation.",
    )  # fmt: skip
    elapsed = Section(
        "Where the elapsed time went", "parts",
        "Per rank on average: each MPI operation, file I/O per file, computation; then per "
        "class of operation.",
        figures=[Figure(figures.compared_parts(comparison), "time per part, a beside b")],
        tables=[classes],
    )  # fmt: skip
    sites = Section(
        "Call sites", "sites",
        "The call sites of either run, the largest change of time first: the same site in "
        "both runs when its operation and frames are (file, line and function, else "
        "build-id and offset).",
        figures=[Figure(figures.compared_sites(comparison), "time per call site, a beside b")],
        tables=[sites_table(comparison)],
    )  # fmt: skip
    fams = Section(
        "Communicator families", "families",
        "The communicator families of either run (named as each run's Communicator families "
        "card names them), the largest change of time first.",
        figures=[Figure(figures.compared_families(comparison), "time per family, a beside b")],
        tables=[families_table(comparison)],
    )  # fmt: skip
    sizes = Section(
        "Message sizes", "sizes",
        "The message-size histograms of both runs side by side, per operation and size "
        "bucket.",
        figures=[Figure(figures.compared_sizes(comparison), "messages per size, a beside b")],
        tables=[sizes_table(comparison)],
    )  # fmt: skip
    files = Section("File I/O per file", "files",
                    "The files of either run's I/O after MPI_Init, the largest change of time "
                    "first.", tables=[files_table(comparison)])  # fmt: skip
    late = Section("The late rank", "late",
                   "The rank each run's profile names late first: it arrives last, the others "
                   "wait for it.", tables=[late_table(comparison)])  # fmt: skip
    name_b, name_a = side_name(comparison.b, "b")[3:], side_name(comparison.a, "a")[3:]
    progress(2, 2, "done")
    return Report(
        kind="comparison",
        title=f"Comparison: {name_b} against {name_a}",
        facts=facts,
        findings=findings,
        summary=[("Where the elapsed time went (per rank), largest change first", parts)],
        sections=[elapsed, sites, fams, sizes, files, late],
        evidence=Table(["figure", "basis", "how"], EVIDENCE),
        filename=_filename(comparison),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def _filename(comparison: Comparison) -> str:
    """stacklens-comparison-<job b>-run<n>-vs-<job a>-run<m> (or -vs-median), safe."""

    def run(side: ComparedRun) -> str:
        return "median" if side.job is None else f"{side.job}-run{side.run}"

    name = f"{run(comparison.b)}-vs-{run(comparison.a)}"
    return (
        "stacklens-comparison-"
        + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]
    )
