# frontend/components.py — component factories: API data in, Dash html components out (no I/O).
"""Reusable pieces of the stacklens pages: header, notices, the grids (long lists: jobs,
rank pairs, files) and the Markdown tables (short ones).

Every exact value is plain text in the DOM. Grid cells carry their column's field as
`col-id` (e.g. `[col-id=bytes]`) for readers and browser tests alike; the grid shows text
as text. Text from the job (paths, mounts) is escaped before it goes into a Markdown table.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

import dash_mantine_components as dmc
from dash import dcc, html

from frontend import cyto_style, ids
from presentation.cards import card_id
from presentation.components import (
    md_text,
    number_column,
    table_markdown,
    text_column,
)
from presentation.formatting import (
    format_age,
    format_bytes,
    format_duration_ns,
    format_rate,
    format_utc_ns,
    rank_ranges,
    ranks_and_processes,
)
from stacklens.api_models import (
    Deployment,
    FabricEvent,
    FabricState,
    Freshness,
    HistoryRun,
    IncidentCallsite,
    IncidentDetails,
    IncidentLink,
    IncidentList,
    IncidentSummary,
    JobDetails,
    JobLinks,
    JobList,
    JobPlacement,
    LinkAttribution,
    LinkEnd,
    LinkGroupPage,
    LinkLoad,
    LinkPage,
    NodeJobs,
    Outlier,
    RunHistory,
    SlowRanks,
)
from stacklens.constants import ERROR_COUNTERS
from stacklens.modes import modes_text, senders_text

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


#: The pages' font (the Mantine theme's and the stylesheet's).
FONT = 'Inter, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


def page_header(pages: Sequence[dict], time_control: Any) -> html.Header:
    """The top bar: product name, a link per registered page (not to the pages of one
    thing, like a job's: they are reached by their links) and the time-range control shared
    by every page (frontend/timerange.py)."""
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
                    # the time range goes along (frontend/timerange.py sets the hrefs)
                    dcc.Link(
                        page["name"],
                        href=page["relative_path"],
                        id={"type": ids.NAV_LINK, "path": page["relative_path"]},
                    )
                    for page in pages
                    if not page.get("path_template")
                ],
                className="nav",
            ),
            time_control,
        ],
    )


def notice(children: str | list, kind: str) -> html.Div:
    """A banner; `kind` is "info" or "error"."""
    return html.Div(children, className=f"notice notice-{kind}")


#: The heading of an error state by the HTTP status of the API's answer (None: no answer).
ERROR_TITLES = {
    None: "The stacklens server cannot be reached",
    400: "This view's parameters are not valid",
    403: "You may not see this",
    404: "Not found",
    409: "Several match: say which one",
    422: "This view's parameters are not valid",
}


def error_state(error: Exception | str, title: str | None = None) -> dmc.Alert:
    """A page or card that cannot be shown, said plainly instead of empty charts: a heading
    (`title`, else by the API's status: ERROR_TITLES) and what the server said."""
    status = getattr(error, "status", None)
    detail = getattr(error, "detail", None) or str(error)
    heading = title or ERROR_TITLES.get(status, "The stacklens server failed to answer")
    return dmc.Alert(detail, title=heading, color="red", variant="light",
                     className="error-state")  # fmt: skip


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


def pager_button(text: str, button_id: str) -> dmc.Button:
    """One of a list's page buttons (newer / older): disabled until the list's answer says
    there is such a page; its `n_clicks` turns the page."""
    return dmc.Button(text, id=button_id, disabled=True, size="xs", variant="default")


def playback_slider(slider_id: str, at_s: float | None) -> dmc.Slider:
    """A playback slider over a window's steps: its value is a step's start in epoch
    seconds (None: no step, the whole window), its min/max/step set by the page's callback
    once the window is known; the thumb's label says the step's start in UTC
    (`utcSeconds` in assets/stacklens.js), never the raw number, and has room above the
    track and at both ends so that it is never cut. It reports a position when the thumb
    is let go."""
    return dmc.Slider(id=slider_id, min=0, max=1, step=1, value=at_s, updatemode="mouseup",
                      label={"function": "utcSeconds"}, thumbLabel="playback step (UTC)",
                      size="sm", mt="xl", mb="xs", mx=SLIDER_LABEL_ROOM_PX)  # fmt: skip


#: Room (px) kept beside a playback slider's track: half its thumb label's width (a UTC
#: time, about 150 px in the label's font), so the label at either end stays on the card.
SLIDER_LABEL_ROOM_PX = 84


def card_head(title: str, updated_id: str) -> html.Div:
    """A page's first card heading: the title and the time of the last refresh."""
    return html.Div(
        className="card-head",
        children=[html.H2(title), html.Span(id=updated_id, className="subtle")],
    )


JOB_COLUMNS = [
    text_column("job", "Job", cellClass="mono"),
    text_column("user", "User"),
    text_column("command", "Command", cellClass="mono", tooltipField="command"),
    text_column("ranks", "Ranks seen / world", type="rightAligned"),
    text_column("status", "Status"),
    text_column("started", "Started (UTC)"),
    # sorted by the exact bytes, shown in binary units, the exact count on hover
    number_column(
        "bytes", "Sent", valueFormatter={"function": "params.data.sent"}, tooltipField="bytes_exact"
    ),
    number_column("messages", "Messages sent"),
]


def job_rows(jobs: JobList) -> list[dict[str, Any]]:
    """The jobs grid's rows: a page of the job list, newest first (row id = the path of the
    job's page, qualified by its owner: unique even where two owners used one job id); its
    MPI ranks as seen of the world, its other processes apart ("2 / 2 · 1 process")."""
    return [
        {
            "id": job_path(job.job, job.user),
            "job": job.job,
            "user": job.user,
            "command": job.command,
            "ranks": " · ".join(ranks_and_processes(job.runs, of_world=True)),
            "status": job.status,
            "started": format_utc_ns(job.started_ns),
            "sent": format_bytes(job.bytes_sent),
            "bytes": job.bytes_sent,
            "bytes_exact": f"{job.bytes_sent:,} bytes",
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


def shown_title(shown: JobDetails, owner: str | None = None) -> list:
    """Heading of the shown job's cards: which job (a link to its own page, where any
    window of it can be chosen; `owner` qualifies it), its size and total point-to-point
    bytes (while its matrix could be read)."""
    matrix = shown.matrix
    details = "" if matrix is None else (
        f"{matrix.world_size} ranks · {format_bytes(sum(b.bytes for b in matrix.blocks))} "
        "point-to-point")  # fmt: skip
    return [
        "Job ",
        dcc.Link(shown.job, href=job_path(shown.job, owner), className="mono job-link"),
        " ",
        html.Span(details, className="subtle"),
    ]


def job_path(job: str, owner: str | None = None) -> str:
    """The path of a job's own page (the key quoted: it may hold a slash), qualified by its
    owner (`?owner=`, the job list's `user`) when one is given: the id alone names one job
    only while no two owners used it (docs/access.md, "Job URLs")."""
    path = f"/jobs/{quote(job, safe='')}"
    return f"{path}?owner={quote(owner, safe='')}" if owner else path


def compare_href(history: RunHistory, earlier: int = 1) -> str | None:
    """The Compare page's URL setting the history's run (b) against its run `earlier`
    (a: 1, the run of the same program before it), each job qualified by its owner (an id
    alone names one job only while no two owners used it: docs/access.md, "Job URLs");
    None when there is none."""
    if len(history.runs) <= earlier:
        return None
    b, a = history.runs[0], history.runs[earlier]
    return "/compare?" + urlencode({"b": b.job, "b_run": b.run, "b_owner": b.owner,
                                    "a": a.job, "a_run": a.run, "a_owner": a.owner})  # fmt: skip


def _build_cell(run: HistoryRun) -> str:
    """A history run's build in a table: its build-id's first 12 hex digits (or
    "unknown"), "rebuilt" when it is the first run of a new build, "another build" when it
    is not of the history's run's build."""
    text = "unknown" if run.build_id is None else run.build_id[:12]
    notes = (["rebuilt"] if run.rebuilt else []) + ([] if run.same_build else ["another build"])
    return text + "".join(f" · {note}" for note in notes)


def history_table(history: RunHistory, *, earlier_only: bool = False) -> html.Table:
    """A program's runs, newest first: run, owner, start (UTC), elapsed, shares of MPI and
    file I/O, build, status. `earlier_only`: the runs before the history's run alone, each
    named by a link to the Compare page setting the history's run against it."""
    rows = []
    for i, r in enumerate(history.runs):
        if earlier_only and i == 0:
            continue
        name = f"{r.job} run {r.run}"
        href = compare_href(history, i) if earlier_only else None
        rows.append([
            dcc.Link(name, href=href) if href else name, r.owner, format_utc_ns(r.started_ns),
            format_duration_ns(r.elapsed_ns), f"{r.mpi_share:.0%}", f"{r.io_share:.0%}",
            _build_cell(r), r.status,
        ])  # fmt: skip
    head = ["run", "owner", "started", "elapsed", "MPI", "file I/O", "build", "status"]
    return html.Table(className="data", children=[
        html.Thead(html.Tr([html.Th(h) for h in head])),
        html.Tbody([html.Tr([html.Td(c) for c in row]) for row in rows]),
    ])  # fmt: skip


def compare_link(history: RunHistory) -> list[Any] | str:
    """The job page's line about the previous run of the same program: a link to the
    comparison with it (and whether the executable was rebuilt since), or a sentence that
    there is none."""
    this = history.runs[0]
    href = compare_href(history)
    if href is None:
        return f"Run {this.run} is the first run of its program that you may read."
    before = history.runs[1]
    return [
        dcc.Link(f"Compare run {this.run} with the previous run of its program", href=href),
        f": {before.job} run {before.run}, started {format_utc_ns(before.started_ns)}, "
        f"{format_duration_ns(before.elapsed_ns)} (this run: "
        f"{format_duration_ns(this.elapsed_ns)})."
        + (" Its executable was rebuilt since." if this.rebuilt else ""),
    ]


def fabric_legend(congested_wait_per_s: float) -> html.Div:
    """Key of the fabric graph's links (frontend/cyto_style.py): the utilisation scale (log:
    its decades; quantiles: rank), unknown, errors, congested (the halo: PortXmitWait at
    or above `congested_wait_per_s` ticks/s, whatever the utilisation) and down."""
    swatch = "legend-swatch"
    scale = cyto_style.UTILISATION_SCALE
    low = f"{cyto_style.LOG_MIN:.2%}".replace("0.01%", "≤0.01 %")
    halo = f"0 0 0 3px {cyto_style.CONGESTED_COLOUR}"
    return html.Div(
        className="legend",
        children=[
            html.Span("Link utilisation (log: one step per decade; quantiles: rank): "),
            html.Span(low, className="subtle"),
            html.Span(
                className=f"{swatch} legend-scale",
                style={"background": f"linear-gradient(90deg, {', '.join(scale)})"},
            ),
            html.Span("100 %", className="subtle"),
            html.Span(className=swatch, style={"background": cyto_style.UNKNOWN_COLOUR}),
            html.Span("unknown"),
            html.Span(className=swatch, style={"background": cyto_style.ERROR_COLOUR}),
            html.Span("errors in the last sweep (or saturated)"),
            html.Span(
                className=f"{swatch} legend-congested",
                style={"background": scale[1], "boxShadow": halo},
            ),
            html.Span(
                f"congested: PortXmitWait ≥ {congested_wait_per_s:,.0f} ticks/s (data "
                "waiting to be sent, at any utilisation)"
            ),
            html.Span(className=f"{swatch} legend-down"),
            html.Span("down"),
        ],
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
    {"field": "a_to_b", "headerName": "A → B", "type": "rightAligned",
     "tooltipField": "a_to_b_exact"},
    {"field": "b_to_a", "headerName": "B → A", "type": "rightAligned",
     "tooltipField": "b_to_a_exact"},
    {"field": "capacity", "headerName": "Capacity", "type": "rightAligned",
     "tooltipField": "capacity_exact"},
    {"field": "errors", "headerName": "Errors", "type": "rightAligned",
     "tooltipField": "error_detail"},
    {"field": "xmit_wait", "headerName": "Xmit wait (ticks/s)", "type": "rightAligned"},
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
                "a_to_b": format_rate(x.a_to_b_bytes_per_s),
                "a_to_b_exact": f"{_rate(x.a_to_b_bytes_per_s)} bytes/s",
                "b_to_a": format_rate(x.b_to_a_bytes_per_s),
                "b_to_a_exact": f"{_rate(x.b_to_a_bytes_per_s)} bytes/s",
                "capacity": format_rate(x.capacity_bytes_per_s),
                "capacity_exact": f"{_known(x.capacity_bytes_per_s)} bytes/s",
                "errors": errors,
                "error_detail": detail,
                "xmit_wait": _rate(x.xmit_wait_per_s),
                "sampled": format_utc_ns(x.ts_ns) if x.ts_ns is not None else "?",
            }
        )
    return rows


#: The groups of parallel links grid's columns (numbers stay numbers: the grid sorts them).
GROUP_COLUMNS: list[dict[str, Any]] = [
    {"field": "name", "headerName": "Group", "minWidth": 200, "tooltipField": "name"},
    {"field": "kind", "headerName": "Kind", "maxWidth": 120},
    {"field": "members", "headerName": "Links", "type": "rightAligned", "maxWidth": 100},
    {"field": "skew", "headerName": "Skew (max/mean)", "type": "rightAligned",
     "sort": "desc"},
    {"field": "cv", "headerName": "CV", "type": "rightAligned"},
    {"field": "peak", "headerName": "Peak skew (max/mean)", "type": "rightAligned"},
    {"field": "peak_at", "headerName": "Peak step (UTC)", "minWidth": 190},
    {"field": "busiest", "headerName": "Busiest link", "minWidth": 220,
     "tooltipField": "busiest"},
    {"field": "loads", "headerName": "Utilisation per link", "minWidth": 200,
     "tooltipField": "loads_exact"},
]  # fmt: skip


def _bytes(value: int | None) -> str:
    return "?" if value is None else format_bytes(value)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def fabric_group_rows(page: LinkGroupPage) -> list[dict[str, Any]]:
    """The groups grid's rows (row id = group id): skew and CV as numbers (null: unknown),
    the busiest member with its utilisation, every member's utilisation in link order
    (the tooltip: its bytes each way)."""
    rows = []
    for g in page.groups:
        busiest = next((m for m in g.members if m.link_id == g.busiest_link_id), None)
        rows.append({
            "id": g.id,
            "name": g.name,
            "kind": g.kind,
            "members": len(g.members),
            "skew": _ratio(g.max_mean),
            "cv": _ratio(g.cv),
            "peak": _ratio(g.peak_max_mean),
            "peak_at": "" if g.peak_t_ns is None else format_utc_ns(g.peak_t_ns),
            "busiest": "" if busiest is None
            else f"{busiest.name} ({_percent(busiest.utilisation)})",
            "loads": " / ".join(_percent(m.utilisation) for m in g.members),
            "loads_exact": "; ".join(
                f"{m.name}: {_bytes(m.a_to_b_bytes)} A → B, {_bytes(m.b_to_a_bytes)} B → A"
                for m in g.members),
        })  # fmt: skip
    return rows


def fabric_groups_caption(page: LinkGroupPage, scope: str) -> str:
    """What the groups grid holds, and how to read the skew."""
    if not page.groups:
        return (f"No group of parallel links (two links between the same switches, a leaf's "
                f"uplinks, a host's rails), {scope}.")  # fmt: skip
    shown = len(page.groups)
    total = page.page.total
    held = f"{total:,}" if shown == total else f"{shown:,} of {total:,}"
    return (
        f"{held} group{'s' if total != 1 else ''} of parallel links, {scope}, highest skew "
        "first. Skew: the busiest "
        "link's utilisation over the group's mean (1 = even; 2 = all on one of two links); "
        "CV: standard deviation over the mean; blank = fewer than two links with a load."
    )


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
         md_text(e.kind), md_text(e.subject))
        for e in shown
    ]  # fmt: skip
    return table_markdown(caption, headings, "llll", rows)


def link_jobs_markdown(attribution: LinkAttribution) -> str:
    """The jobs on a link over a window (GET /api/fabric/links/{link}/attribution): per
    job, its bytes each way (all categories), and `other` (measured - attributed)."""
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
        (md_text(job), md_text(user), format_bytes(ways.get("a_to_b", 0.0)),
         format_bytes(ways.get("b_to_a", 0.0)))
        for (job, user), ways in sorted(per.items(), key=lambda kv: -sum(kv[1].values()))
    ]  # fmt: skip
    a_to_b, b_to_a = (
        "?" if other.get(w) is None else format_bytes(other[w] or 0.0) for w in ("a_to_b", "b_to_a")
    )
    rows.append(("other", "", a_to_b, b_to_a))
    return table_markdown(caption, ("Job", "User", "A → B", "B → A"), "llrr", rows)


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
        (md_text(j.job or "another job"), md_text(j.user or ""), md_text(", ".join(j.hosts)),
         format_bytes(j.bytes_out), format_bytes(j.bytes_in))
        for j in answer.jobs
    ]  # fmt: skip
    return table_markdown(caption, ("Job", "User", "Hosts here", "Out", "In"), "lllrr", rows)


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
            md_text(h.host),
            rank_ranges(h.ranks),
            "**⚠ unmatched**" if h.match == "unmatched" else h.match,
            ", ".join(f"{md_text(p.label())} {p.guid}" for p in h.ports) or "—",
        )
        for h in hosts
    ]
    return table_markdown(caption, ("Host", "Ranks", "Match", "HCA ports"), "lrll", rows)


