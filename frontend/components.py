# frontend/components.py — component factories: API data in, Dash html components out (no I/O).
"""Reusable pieces of the stacklens pages: header, notices, the grids (long lists: jobs,
rank pairs, files) and the Markdown tables (short ones).

Every exact value is plain text in the DOM. Grid cells carry their column's field as
`col-id` (e.g. `[col-id=bytes]`) for readers and browser tests alike; the grid shows text
as text. Text from the job (paths, mounts) is escaped before it goes into a Markdown table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from dash import dcc, html

from frontend import ids
from presentation.components import (
    md_text,
    number_column,
    table_markdown,
    text_column,
)
from presentation.formatting import (
    format_bytes,
    format_utc_ns,
    rank_ranges,
)
from stacklens.api_models import (
    Deployment,
    FabricEvent,
    IncidentDetails,
    IncidentList,
    JobDetails,
    JobList,
    JobPlacement,
    LinkAttribution,
    LinkEnd,
    LinkPage,
    NodeJobs,
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
    text_column("sent", "Sent", type="rightAligned", sortable=False),
    number_column("bytes", "Bytes sent"),
    number_column("messages", "Messages sent"),
]


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
         md_text(e.kind), md_text(e.subject))
        for e in shown
    ]  # fmt: skip
    return table_markdown(caption, headings, "llll", rows)


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


def outlier_items(profile: SlowRanks) -> list:
    """The late ranks (first), the waiting ones and the collective imbalances of a profile,
    one list item each in words, classed by role; one item saying so when there is none."""
    items = [html.Li(o.text, className=f"outlier {o.role}") for o in profile.outliers]
    items += [html.Li(g.text, className="imbalance") for g in profile.imbalance]
    return items or [html.Li("No rank stands out in this window.", className="subtle")]


# ---- incidents -----------------------------------------------------------------------------

INCIDENT_COLUMNS = [
    number_column("id", "#", maxWidth=80),
    text_column("severity", "Severity", maxWidth=110, cellClass="severity"),
    text_column("kind", "Kind", maxWidth=140),
    text_column("summary", "Incident", tooltipField="summary", minWidth=420),
    text_column("state", "State", maxWidth=100),
    text_column("start", "Start (UTC)"),
    text_column("end", "End (UTC)"),
    number_column("jobs", "Jobs", maxWidth=90),
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


def incident_jobs_markdown(incident: IncidentDetails) -> str:
    """A Markdown table of an incident's jobs: role, job (or "another job"), its signals,
    bytes on the links, ranks and files."""
    if not incident.members:
        return "No job crosses the link or slowed during it."
    lines = ["| Role | Job | User | Signals | Bytes on the links | Ranks | Files |",
             "|---|---|---|---|---:|---|---|"]  # fmt: skip
    for m in incident.members:
        job = md_text(m.job) if m.job else "another job"
        nbytes = "" if m.link_bytes is None else format_bytes(m.link_bytes)
        ranks = ", ".join(map(str, m.ranks[:16]))
        files = ", ".join(md_text(f) for f in m.files[:4])
        lines.append(f"| {m.role} | {job} | {md_text(m.user or '')} | {', '.join(m.signals)} | "
                     f"{nbytes} | {ranks} | {files} |")  # fmt: skip
    return "\n".join(lines)
