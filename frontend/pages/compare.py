# frontend/pages/compare.py — the "/compare" page: one run against another, or against the
# median of its program's earlier runs, and that program's history.
"""Compare page: run b (the run examined) against run a, or, without a, against the median
of the earlier runs of b's program (GET /api/compare): the finding in one sentence at the
top, where each side's elapsed time went per rank (each MPI operation, file I/O per file,
computation) as bars side by side, and the parts that differ, largest first, with their
share of the elapsed-time difference; then the call sites of either run, matched by
their line (else build-id and offset) and op, the largest change of time first. Below, the
program's runs (GET /api/compare/history): elapsed time over time and a table with the
shares of MPI and file I/O. The URL carries the runs and, when a job id names jobs of
several owners (an admin comparing users' runs), their owners, and a window of either run
(its intervals that ended in it, as GET /api/compare reads it):
/compare?b=<job>&b_run=<n>&b_owner=<user>&b_from=<t>&b_to=<t>&a=<job>&a_run=<n>&a_owner=<user>
&a_from=<t>&a_to=<t>&last=<runs>.
The API's owner filter decides what a viewer may compare. Report buttons download the
comparison as a report (HTML or PDF, GET /api/reports/compare)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import dash
import dash_mantine_components as dmc
import plotly.graph_objects as go
from dash import Input, Output, dcc, html

from frontend import api, components, ids
from frontend.api import ApiError, RunRef
from presentation import figures
from presentation.components import (
    SITE_DIFF_COLUMNS,
    chart,
    grid,
    site_difference_caption,
    site_difference_rows,
)
from presentation.formatting import (
    format_bytes,
    format_duration_ns,
    format_utc_ns,
    program_name,
)
from stacklens.api_models import ComparedRun, Comparison, RunHistory

dash.register_page(__name__, path="/compare", name="Compare", title="Compare — stacklens")

#: Runs of the program's history in the median and the trend, unless the URL says.
DEFAULT_LAST = 10


def layout(b: str = "", b_run: str = "", a: str = "", a_run: str = "", last: str = "",
           b_owner: str = "", a_owner: str = "", b_from: str = "", b_to: str = "",
           a_from: str = "", a_to: str = "", **_query: str) -> html.Div:  # fmt: skip
    """The form, prefilled from the URL (the owners and windows kept as they are); the
    callback fills the rest."""
    return html.Div(
        className="page",
        children=[
            html.Section(className="card", children=[
                html.Div(className="card-head", children=[
                    html.H2("Compare runs"),
                    components.report_buttons(ids.CMP_REPORT_PDF, ids.CMP_REPORT_HTML),
                    html.Span(id=ids.CMP_EXPORTS, className="report-buttons"),
                ]),
                dcc.Store(id=ids.CMP_OWNERS, data={"b": b_owner or None, "a": a_owner or None}),
                dcc.Store(id=ids.CMP_WINDOWS, data={"b": [b_from or None, b_to or None],
                                                    "a": [a_from or None, a_to or None]}),
                html.Div(className="filters", children=[
                    dmc.TextInput(id=ids.CMP_B, value=b, placeholder="job of run b",
                                  debounce=True, w=200, size="sm"),
                    _run_box(ids.CMP_B_RUN, b_run),
                    dmc.TextInput(id=ids.CMP_A, value=a, debounce=True, w=260, size="sm",
                                  placeholder="job of run a (empty: b's history)"),
                    _run_box(ids.CMP_A_RUN, a_run),
                    dmc.NumberInput(id=ids.CMP_LAST, value=_ordinal(last) or DEFAULT_LAST,
                                    min=1, max=50, allowDecimal=False, debounce=True, w=190,
                                    size="sm", placeholder="runs of the history",
                                    suffix=" runs of the history"),
                ]),
                html.Div(id=ids.CMP_ERROR, className="card-error", role="alert"),
                html.P(id=ids.CMP_NOTE, className="hint"),
                html.Div(id=ids.CMP_RESULT, hidden=True, children=[
                    html.P(id=ids.CMP_FINDING, className="finding"),
                    html.Div(id=ids.CMP_SIDES),
                    chart(ids.CMP_PARTS),
                    html.Div(id=ids.CMP_DIFFS),
                    html.Div(id=ids.CMP_CLASSES),
                    html.H3("Call sites"),
                    html.P(id=ids.CMP_SITES_CAPTION, className="hint"),
                    grid(ids.CMP_SITES, SITE_DIFF_COLUMNS, height_px=360),
                    html.H3("Communicator families"),
                    chart(ids.CMP_FAMILIES_FIG),
                    html.Div(id=ids.CMP_FAMILIES),
                    html.H3("Message sizes"),
                    chart(ids.CMP_SIZES_FIG),
                    html.H3("File I/O per file"),
                    html.Div(id=ids.CMP_FILES),
                    html.H3("The late rank"),
                    html.P(id=ids.CMP_LATE_MOVED),
                    html.Div(id=ids.CMP_LATE),
                    html.H3("Placement and the fabric around each run"),
                    html.Div(id=ids.CMP_CONTEXT),
                ]),
            ]),
            html.Section(id=ids.CMP_RUNS, className="card", hidden=True, children=[
                html.H2("The program's runs"),
                chart(ids.CMP_TREND),
                html.Div(id=ids.CMP_HISTORY),
            ]),
        ],
    )  # fmt: skip


def _run_box(box_id: str, ordinal: str) -> dmc.NumberInput:
    """A run-ordinal field (empty: the job's newest run), set from the URL's value."""
    return dmc.NumberInput(id=box_id, value=_ordinal(ordinal) or "", placeholder="run (newest)",
                           min=1, allowDecimal=False, debounce=True, w=130, size="sm")  # fmt: skip


def register_callbacks(dash_app: dash.Dash) -> None:
    """Attach this page's callbacks to `dash_app`."""

    @dash_app.callback(
        Output(ids.CMP_ERROR, "children"),
        Output(ids.CMP_FINDING, "children"),
        Output(ids.CMP_SIDES, "children"),
        Output(ids.CMP_PARTS, "figure"),
        Output(ids.CMP_DIFFS, "children"),
        Output(ids.CMP_SITES_CAPTION, "children"),
        Output(ids.CMP_SITES, "rowData"),
        Output(ids.CMP_TREND, "figure"),
        Output(ids.CMP_HISTORY, "children"),
        Output(ids.CMP_FAMILIES_FIG, "figure"),
        Output(ids.CMP_FAMILIES, "children"),
        Output(ids.CMP_CONTEXT, "children"),
        Output(ids.CMP_REPORT_PDF, "href"),
        Output(ids.CMP_REPORT_HTML, "href"),
        Output(ids.CMP_EXPORTS, "children"),
        Output(ids.CMP_SIZES_FIG, "figure"),
        Output(ids.CMP_FILES, "children"),
        Output(ids.CMP_LATE, "children"),
        Output(ids.CMP_LATE_MOVED, "children"),
        Output(ids.CMP_CLASSES, "children"),
        Output(ids.CMP_RESULT, "hidden"),
        Output(ids.CMP_RUNS, "hidden"),
        Output(ids.CMP_NOTE, "children"),
        Input(ids.CMP_B, "value"),
        Input(ids.CMP_B_RUN, "value"),
        Input(ids.CMP_A, "value"),
        Input(ids.CMP_A_RUN, "value"),
        Input(ids.CMP_LAST, "value"),
        Input(ids.CMP_OWNERS, "data"),
        Input(ids.CMP_WINDOWS, "data"),
    )
    def show(b: str | None, b_run: Any, a: str | None, a_run: Any, last: Any,
             owners: dict[str, str | None] | None,
             windows: dict[str, list[str | None]] | None) -> tuple[Any, ...]:  # fmt: skip
        no_families: tuple[Any, ...] = ("", "", "", "", [], sizes_figure(None), "", "", "", "")
        empty: tuple[Any, ...] = ("", "", parts_figure(None), "", "", [], trend_figure(None), "",
                                  families_figure(None), *no_families)  # fmt: skip
        if not (b or "").strip():
            hint = "Name run b (a job id) to compare it with run a or with its history."
            return ("", *empty, True, True, hint)
        a = (a or "").strip()
        owners, windows = owners or {}, windows or {}
        run_b = RunRef((b or "").strip(), _ordinal(b_run), owners.get("b"),
                       *(windows.get("b") or (None, None)))  # fmt: skip
        run_a = (RunRef(a, _ordinal(a_run), owners.get("a"), *(windows.get("a") or (None, None)))
                 if a else None)  # fmt: skip
        runs = _ordinal(last) or DEFAULT_LAST
        client = api.current_client()
        try:
            history = client.run_history(run_b, runs)
        except ApiError as exc:
            return (str(exc), *empty, True, True, "")
        trend, table = trend_figure(history), components.history_table(history)
        nothing: tuple[Any, ...] = ("", "", parts_figure(None), "", "", [], trend, table,
                                    families_figure(None), *no_families, True, False)  # fmt: skip
        if run_a is None and len(history.runs) == 1:  # a first run: no history to compare with
            this = history.runs[0]
            return ("", *nothing, f"{this.job} run {this.run} is the first run of its program "
                    "that you may read: nothing earlier to compare it with. Name run a to "
                    "compare it with another run.")  # fmt: skip
        try:
            comparison = client.compare(run_b, run_a, runs)
        except ApiError as exc:  # e.g. no earlier run of its build: the history still shows
            return (str(exc), *nothing, "")
        pdf, page = (report_href(run_b, run_a, runs, fmt) for fmt in ("pdf", "html"))
        return ("", comparison.finding, sides_table(comparison),
                parts_figure(comparison), differences_table(comparison),
                site_difference_caption(comparison), site_difference_rows(comparison), trend,
                table, families_figure(comparison), families_table(comparison),
                context_table(comparison), pdf, page,
                export_links(run_b, run_a, runs), sizes_figure(comparison),
                files_table(comparison), late_table(comparison),
                late_moved(comparison), classes_table(comparison), False, False, "")  # fmt: skip


def _ordinal(value: Any) -> int | None:
    """A positive whole number typed in a field, or None."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 1 else None


def side_label(side: ComparedRun, letter: str) -> str:
    """How a side is named in the legend and tables (presentation.figures.compared_side)."""
    return figures.compared_side(side, letter)


def report_href(b: RunRef, a: RunRef | None, last: int, fmt: str) -> str:
    """The comparison's report (html or pdf) of the runs shown, owners included."""
    params: dict[str, object] = {**b.query("b"), **({} if a is None else a.query("a"))}
    if a is None:
        params["last"] = last
    return components.report_href("compare", params, fmt)


#: The comparison's tables offered as CSV files (the API's `table`) and their link texts.
CSV_TABLES = (("sites", "call sites"), ("families", "families"), ("differences", "parts"),
              ("classes", "classes"), ("sizes", "message sizes"), ("files", "files"),
              ("context", "late rank and fabric"))  # fmt: skip


def export_links(b: RunRef, a: RunRef | None, last: int) -> list[html.A]:
    """Download links of the comparison shown (GET /api/compare as the viewer): all of it
    as JSON, and each of its tables as a CSV file."""
    params: dict[str, object] = {**b.query("b"), **({} if a is None else a.query("a"))}
    if a is None:
        params["last"] = last
    given = {k: v for k, v in params.items() if v not in (None, "")}
    links = [html.A("⤓ JSON", href=f"/api/compare?{urlencode(given)}", download="compare.json",
                    className="button")]  # fmt: skip
    for table, text in CSV_TABLES:
        query = urlencode({**given, "format": "csv", "table": table})
        links.append(html.A(f"⤓ CSV: {text}", href=f"/api/compare?{query}", download="",
                            className="button"))  # fmt: skip
    return links


def parts_figure(comparison: Comparison | None) -> go.Figure:
    """Where each side's elapsed time went, per rank on average: a bar per part, a and b
    side by side, the largest parts (in either) first (empty axes before a comparison)."""
    if comparison is None:
        fig = go.Figure()
        fig.update_layout(title="Where the elapsed time went (per rank)",
                          xaxis_title="part of the run", yaxis_title="seconds per rank",
                          margin={"t": 50, "b": 40})  # fmt: skip
        return fig
    return figures.compared_parts(comparison)


def sizes_figure(comparison: Comparison | None) -> go.Figure:
    """Messages per operation and size bucket, a beside b (empty axes before a
    comparison)."""
    if comparison is None:
        fig = go.Figure()
        fig.update_layout(title="Messages per size (summed over the ranks)",
                          xaxis_title="operation and message size", yaxis_title="messages",
                          margin={"t": 50, "b": 40})  # fmt: skip
        return fig
    return figures.compared_sizes(comparison)


def families_figure(comparison: Comparison | None) -> go.Figure:
    """Time per communicator family, a beside b (empty axes before a comparison)."""
    if comparison is None:
        fig = go.Figure()
        fig.update_layout(title="Time per communicator family (summed over the ranks)",
                          xaxis_title="communicator family", yaxis_title="seconds (all ranks)",
                          margin={"t": 50, "b": 40})  # fmt: skip
        return fig
    return figures.compared_families(comparison)


def trend_figure(history: RunHistory | None) -> go.Figure:
    """Elapsed time of the program's runs over their start time (UTC), a line per build
    (empty axes before a history)."""
    if history is None or not history.runs:
        fig = go.Figure()
        fig.update_layout(title="Elapsed time of the program's runs",
                          xaxis_title="run start (UTC)", yaxis_title="elapsed seconds",
                          showlegend=True, margin={"t": 50, "b": 40})  # fmt: skip
        return fig
    return figures.history_trend(history)


def table(head: list[str], rows: list[list[str]]) -> html.Table:
    """A small table of text cells (Dash escapes them: names are shown as they are)."""
    return html.Table(className="data", children=[
        html.Thead(html.Tr([html.Th(h) for h in head])),
        html.Tbody([html.Tr([html.Td(c) for c in row]) for row in rows]),
    ])  # fmt: skip


def sides_table(comparison: Comparison) -> html.Table:
    """The two sides: what each is, its program (executable and arguments), when it
    started, elapsed time, hosts."""
    rows = []
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        started = "—" if side.started_ns is None else format_utc_ns(side.started_ns)
        hosts = ", ".join(side.hosts[:5]) + (" …" if len(side.hosts) > 5 else "")
        rows.append([side_label(side, letter), program_name(side.command, side.exe_path),
                     started, format_duration_ns(side.elapsed_ns), hosts])  # fmt: skip
    return table(["side", "program", "started", "elapsed", "hosts"], rows)


def differences_table(comparison: Comparison) -> html.Table | str:
    """The parts that differ, largest change first."""
    if not comparison.differences:
        return "No part of the elapsed time differs."
    rows = []
    for d in comparison.differences:
        sign = "+" if d.delta_ns >= 0 else "−"
        rows.append([d.name, format_duration_ns(d.a_ns), format_duration_ns(d.b_ns),
                     f"{sign}{format_duration_ns(abs(d.delta_ns))}",
                     "—" if d.share is None else f"{d.share:.0%}"])  # fmt: skip
    return table(["part", "a", "b", "change per rank", "share of the change"], rows)


def classes_table(comparison: Comparison) -> html.Table:
    """The time per class of the elapsed time (MPI traffic category, file I/O,
    computation) on both sides, largest change first."""
    rows = []
    for c in comparison.classes:
        sign = "+" if c.delta_ns >= 0 else "−"
        rows.append([c.name, format_duration_ns(c.a_ns), format_duration_ns(c.b_ns),
                     f"{sign}{format_duration_ns(abs(c.delta_ns))}",
                     "—" if c.share is None else f"{c.share:.0%}"])  # fmt: skip
    return table(["class", "a", "b", "change per rank", "share of the change"], rows)


def families_table(comparison: Comparison) -> html.Table | str:
    """The communicator families of either run, largest change first."""
    if not comparison.families:
        return "Neither run describes a communicator family."
    where = {"both": "both", "a": "a only", "b": "b only"}
    rows = []
    for f in comparison.families:
        sign = "+" if f.delta_ns >= 0 else "−"
        rows.append([f.label, where[f.present], format_duration_ns(f.a_ns),
                     format_duration_ns(f.b_ns), f"{sign}{format_duration_ns(abs(f.delta_ns))}",
                     f"{f.a_calls:,}", f"{f.b_calls:,}", format_bytes(f.a_bytes),
                     format_bytes(f.b_bytes)])  # fmt: skip
    return table(["family", "in", "time a", "time b", "change", "calls a", "calls b",
                  "bytes a", "bytes b"], rows)  # fmt: skip


def files_table(comparison: Comparison) -> html.Table | str:
    """The files of either run's I/O, largest change of time first."""
    if not comparison.files:
        return "Neither run did file I/O after MPI_Init."
    where = {"both": "both", "a": "a only", "b": "b only"}
    rows = []
    for f in comparison.files:
        sign = "+" if f.delta_ns >= 0 else "−"
        rows.append([f.label, where[f.present], format_duration_ns(f.a_ns),
                     format_duration_ns(f.b_ns), f"{sign}{format_duration_ns(abs(f.delta_ns))}",
                     f"{f.a_calls:,}", f"{f.b_calls:,}", format_bytes(f.a_bytes),
                     format_bytes(f.b_bytes)])  # fmt: skip
    return table(["file", "in", "time a", "time b", "change", "reads + writes a",
                  "reads + writes b", "bytes a", "bytes b"], rows)  # fmt: skip


def late_table(comparison: Comparison) -> html.Table:
    """Each side's late rank: which, on which host, where it arrives last, by how much."""
    rows = []
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        late = side.late
        if late is None:
            rows.append([side_label(side, letter), "none", "—", "—", "—", "no rank stands out"])
            continue
        where = (late.op or "—") + (f" at {late.site}" if late.site else "")
        rows.append([side_label(side, letter), f"rank {late.rank}", late.host or "unknown",
                     where, format_duration_ns(late.excess_ns), late.text])  # fmt: skip
    return table(["side", "late rank", "host", "arrives last at", "its excess", "in words"],
                 rows)  # fmt: skip


def late_moved(comparison: Comparison) -> str:
    """Whether the late rank moved between the runs, in one sentence."""
    a, b = comparison.a.late, comparison.b.late
    if a is None or b is None:
        return ("No rank is late in " + ("either run." if a is None and b is None else
                                          f"run {'a' if a is None else 'b'}."))  # fmt: skip
    if comparison.late_moved:
        return f"The late rank moved: rank {a.rank} in run a, rank {b.rank} in run b."
    return f"The late rank stayed: rank {a.rank} in both runs."


def context_table(comparison: Comparison) -> html.Table | str:
    """Each side's placement, the load of the links it used and the incidents during it."""
    rows = []
    for side, letter in ((comparison.a, "a"), (comparison.b, "b")):
        c = side.context
        if c is None:
            rows.append([side_label(side, letter), *["—"] * 7])
            continue
        rows.append([
            side_label(side, letter),
            f"{c.hosts} ({c.placed_hosts} placed)",
            f"{len(c.leaves)}: {', '.join(c.leaves[:4])}{' …' if len(c.leaves) > 4 else ''}"
            if c.leaves else "0",
            f"{c.links} ({c.crossed_links} between switches)",
            "unknown" if c.link_bytes is None else format_bytes(c.link_bytes),
            "unknown" if c.xmit_wait is None else f"{c.xmit_wait:,}",
            f"{format_bytes(int(c.other_job_bytes))} ({c.other_jobs} job"
            f"{'s' * (c.other_jobs != 1)})",
            f"{len(c.incidents)}",
        ])  # fmt: skip
    return table(["side", "hosts", "leaves", "links", "bytes on them", "PortXmitWait",
                  "other jobs on its links", "incidents"], rows)  # fmt: skip