def multi_rail(placement: JobPlacement) -> bool:
    """Whether a host of the job has two or more HCAs (rails) on the fabric."""
    return any(len({p.guid for p in h.ports}) > 1 for h in placement.hosts)


def placement_rails_markdown(links: JobLinks | None) -> str:
    """The rails of the job's hosts as Markdown (from GET /api/jobs/<job>/links; None: no
    host has two rails): a caption saying how ranks are bound, then one row per rail by
    host. Columns: host, rail (index and device), ranks bound to it (those pinned by the
    devices their MPI was told marked), the job's bytes sent and received on it between
    hosts, and those bytes by provenance."""
    if links is None:
        return "Every host of this job has one rail (HCA)."
    if not links.rails:
        return "No host of this job was found on the fabric."
    hosts = len({r.host for r in links.rails})
    caption = (
        f"{len(links.rails)} rails on {hosts} host{'s' if hosts != 1 else ''}: a rank sends "
        "and receives on the devices its MPI was told to use (pinned: UCX_NET_DEVICES and "
        "the like), else on rail (local rank mod rails)."
    )
    rows = []
    for r in links.rails:
        pinned = set(r.pinned)
        ranks = rank_ranges(r.ranks) or "—"
        if pinned:
            ranks += f" (pinned: {rank_ranges(sorted(pinned))})"
        by = "; ".join(
            f"{p.provenance} {format_bytes(p.sent_bytes)} sent, "
            f"{format_bytes(p.received_bytes)} received"
            for p in r.provenance
        )
        rail = md_text(f"{r.rail} {r.device}".strip())
        sent, received = format_bytes(r.sent_bytes), format_bytes(r.received_bytes)
        rows.append((md_text(r.host), rail, ranks, sent, received, by or "—"))
    headings = ("Host", "Rail", "Ranks", "Sent", "Received", "By provenance")
    return table_markdown(caption, headings, "lllrrl", rows)


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
            md_text(link_name(lk.a, lk.b)), lk.kind, md_text(", ".join(lk.hosts)) or "—",
            _percent(lk.utilisation), _percent(lk.peak_utilisation), _rate(right),
            _rate(left), _known(lk.xmit_wait), _rate(lk.xmit_wait_per_s),
        ))  # fmt: skip
    return table_markdown(caption, headings, "lllrrrrrr", rows)


def _percent(fraction: float | None) -> str:
    return "?" if fraction is None else f"{fraction * 100:.1f} %"


def _rate(bytes_per_s: float | None) -> str:
    return "?" if bytes_per_s is None else f"{bytes_per_s:.0f}"


def _known(value: int | None) -> str:
    return "?" if value is None else str(value)


def _site_link(outlier: Outlier) -> list:
    """A link to the call sites card when the finding names a call site."""
    if not outlier.site:
        return []
    title = f"{outlier.op} at {outlier.site} in the call sites card"
    link = html.A("(call sites)", href=f"#{card_id('callsites')}", className="site-link",
                  title=title)  # fmt: skip
    return [" ", link]


def outlier_items(profile: SlowRanks) -> list:
    """The late ranks (first), the waiting ones and the collective imbalances of a profile,
    one list item each in words, classed by role; one item saying so when there is none."""
    items = [
        html.Li([o.text, *_site_link(o)], className=f"outlier {o.role}") for o in profile.outliers
    ]
    items += [html.Li(g.text, className="imbalance") for g in profile.imbalance]
    return items or [html.Li("No rank stands out in this window.", className="subtle")]


# ---- incidents -----------------------------------------------------------------------------

#: Width (px) of the incidents grid's columns with a time (state, start, end): a time on
#: two lines, its date over its clock time and zone, under "unobserved since".
TIME_PX = 150
#: A grid cell on as many lines as its text needs (its row as tall as the tallest).
WRAPPED = {"wrapText": True, "autoHeight": True}
#: What an incident's id is (the grid's tooltip on "Id").
REFERENCE = "the incident's reference (its page: /incidents/<id>), not a count"
# the sentence takes the width the others leave and wraps, and so do the times: every
# column read whole at 1,400 px, without a sideways scroll; the others as wide as their
# heading beside its menu, or their longest value ("mpi_slowdown")
INCIDENT_COLUMNS = [
    number_column("id", "Id", width=80, maxWidth=80, headerTooltip=REFERENCE),
    text_column("severity", "Severity", cellClass="severity", width=110),
    text_column("kind", "Kind", width=130),
    text_column("summary", "Incident", tooltipField="summary", flex=1, minWidth=240, **WRAPPED),
    text_column("state", "State", width=TIME_PX, **WRAPPED),
    text_column("start", "Start (UTC)", width=TIME_PX, **WRAPPED),
    text_column("end", "End (UTC)", width=TIME_PX, **WRAPPED),
    number_column("jobs", "Jobs", width=90),
    number_column("lost", "Lost (s)", width=110),
]
#: The job and fabric pages an incident links to show this much time around it (s).
INCIDENT_MARGIN_S = 30


def incident_path(incident_id: int) -> str:
    """The path of an incident's own page."""
    return f"/incidents/{incident_id}"


def incident_state(incident: IncidentSummary) -> str:
    """open, ended, or "ended unobserved since <time>" (its signals could no longer be
    observed: nobody knows whether it cleared)."""
    if incident.open:
        return "open"
    if incident.unobserved_ns is not None:
        return f"unobserved since {format_utc_ns(incident.unobserved_ns)}"
    return "ended"


def incident_rows(incidents: IncidentList) -> list[dict[str, Any]]:
    """The incidents grid's rows (row id = incident id), newest first."""
    return [
        {
            "id": i.id,
            "severity": i.severity,
            "kind": i.kind,
            "summary": i.summary,
            "state": incident_state(i),
            "start": format_utc_ns(i.start_ns),
            "end": "" if i.end_ns is None else format_utc_ns(i.end_ns),
            "jobs": i.jobs,
            "lost": round(i.lost_ns / 1e9, 1),
        }  # fmt: skip
        for i in incidents.incidents
    ]


def incident_banner(incidents: IncidentList) -> list[Any]:
    """The banner of every page while incidents are open (empty when none): how many, the
    newest's severity and summary, a link to its page and one to the Incidents page."""
    if not incidents.incidents:
        return []
    newest = incidents.incidents[0]
    count = incidents.page.total
    head = f"{count} open incident{'s' if count != 1 else ''}"
    return [html.Div(className=f"notice notice-error incident-banner severity-{newest.severity}",
                     role="alert", children=[
        html.Strong(head), f" — {newest.severity}: {newest.summary} ",
        dcc.Link(f"see incident {newest.id}", href=incident_path(newest.id)), " · ",
        dcc.Link("all incidents", href="/incidents"),
    ])]  # fmt: skip


def mode_footer(deployment: Deployment) -> list[Any]:
    """The footer of every page: the deployment's modes and the users sending lately
    (`ingest trusted, auth none · 2 users sent runs in the last 24 h`), then the warning of
    trusted ingest with several of them as an alert."""
    line = modes_text(deployment.ingest, deployment.auth)
    if deployment.senders is not None:
        line += f" · {senders_text(deployment.senders)}"
    warning = (
        [html.Div(f"Warning: {deployment.warning}", id=ids.MODE_WARNING, role="alert",
                  className="mode-warning")]
        if deployment.warning else []
    )  # fmt: skip
    return [html.Span(line, className="mode-line"), *warning]


def incident_facts(incident: IncidentSummary) -> str:
    """One line: severity, state, when, the size of its effect, when it was detected."""
    span = format_utc_ns(incident.start_ns) + " – " + (
        "now" if incident.end_ns is None else format_utc_ns(incident.end_ns))  # fmt: skip
    hit = incident.hit
    size = (f"{hit} job{'s' if hit != 1 else ''} hit, {incident.lost_ns / 1e9:.1f} s lost"
            if hit else "no job hit")  # fmt: skip
    return (f"{incident.severity} · {incident_state(incident)} · {span} · {size} · detected "
            f"{format_utc_ns(incident.detected_ns)}")  # fmt: skip


def incident_window(incident: IncidentSummary) -> dict[str, str]:
    """The window the pages an incident links to show (epoch seconds, as the URLs take
    them): from INCIDENT_MARGIN_S before its start to as long after its end (open: no
    `to`, up to now)."""
    window = {"from": str(incident.start_ns // 10**9 - INCIDENT_MARGIN_S)}
    if incident.end_ns is not None:
        window["to"] = str(-(-incident.end_ns // 10**9) + INCIDENT_MARGIN_S)
    return window


def incident_job_href(incident: IncidentSummary, job: str, owner: str | None) -> str:
    """A job's page (as its owner's job) over the incident's window."""
    params = ({"owner": owner} if owner else {}) | incident_window(incident)
    return f"/jobs/{quote(job, safe='')}?{urlencode(params)}"


def incident_fabric_href(incident: IncidentSummary, link: IncidentLink) -> str:
    """The Fabric page over the incident's window, replaying the first sweep of it (a
    playback step shows the sweeps that ended in it: the step from the first evidence point
    after the start, as long as the link's sweep interval, from its evidence; 1 s without),
    centred on the link with its detail panel open."""
    times = sorted({p["t_ns"] for p in link.evidence if "t_ns" in p})
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    step = max(1, -(-min(gaps) // 10**9)) if gaps else 1
    first = next((t for t in times if t > incident.start_ns), incident.start_ns)
    params = incident_window(incident) | {
        "at": str(first // 10**9), "step": str(step), "focus": f"link-{link.id}"
    }  # fmt: skip
    return f"/fabric?{urlencode(params)}"


def _peak(points: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [p[key] for p in points if p.get(key) is not None]
    return max(values) if values else None


def incident_links(incident: IncidentDetails) -> list[Any]:
    """The incident's links, each a link to the Fabric page at its time (incident_fabric_
    href) with its signals and its peak utilisation and PortXmitWait rate; a line saying
    so when it has none."""
    if not incident.links:
        return [html.Li("No link: a job's own slowdown that no link explains.",
                        className="subtle")]  # fmt: skip
    items = []
    for link in incident.links:
        name = f"{link.a.label() if link.a else '?'} – {link.b.label() if link.b else '?'}"
        util = _peak(link.evidence, "utilisation")
        wait = _peak(link.evidence, "xmit_wait_per_s")
        facts = [", ".join(link.signals)]
        facts += [] if util is None else [f"utilisation up to {util * 100:.1f} %"]
        facts += [] if wait is None else [f"PortXmitWait up to {wait:,.0f} ticks/s"]
        items.append(html.Li([dcc.Link(name, href=incident_fabric_href(incident, link),
                                       className="mono"), ": " + "; ".join(facts)]))  # fmt: skip
    return items


def _links(texts: Sequence[str], href: str) -> list[Any]:
    """Each text a link to `href`, comma-separated."""
    out: list[Any] = []
    for i, label in enumerate(texts):
        out += [", "] if i else []
        out.append(dcc.Link(label, href=href))
    return out


def _site_links(sites: Sequence[IncidentCallsite], href: str) -> list[Any]:
    """Each call site whose time rose as a link to the job's call-site table (`href`):
    `solver.c:212 MPI_Allreduce (+1.2 s/s)`, its time during and before on hover."""
    out: list[Any] = []
    for i, site in enumerate(sites[:4]):
        out += [", "] if i else []
        title = (
            f"{site.op} at {site.label}: {site.time_ns / 1e9:.3f} s in {site.calls} calls "
            f"during, {site.before_time_ns / 1e9:.3f} s in {site.before_calls} before"
        )
        out.append(dcc.Link(f"{site.label} {site.op} (+{site.rise_ns_per_s / 1e9:.2f} s/s)",
                            href=href, title=title, className="mono"))  # fmt: skip
    return out


def incident_jobs(incident: IncidentDetails) -> Any:
    """The incident's jobs as a table: role, job, user, its signals, the time it lost, its
    bytes on the links, its ranks (the late and waiting ones first, so marked), files and
    the call sites whose time rose during it (file:line and function, how much more time
    per second); the job, its ranks and files link to its page over the incident's window,
    its call sites to that page's call-site table, its report to the job's report over it.
    Another user's job is "another job", with nothing to follow."""
    if not incident.members:
        return html.P("No job crosses the link or slowed during it.", className="subtle")
    headings = ("Role", "Job", "User", "Signals", "Lost", "Bytes on the links", "Ranks",
                "Files", "Call sites whose time rose", "Report")  # fmt: skip
    head = html.Tr([html.Th(h) for h in headings])
    rows = [head]
    for m in incident.members:
        if not m.visible or m.job is None:
            rows.append(html.Tr([html.Td(m.role), html.Td("another job", className="subtle"),
                                 *[html.Td("") for _ in range(8)]]))  # fmt: skip
            continue
        href = incident_job_href(incident, m.job, m.user)
        lost = sum(e.get("lost_ns") or 0 for e in m.evidence.values())
        roles = {n["rank"]: n["role"] for e in m.evidence.values() for n in e.get("ranks", [])}
        params: dict[str, object] = {"owner": m.user, **incident_window(incident)}
        rows.append(html.Tr([
            html.Td(m.role),
            html.Td(dcc.Link(m.job, href=href, className="mono job-link")),
            html.Td(m.user or ""),
            html.Td(", ".join(m.signals)),
            html.Td(f"{lost / 1e9:.1f} s" if m.signals else "", className="num"),
            html.Td("" if m.link_bytes is None else format_bytes(m.link_bytes), className="num"),
            html.Td(_links([f"rank {r}" + (f" ({roles[r]})" if r in roles else "")
                            for r in m.ranks[:16]], href)),
            html.Td(_links(list(m.files[:4]), href), className="mono"),
            html.Td(_site_links(m.callsites, f"{href}#{card_id('callsites')}"),
                    className="incident-sites"),
            html.Td(html.A("⤓ HTML", href=report_href(f"jobs/{quote(m.job, safe='')}", params,
                                                       "html"), download="")),
        ]))  # fmt: skip
    return html.Table(rows, className="table incident-jobs")


# ---- overview (pages/overview.py) -----------------------------------------------------------


def _with(href: str, params: dict[str, str]) -> str:
    """`href` with the time range's `params` added to its query."""
    if not params:
        return href
    return href + ("&" if "?" in href else "?") + urlencode(params)


def overview_fabric(state: FabricState, hottest: LinkPage, erring: LinkPage,
                    window: dict[str, str]) -> list[Any]:  # fmt: skip
    """Fabric health: links up and down, links with errors, the busiest, then the hottest
    links and those with the most errors, each a link to the Fabric page on it."""
    s = state.summary
    busiest = "?" if s.busiest is None else f"{s.busiest * 100:.1f} %"
    counts = dmc.Group(gap="xs", children=[
        dmc.Badge(f"{s.links - s.down} links up", color="green", variant="light"),
        dmc.Badge(f"{s.down} down", color="red" if s.down else "gray", variant="light"),
        dmc.Badge(f"{s.erroring} with errors", color="orange" if s.erroring else "gray",
                  variant="light"),
        dmc.Badge(f"busiest {busiest}", color="blue", variant="light"),
        dmc.Badge(f"{s.switches} switches · {s.hcas} HCAs", color="gray", variant="light"),
    ])  # fmt: skip

    def row(x: LinkLoad, fact: str) -> html.Li:
        href = _with(f"/fabric?focus=link-{x.id}", window)
        return html.Li([dcc.Link(f"{x.a.label()} – {x.b.label()}", href=href, className="mono"),
                        html.Span(f" {fact}", className="subtle")])  # fmt: skip

    hot = [row(x, f"{_percent(x.utilisation)}, {format_rate(_busier(x))}")
           for x in hottest.links if x.utilisation]  # fmt: skip
    errors = [row(x, f"{x.errors_total} errors" + (" (saturated)" if x.saturated else ""))
              for x in erring.links if x.errors_total or x.saturated]  # fmt: skip
    return [
        counts,
        html.H3("Hottest links"),
        html.Ul(hot or [html.Li("No link carries traffic.", className="subtle")],
                className="overview-list"),
        html.H3("Links with errors"),
        html.Ul(errors or [html.Li("No link has errors.", className="subtle")],
                className="overview-list"),
        dcc.Link("Open the Fabric page →", href=_with("/fabric", window)),
    ]  # fmt: skip


def _busier(x: LinkLoad) -> float | None:
    rates = [r for r in (x.a_to_b_bytes_per_s, x.b_to_a_bytes_per_s) if r is not None]
    return max(rates) if rates else None


def fabric_share(links: JobLinks) -> float | None:
    """A job's share of the traffic on the fabric links it crosses: its attributed bytes
    over those link directions' measured bytes (None: nothing measured there)."""
    measured = [x for x in links.links if x.measured_bytes]
    total = sum(x.measured_bytes or 0 for x in measured)
    return min(1.0, sum(x.bytes for x in measured) / total) if total else None


def overview_jobs(listed: JobList, shares: Sequence[float | None],
                  window: dict[str, str]) -> list[Any]:  # fmt: skip
    """The running jobs, each a link to its page, with its user, its MPI ranks and other
    processes, the bytes it sent and its share of the links it crosses (a bar)."""
    if not listed.jobs:
        return [html.P("No job is running.", className="subtle"),
                dcc.Link("All jobs →", href=_with("/jobs", window))]  # fmt: skip
    rows = []
    for job, share in zip(listed.jobs, shares, strict=True):
        href = _with(job_path(job.job, job.user), window)
        said = "no fabric traffic measured" if share is None else (
            f"{share * 100:.1f} % of the traffic on the links it crosses")  # fmt: skip
        rows.append(html.Li(className="overview-job", children=[
            dcc.Link(job.job, href=href, className="mono job-link"),
            html.Span(" " + " · ".join([job.user, *ranks_and_processes(job.runs),
                                        f"{format_bytes(job.bytes_sent)} sent"]),
                      className="subtle"),
            dmc.Progress(value=0 if share is None else share * 100, size="sm"),
            html.Span(said, className="subtle"),
        ]))  # fmt: skip
    more = listed.page.total - len(listed.jobs)
    tail = f"All jobs ({more:,} more running) →" if more > 0 else "All jobs →"
    return [html.Ul(rows, className="overview-list"), dcc.Link(tail, href=_with("/jobs", window))]


def overview_incidents(listed: IncidentList) -> list[Any]:
    """The open incidents, newest first, each a link to its page."""
    if not listed.incidents:
        return [html.P("No incident is open.", className="subtle"),
                dcc.Link("All incidents →", href="/incidents")]  # fmt: skip
    rows = [
        html.Li(
            [
                dmc.Badge(
                    i.severity,
                    color={"critical": "red", "major": "orange"}.get(i.severity, "yellow"),
                    variant="light",
                    size="sm",
                ),
                " ",
                dcc.Link(f"incident {i.id}", href=incident_path(i.id)),
                html.Span(f" {i.summary} (since {format_utc_ns(i.start_ns)})", className="subtle"),
            ]
        )  # fmt: skip
        for i in listed.incidents
    ]
    total = listed.page.total
    return [html.Ul(rows, className="overview-list"),
            dcc.Link(f"All {total} open incident{'s' * (total != 1)} →",
                     href="/incidents")]  # fmt: skip


def overview_health(
    freshness: Freshness, newest_frame_ns: int | None, deployment: Deployment
) -> list[Any]:
    """The fabric sampler (last sweep's age and interval, stale or not) and the collector
    (the newest frame stored, the deployment's modes and senders)."""
    now = time.time_ns()
    if freshness.last_sweep_ns is None:
        sampler = dmc.Badge("no sweep stored yet", color="gray", variant="light")
    else:
        age = format_age((now - freshness.last_sweep_ns) / 1e9)
        every = ("" if freshness.sweep_interval_ns is None
                 else f", a sweep every {freshness.sweep_interval_ns / 1e9:.1f} s")  # fmt: skip
        sampler = dmc.Badge(("STALE: " if freshness.stale else "") + f"last sweep {age} ago"
                            + every, color="red" if freshness.stale else "green",
                            variant="light")  # fmt: skip
    frame = ("no frame stored yet" if newest_frame_ns is None else
             f"newest frame stored {format_utc_ns(newest_frame_ns)} "
             f"({format_age((now - newest_frame_ns) / 1e9)} ago)")  # fmt: skip
    line = modes_text(deployment.ingest, deployment.auth)
    if deployment.senders is not None:
        line += f" · {senders_text(deployment.senders)}"
    return [
        html.H3("Fabric sampler"), sampler,
        html.H3("Collector"), html.P(frame), html.P(line, className="subtle"),
        dcc.Link("Metrics (/metrics) →", href="/metrics", refresh=True),
    ]  # fmt: skip
