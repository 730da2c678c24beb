"""The report builders: a job (or one of its runs) over a window, an incident, and any
window of the fabric (on some hosts). They read through the same repositories and answer
with the same API models as the routes of the pages (server/jobs: the job and its window
as `target` finds them, its cards' data as `sections` reads them; server/fabric,
server/incidents, server/traffic), on the caller's session or, for the job report's reads
run at once, on sessions that see exactly what it sees (server.access.owner.sibling), so
the owner filter applies exactly as it does to the pages; findings and tables are computed
here from those models (pure helpers below), a section per job card by the card registry
(presentation/cards.py), the other figures by presentation/figures.py and
presentation/report_figures.py. Each builder reports its steps to a `Progress` callback.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from presentation import figures as page_figures
from presentation import report_figures as figures
from presentation.card_reports import SECTION_ROWS, ranked
from presentation.cards import CARDS
from presentation.formatting import (
    format_bytes,
    format_duration_ns,
    format_utc_ns,
    rank_ranges,
    ranks_or_processes,
)
from presentation.report_model import Figure, Progress, Report, Section, Table, no_progress
from server.access.owner import sibling
from server.callsites import service as callsite_service
from server.fabric import history
from server.fabric import repository as fabric
from server.fabric import series as fabric_series
from server.incidents import answers as incident_answers
from server.incidents import repository as incident_repo
from server.incidents.detect import Thresholds
from server.jobs import placement, profile, repository, sections, series, target
from server.query_params import Window
from server.reports import repository as reports_repo
from server.traffic import service as traffic_service
from server.traffic.repository import TrafficConfig
from server.traffic.service import AttributionCache
from stacklens.api_models import (
    IncidentDetails,
    JobIo,
    JobOps,
    JobPlacement,
    JobRanks,
    LinkEnd,
    PlacedLink,
    Series,
    SlowRanks,
)
from stacklens.constants import CATEGORY_LABELS, ON_LINKS
from stacklens.mpi_ops import WAIT_WORDS

#: A link is named in the findings from this peak utilisation on ...
BUSY_LINK = 0.8
#: PortXmitWait ticks per second from which the topology marks a link congested, unless
#: the app says otherwise (the incident detector's default threshold).
CONGESTED_WAIT_PER_S = Thresholds.xmit_wait_per_s
#: ... rows of the first page's tables at most (the sections list all of it).
FIRST_PAGE_ROWS = 12
#: Findings listed at most.
MAX_FINDINGS = 12
#: The latest instant a report reads to (year 2116: far past any sample, and the fabric
#: samples' search past a window's end, server.jobs.placement, stays within 64 bits).
LATEST_NS = 2**62
#: Steps of a fabric series at most.
MAX_FABRIC_STEPS = 300

#: What each figure of a report is and how its values were obtained.
EVIDENCE = {
    "times": (
        "Time in MPI, in file I/O and outside, per rank",
        "measured",
        "wall time inside every MPI and I/O call, from the PMPI/POSIX/stdio/MPI-IO "
        "hooks; outside = the rank's interval time minus those",
    ),
    "bytes": (
        "Bytes by category",
        "measured",
        "payload bytes handed to MPI calls and file-system calls by the hooks (not "
        "on-wire bytes: protocol headers and collective algorithms' internal "
        "traffic are not counted here)",
    ),
    "findings": (
        "Findings",
        "derived",
        "computed from the figures above by fixed rules "
        "(a rank late — more time outside MPI — or waiting — more time inside MPI — by "
        f"≥ {profile.MIN_SHARE:.0%} of the elapsed time over the other ranks' median, "
        f"at least {profile.MIN_EXCESS_NS // 10**6} ms, and > {profile.SPREAD}× their "
        f"spread; a link at ≥ {BUSY_LINK:.0%} of its capacity; any PortXmitWait or error)",
    ),
    "timeline": ("Timeline", "measured", "per step, summed over ranks, by category"),
    "matrix": (
        "Rank × rank matrix",
        "measured",
        "point-to-point payload bytes per (source, destination), counted by the sender",
    ),
    "heatmap": ("Per-rank heat map", "measured", "share of each step a rank spent inside MPI"),
    "ops": (
        "Operations, collectives, message sizes",
        "measured",
        "calls, bytes and time per MPI function; sizes in log2 buckets",
    ),
    "io": ("File I/O", "measured", "per layer and file, from the I/O hooks"),
    "links": (
        "Links: utilisation, PortXmitWait, errors",
        "measured",
        "fabric port counters (PMA) read every sweep; a sample counts when its sweep "
        "interval overlaps the window",
    ),
    "crossed": (
        "Which switch links the job's traffic can cross",
        "topological",
        "every switch-to-switch link on a shortest path between the job's switches "
        "(topological candidates): not routed through the forwarding tables, "
        "so not every listed link carried this job's bytes",
    ),
    "topology": ("Topology", "measured", "the last discovery of the fabric (nodes, cables)"),
    "fabric": (
        "Fabric series",
        "measured",
        "per step, the port counters' deltas over the samples' intervals",
    ),
}


def _utc(ns: int) -> str:
    return format_utc_ns(ns)


def _seconds(ns: int) -> str:
    return format_duration_ns(ns)


def _percent(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.0f} %"


def link_label(a: LinkEnd, b: LinkEnd) -> str:
    """A link as `name[port] → name[port]`, in the order it is stored."""
    return f"{a.label()} → {b.label()}"


# ---- pure helpers: the first page's numbers and the findings -------------------------------


def rank_totals(prof: SlowRanks) -> dict[str, dict[int, int]]:
    """Per place ("inside MPI", "file I/O", "outside MPI and I/O", "start-up") and rank,
    its time summed over the steps of the profile (every rank seen counts, 0 where none)."""
    ranks = {s.rank for s in prof.shares}
    out = {
        k: dict.fromkeys(ranks, 0)
        for k in ("inside MPI", "file I/O", "outside MPI and I/O", "start-up")
    }
    for s in prof.shares:
        out["inside MPI"][s.rank] += sum(s.mpi_ns.values()) + s.shutdown_ns
        out["file I/O"][s.rank] += s.io_ns
        out["outside MPI and I/O"][s.rank] += s.compute_ns
        out["start-up"][s.rank] += s.startup_ns
    return out


def spread_table(totals: dict[str, dict[int, int]]) -> Table:
    """Min / median / max over ranks of each place's time, with the ranks at the ends."""
    rows = []
    for place, per_rank in totals.items():
        if not per_rank:
            continue
        low = min(per_rank, key=lambda r: (per_rank[r], r))
        high = max(per_rank, key=lambda r: (per_rank[r], -r))
        median = int(statistics.median(per_rank.values()))
        rows.append(
            [
                place,
                f"{_seconds(per_rank[low])} (rank {low})",
                _seconds(median),
                f"{_seconds(per_rank[high])} (rank {high})",
            ]
        )
    return Table(
        ["", "min over ranks", "median", "max over ranks"],
        rows,
        [False, True, True, True],
        "Time per rank over the window (start-up is "
        "MPI_Init, before the first interval; inside MPI includes MPI_Finalize).",
    )


def ranks_fact(world_size: int, ranks: JobRanks) -> str:
    """The report's Ranks fact: the world and how many of its MPI ranks reported, then the
    non-MPI processes apart (a batch script's shell): "2 (2 reported)", "2 (2 reported), 1
    process"; only processes: "none, 1 process"."""
    mpi, processes = ranks.ranks_reported, ranks.processes_reported
    said = f"{world_size} ({mpi} reported)" if mpi or not processes else "none"
    return said + (f", {ranks_or_processes('processes', processes)}" if processes else "")


def outlier_finding(o: Any) -> str:
    """A late or waiting rank as a finding: the profile's own sentence (the same words as
    the API and the job page), as a sentence."""
    return f"{o.text[0].upper()}{o.text[1:]}."


def link_findings(links: Sequence[PlacedLink], errors: dict[int, int | None]) -> list[str]:
    """Busy links (peak ≥ BUSY_LINK), links with PortXmitWait and links with errors, worst
    first, in plain words."""
    found: list[tuple[float, str]] = []
    for lk in links:
        name = link_label(lk.a, lk.b)
        peak = lk.peak_utilisation
        if peak is not None and peak >= BUSY_LINK:
            found.append(
                (
                    3 + peak,
                    f"Link {name} peaked at {_percent(peak)} of its capacity "
                    f"(mean {_percent(lk.utilisation)} over the window).",
                )
            )
        if lk.xmit_wait:
            rate = f" ({lk.xmit_wait_per_s:,.0f}/s)" if lk.xmit_wait_per_s is not None else ""
            found.append(
                (
                    2 + min(lk.xmit_wait / 1e9, 0.9),
                    f"Link {name}: {lk.xmit_wait:,} "
                    f"PortXmitWait ticks{rate}: its senders had data and had to wait.",
                )
            )
        count = errors.get(lk.id)
        if count:
            found.append((4, f"Link {name}: {count:,} error counter increments in the window."))
    found.sort(key=lambda f: -f[0])
    return [text for _, text in found]


def byte_rows(ops: JobOps, io: JobIo, timeline: Series) -> list[list[str]]:
    """Bytes by category: the MPI traffic categories (sent; received where the API counts
    them) and file I/O per file-system layer (read + written), with calls and time."""
    rows = []
    for c in ops.categories:
        if c.category == "mpi_startup" or not (c.calls or c.bytes_sent or c.bytes_received):
            continue
        rows.append(
            [
                CATEGORY_LABELS.get(c.category, c.category),
                format_bytes(c.bytes_sent),
                format_bytes(c.bytes_received),
                f"{c.calls:,}",
                _seconds(c.time_ns),
            ]
        )
    metric = {m: i for i, m in enumerate(timeline.metrics)}
    layers: dict[str, list[int]] = {}
    for p in timeline.points:
        if p.key.startswith(series.FS_PREFIX):
            total = layers.setdefault(p.key.removeprefix(series.FS_PREFIX), [0, 0, 0])
            total[0] += p.values[metric["bytes"]]
            total[1] += p.values[metric["calls"]]
            total[2] += p.values[metric["time_ns"]]
    split: dict[str, list[int]] = {}
    for f in io.files:
        w_r = split.setdefault(f.layer, [0, 0])
        w_r[0] += f.bytes_written
        w_r[1] += f.bytes_read
    complete = io.page.next_cursor is None  # every file read: the split is exact
    for layer, (nbytes, calls, ns) in sorted(layers.items()):
        w, r = split.get(layer, [0, 0])
        rows.append(
            [
                f"file I/O, {layer} ({format_bytes(nbytes)} in all)",
                format_bytes(w) if complete else "?",
                format_bytes(r) if complete else "?",
                f"{calls:,}",
                _seconds(ns),
            ]
        )
    return rows


# ---- the job report -------------------------------------------------------------------------


def job_target(
    session: Session, job: str, run: int | None, window: Window, owner: str | None = None
) -> target.Target:
    """The job (of `owner`, if given) and run a report is of, as the job routes find it:
    404 for an unknown job, run, or another user's job; 409 if the id names jobs of
    several owners and `owner` does not say which."""
    return target.find_target(session, job, owner, run, window)


def job_report(
    session: Session,
    job: str,
    run: int | None,
    window: Window,
    progress: Progress = no_progress,
    traffic: Traffic | None = None,
    owner: str | None = None,
    congested_from: float = CONGESTED_WAIT_PER_S,
) -> Report:
    """The report of `job` (or its run `run`) over `window` (open: the whole job), read as
    the session's viewer may (an unknown job or another user's: 404 as the job routes);
    with `traffic` (the app's attribution settings and cache), the job's bytes per link by
    category and, on its busy links, the job with most bytes there. The topology marks a link
    congested from `congested_from` PortXmitWait ticks per second."""
    steps_total = 6
    progress(0, steps_total, "job and runs")
    chosen = job_target(session, job, run, window, owner)
    found = target.find_job(session, job, owner)
    runs = repository.job_runs(session, chosen.scope)
    progress(1, steps_total, "profile of the ranks")
    steps = target.steps(
        chosen, window, None, series.profile_max_steps(chosen.world_size), per_rank=True
    )
    lo = chosen.started_ns if window.from_ns is None else window.from_ns
    hi = chosen.last_seen_ns + 1 if window.to_ns is None else min(window.to_ns, LATEST_NS)

    def read_profile(s: Session) -> SlowRanks:
        rows = series.profile_rows(s, chosen.scope, steps)
        return SlowRanks.model_validate(
            {
                "job": chosen.job,
                "from_ns": steps.from_ns,
                "to_ns": steps.to_ns,
                "step_ns": steps.step_ns,
                "shares": json.loads(rows.shares),
                **rows.slow_ranks(callsite_service.site_finder(s, chosen.scope)),
                "run": chosen.run,
            }
        )

    def read_timeline(s: Session) -> Series:
        return Series.model_validate(
            {
                "job": chosen.job,
                "by": "category",
                "from_ns": steps.from_ns,
                "to_ns": steps.to_ns,
                "step_ns": steps.step_ns,
                "metrics": list(series.METRICS["category"]),
                "points": json.loads(series.series_json(s, chosen.scope, steps, "category")),
                "run": chosen.run,
            }
        )

    def read_fabric(s: Session) -> _JobFabric:
        placed = JobPlacement(
            job=chosen.job,
            from_ns=lo,
            to_ns=hi,
            crossed=placement.CROSSED_BASIS,
            run=chosen.run,
            **placement.job_placement(s, chosen.scope, lo, hi),
        )
        nodes, all_links = fabric.nodes(s), fabric.links(s)
        errors = _link_errors(s, all_links, [lk.id for lk in placed.links], lo, hi)
        busiest = sorted(placed.links, key=lambda lk: -(lk.peak_utilisation or 0))
        loads = _fabric_points(s, all_links, [lk.id for lk in busiest], lo, hi)
        owners = _busy_link_owners(s, traffic, busiest, lo, hi)
        return _JobFabric(placed, nodes, all_links, errors, busiest, loads, owners)

    # the families card places its traffic as the app does (a cache of its own without it)
    placing = (
        (traffic[1], traffic[0].paths) if traffic else (AttributionCache(), TrafficConfig().paths)
    )
    reads: dict[str, Callable[[Session], Any]] = {  # the longest first: they start at once
        "fabric": read_fabric,
        "attribution": lambda s: _attribution(s, traffic, found, chosen, lo, hi),
        "profile": read_profile,
        "timeline": read_timeline,
        **sections.detail_reads(chosen, *placing),
        "incidents": lambda s: _job_incidents(s, found.id, lo, hi),
    }
    stages = [
        (("profile", "timeline"), "matrix, operations, collectives, sizes, I/O, ranks"),
        (tuple(sections.detail_reads(chosen, *placing)), "placement on the fabric"),
        (("fabric",), "fabric series"),
        (("attribution", "incidents"), "figures and findings"),
    ]
    done = _read_at_once(session, reads, [(names, partial(progress, 2 + i, steps_total, what))
                                          for i, (names, what) in enumerate(stages)])  # fmt: skip
    prof: SlowRanks = done["profile"]
    timeline: Series = done["timeline"]
    cards = {card.key: done[card.key] for card in CARDS}  # each card's answer, by key
    ranks: JobRanks = cards["ranks"]
    placed, nodes, all_links, errors, busiest, loads, owners = done["fabric"]
    attributed = done["attribution"]

    who = found.user or "?"
    span = hi - lo
    scope = f"run {chosen.run}" if chosen.run is not None else f"all {len(runs)} run(s)"
    title = f"Job {chosen.job} — {scope}"
    hosts = sorted(h.host for h in placed.hosts)
    facts = [
        ("Job", chosen.job),
        (
            "Runs",
            "; ".join(
                f"run {r['run']}: {r['kind']}, {ranks_or_processes(r['kind'], r['world_size'])}, "
                f"{r['status']}"
                for r in runs
            )
            or "none in this window",
        ),
        ("User", who),
        ("Command", found.command or "?"),
        ("Status", found.status),
        ("Started", _utc(chosen.started_ns)),
        ("Last seen", _utc(chosen.last_seen_ns)),
        ("Duration", _seconds(max(0, chosen.last_seen_ns - chosen.started_ns))),
        ("Window of this report", f"{_utc(lo)} – {_utc(hi)} ({_seconds(span)})"),
        ("Ranks", ranks_fact(chosen.world_size, ranks)),
        ("Hosts", f"{len(hosts)}: " + ", ".join(hosts[:8]) + (" …" if len(hosts) > 8 else "")),
    ]
    totals = rank_totals(prof)
    findings = incident_findings(done["incidents"], chosen.job)
    findings += [outlier_finding(o) for o in prof.outliers]
    findings += [f"{g.text[0].upper()}{g.text[1:]}." for g in prof.imbalance[:3]]
    findings += link_findings(busiest, errors)
    findings += owners
    health = ranks.health
    if health.frames_dropped:
        findings.append(
            f"{health.frames_dropped:,} frames of {health.ranks_lost} ranks were "
            "lost: every total here is a lower bound."
        )
    if health.keys_dropped:
        findings.append(
            f"{health.keys_dropped:,} keys of {health.ranks_folded} ranks were folded "
            "into 'other' (memory cap): totals are exact, their split is not."
        )
    if not findings:
        findings = [
            "Nothing stood out: no rank late or waiting (no excess of "
            f"{profile.MIN_SHARE:.0%} of the elapsed time over the other ranks), no link "
            f"at {BUSY_LINK:.0%} or more, no PortXmitWait, no error."
        ]
    link_rows = [_link_row(lk, errors) for lk in busiest]
    first_links, note = ranked(link_rows, FIRST_PAGE_ROWS)
    summary = [
        ("Where the time went", spread_table(totals)),
        (
            "Bytes by category",
            Table(
                ["category", "sent / written", "received / read", "calls", "time inside"],
                byte_rows(cards["ops"], cards["io"], timeline),
                [False, True, True, True, True],
                "MPI bytes as handed to the calls; file bytes as read and written.",
            ),
        ),
        (
            "Links used (busiest first)",
            Table(
                _LINK_HEADINGS,
                first_links,
                _LINK_NUMERIC,
                (note + " " if note else "") + "Host links carry this job's hosts; candidate links "
                "are the switch links its traffic can cross (topological, not routed).",
            ),
        ),
    ]
    shown = _job_sections(cards, prof, timeline, placed, link_rows, nodes, all_links, loads,
                          congested_from)  # fmt: skip
    evidence_rows = [list(v) for v in EVIDENCE.values()]
    if attributed is not None:
        shown.insert(-1, attributed[0])
        evidence_rows.append(attributed[1])
    evidence = Table(["figure", "basis", "how"], evidence_rows)
    progress(6, steps_total, "done")
    return Report(
        kind="job",
        title=title,
        facts=facts,
        findings=findings[:MAX_FINDINGS],
        summary=summary,
        sections=shown,
        evidence=evidence,
        filename=_filename("job", chosen.job, chosen.run),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


#: Reads of a report run at once at most (each on a session and connection of its own).
READERS = 4


def _read_at_once(
    session: Session,
    reads: dict[str, Callable[[Session], Any]],
    stages: Sequence[tuple[Sequence[str], Callable[[], None]]],
) -> dict[str, Any]:
    """Every read at once, READERS at a time in the order given, each on a new session that
    sees what `session` sees (server.access.owner.sibling); as each stage's reads are
    done, in order, its callback (progress). Their answers by name; a read's error is
    raised."""

    def run(read: Callable[[Session], Any]) -> Any:
        with sibling(session) as own:
            return read(own)

    with ThreadPoolExecutor(READERS, thread_name_prefix="report-read") as pool:
        futures = {name: pool.submit(run, read) for name, read in reads.items()}
        for names, then in stages:
            for name in names:
                futures[name].result()
            then()
        return {name: future.result() for name, future in futures.items()}


class _JobFabric(NamedTuple):
    """What a job report reads of the fabric: the job's placement, the nodes and links,
    the errors of its links, its links busiest first, the series of the busiest, and who
    had most bytes on the busy ones."""

    placed: JobPlacement
    nodes: list[dict[str, Any]]
    all_links: list[dict[str, Any]]
    errors: dict[int, int | None]
    busiest: list[PlacedLink]
    loads: tuple[dict[int, str], dict[int, list[tuple[int, float | None, float]]]]
    owners: list[str]


#: Incidents a job report joins at most (the newest overlapping its window).
MAX_INCIDENTS = 5


def _job_incidents(session: Session, job_id: int, lo: int, hi: int) -> list[IncidentDetails]:
    """The incidents naming the job (id) that overlap [lo, hi), newest first, each as
    GET /api/incidents/{id} shows it to the session's viewer (each from a snapshot of its
    own, as that route reads it)."""
    rows, _ = incident_repo.list_incidents(
        session, MAX_INCIDENTS, None, from_ns=lo, to_ns=hi, severity=None, kind=None,
        job_ids=[job_id], link=None, is_open=None,
    )  # fmt: skip
    out = []
    for row in rows[:MAX_INCIDENTS]:
        with sibling(session) as own:
            out.append(incident_answers.details(own, row.id))
    return out


#: What a job's own signal of an incident says, by detector kind.
_SIGNAL_WORDS = {
    "mpi_slowdown": "time blocked in MPI calls per byte",
    "io_stall": "file I/O time per byte",
}


def incident_findings(incidents: Sequence[IncidentDetails], job: str) -> list[str]:
    """The cross-stack findings of a job from the incidents that name it: per link of each,
    how loaded it was and for how long, what the job showed meanwhile (its own signals:
    time per byte against its own baseline) and which job had most bytes on the link
    ("Link a[1] → b[2] was at up to 94 % of its capacity for 40.0 s (incident 7, from
    ...) while this job's time blocked in MPI calls per byte rose to 3.0× its own
    baseline, most of it in blocking point-to-point; the job with most bytes on it was job
    J2 (1.2 GiB, routed).")."""
    out = []
    for inc in incidents:
        me = next((m for m in inc.members if m.visible and m.job == job), None)
        if me is None:
            continue
        end = inc.end_ns if inc.end_ns is not None else inc.updated_ns
        held = _seconds(max(0, end - inc.start_ns)) + (" so far" if inc.end_ns is None else "")
        rose = []
        for signal in me.signals:
            factor = me.evidence.get(signal, {}).get("peak_factor")
            waits_in = me.evidence.get(signal, {}).get("waits_in")
            where = f", most of it in {WAIT_WORDS[waits_in]}" if waits_in in WAIT_WORDS else ""
            if signal in _SIGNAL_WORDS and factor:
                rose.append(f"{_SIGNAL_WORDS[signal]} rose to {factor:.1f}× its own baseline"
                            + where)  # fmt: skip
        top = next((m for m in inc.members if m.role == "aggressor"), None)
        if top is not None and top.visible and top.job == job:
            meanwhile = "this job had the most bytes on it" + _routed(top.link_bytes)
            top = None
        elif rose:
            meanwhile = "this job's " + " and its ".join(rose)
        else:
            meanwhile = "this job's traffic crossed it"
        if top is None:
            who = ""
        elif top.visible:
            who = f"; the job with most bytes on it was job {top.job}{_routed(top.link_bytes)}"
        else:
            who = "; the job with most bytes on it was another job (not yours)"
        for lk in inc.links:
            name = link_label(lk.a, lk.b) if lk.a and lk.b else f"link {lk.id}"
            utils = [e["utilisation"] for e in lk.evidence if e.get("utilisation") is not None]
            level = (f"at up to {_percent(max(utils))} of its capacity" if utils
                     else ", ".join(lk.signals))  # fmt: skip
            out.append(f"Link {name} was {level} for {held} (incident {inc.id}, from "
                       f"{_utc(inc.start_ns)}) while {meanwhile}{who}.")  # fmt: skip
    return out


def _routed(nbytes: int | None) -> str:
    return "" if nbytes is None else f" ({format_bytes(nbytes)}, routed)"


#: The app's link attribution: its settings and the cache of whole-fabric attributions.
Traffic = tuple[TrafficConfig, AttributionCache]


def _attribution(
    session: Session, traffic: Traffic | None, job: Any, target: Any, lo: int, hi: int
) -> tuple[Section, list[str]] | None:
    """The section of the job's bytes per link direction by category (server/traffic), and its
    evidence row; None without attribution settings."""
    if traffic is None:
        return None
    config, cache = traffic
    run_id = None if target.run is None else target.scope.run_id
    about = {"id": job.id, "job": job.job_key, "user": job.user}
    answer = traffic_service.job_links(session, config, about, Window(lo, hi), run_id, cache)
    links = sorted(answer["links"], key=lambda r: -r["bytes"])
    rows = []
    for r in links[:SECTION_ROWS]:
        a, b = LinkEnd(**r["a"]), LinkEnd(**r["b"])
        name = link_label(a, b) if r["direction"] == "a_to_b" else link_label(b, a)
        per_category = dict.fromkeys(ON_LINKS, 0.0)
        bases = set()
        for f in r["categories"]:
            per_category[f["category"]] += f["bytes"]
            bases.add(f"{f['provenance']}{'' if f['path'] == 'fixed' else ' (group)'}")
        measured = r["measured_bytes"]
        share = "?" if not measured else f"{r['bytes'] / measured * 100:.0f} %"
        rows.append([name, *(format_bytes(per_category[k]) for k in ON_LINKS),
                     format_bytes(r["bytes"]), share, ", ".join(sorted(bases))])  # fmt: skip
    left = ", ".join(f"{k}: {format_bytes(v)}" for k, v in sorted(answer["left_out"].items()) if v)
    note = (f"The {len(links)} link directions its inter-host traffic crossed (forwarding: "
            f"{answer['paths']}; collective on-wire bytes {answer['collectives']})."
            + (f" On no link: {left}." if left else ""))  # fmt: skip
    section = Section(
        "Attribution: this job's bytes per link", "attribution",
        "Its transfers routed over the forwarding tables, by category, against the link "
        "direction's measured bytes.", [],
        [Table(["link direction", *(CATEGORY_LABELS[k] for k in ON_LINKS), "all",
                "of measured", "basis"], rows,
               [False, True, True, True, True, True, True, False], note)],
    )  # fmt: skip
    how = ["This job's bytes per link", "routed / modelled",
           "measured transfers placed on links by the forwarding tables (routed); collectives' "
           f"on-wire traffic {answer['collectives']}; a group = split over parallel or adaptive "
           "links by their measured bytes"]  # fmt: skip
    return section, how


def _busy_link_owners(
    session: Session, traffic: Traffic | None, links: Sequence[PlacedLink], lo: int, hi: int
) -> list[str]:
    """For each of the first MAX_FINDINGS links at BUSY_LINK or more (`links` busiest
    first; a report shows no more findings): which job (as the viewer may see it) had the
    most bytes on its busier direction over the window."""
    if traffic is None:
        return []
    config, cache = traffic
    out = []
    busy = [lk for lk in links if (lk.peak_utilisation or 0) >= BUSY_LINK]
    for lk in busy[:MAX_FINDINGS]:
        answer = traffic_service.link_attribution(session, config, lk.id, Window(lo, hi), cache)
        if answer is None:
            continue
        busiest = max(answer["directions"], key=lambda d: d["measured_bytes"] or 0)
        per_job: dict[str | None, float] = {}
        for f in busiest["by_job"]:
            per_job[f["job"]] = per_job.get(f["job"], 0.0) + f["bytes"]
        if not per_job:
            continue
        top = max(per_job, key=lambda j: per_job[j])
        who = "another job (not yours)" if top is None else f"job {top}"
        measured = busiest["measured_bytes"]
        of = f" of {format_bytes(measured)} measured" if measured else ""
        out.append(f"On link {link_label(lk.a, lk.b)} the job with most bytes was {who}: "
                   f"{format_bytes(per_job[top])}{of} (routed).")  # fmt: skip
    return out


_LINK_HEADINGS = ["link", "kind", "mean util.", "peak util.", "PortXmitWait", "errors"]
_LINK_NUMERIC = [False, False, True, True, True, True]


def _link_row(lk: PlacedLink, errors: dict[int, int | None]) -> list[str]:
    count = errors.get(lk.id)
    return [
        link_label(lk.a, lk.b),
        lk.kind,
        _percent(lk.utilisation),
        _percent(lk.peak_utilisation),
        "?" if lk.xmit_wait is None else f"{lk.xmit_wait:,}",
        "?" if lk.id not in errors else "?" if count is None else f"{count:,}",
    ]


def _filename(kind: str, name: str, run: int | None = None) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]
    return f"stacklens-{kind}-{safe}" + ("" if run is None else f"-run{run}")


def _link_errors(
    session: Session, all_links: list[dict[str, Any]], ids: list[int], lo: int, hi: int
) -> dict[int, int | None]:
    """Per link id: its error-counter increments of both ends over the window, as the
    fabric's links list over a window counts them (None: a counter was unknown, e.g. reset
    or saturated, at an end); links without a sample in the window are absent."""
    wanted = set(ids)
    chosen = [lk for lk in all_links if lk["id"] in wanted]
    out: dict[int, int | None] = {}
    for load in fabric.window_loads(session, chosen, lo, hi):
        if load["samples"]:
            known = None not in load["errors"].values()
            out[load["id"]] = load["errors_total"] if known else None
    return out


def _fabric_points(
    session: Session, all_links: list[dict[str, Any]], ids: list[int], lo: int, hi: int
) -> tuple[dict[int, str], dict[int, list[tuple[int, float | None, float]]]]:
    """Names and series (figures.link_loads) of the first MAX_SERIES_LINKS links of `ids`,
    per step of the window, from the fabric's own series (server.fabric.series)."""
    by_id = {lk["id"]: lk for lk in all_links}
    chosen = [by_id[i] for i in ids if i in by_id][: figures.MAX_SERIES_LINKS]
    steps = series.Steps(lo, hi, series.auto_step_ns(max(1, hi - lo), MAX_FABRIC_STEPS))
    names: dict[int, str] = {}
    points: dict[int, list[tuple[int, float | None, float]]] = {}
    for lk in chosen:
        names[lk["id"]] = link_label(LinkEnd(**lk["a"]), LinkEnd(**lk["b"]))
        times, columns = fabric_series.link_series(session, lk, steps)
        points[lk["id"]] = [
            (t, u, w or 0.0)
            for t, u, w in zip(
                times, columns["utilisation"], columns["xmit_wait_per_s"], strict=True
            )
        ]
    return names, points


def _events_section(events: list[dict[str, Any]]) -> Section:
    """The section listing fabric events with their start and end ("open" while open)."""
    rows = [[_utc(e["start_ns"]), "open" if e["end_ns"] is None else _utc(e["end_ns"]),
             e["kind"], e["subject"]] for e in events]  # fmt: skip
    return Section(
        "Fabric events", "events", "", [], [Table(["start", "end", "event", "subject"], rows)]
    )


def _job_sections(
    cards: dict[str, Any],
    prof: SlowRanks,
    timeline: Series,
    placed: JobPlacement,
    link_rows: list[list[str]],
    nodes: list[dict[str, Any]],
    all_links: list[dict[str, Any]],
    loads: tuple[dict[int, str], dict[int, list[tuple[int, float | None, float]]]],
    congested_from: float,
) -> list[Section]:
    """The job report's sections: the timeline and the ranks' time (from the profile), a
    section per job card (presentation/cards.py), then the fabric (a link congested from
    `congested_from` PortXmitWait ticks per second)."""
    imbalance_rows = [
        [
            g.op,
            str(g.comm_id),
            _seconds(g.min_ns) + f" (rank {g.min_rank})",
            _seconds(g.median_ns),
            _seconds(g.max_ns) + f" (rank {g.max_rank})",
        ]
        for g in prof.imbalance
    ]
    host_rows = [
        [
            h.host,
            rank_ranges(h.ranks),
            h.match,
            ", ".join(f"{p.label()} {p.guid}" for p in h.ports) or "—",
        ]
        for h in placed.hosts
    ]
    highlighted = {lk.id: lk.peak_utilisation for lk in placed.links}
    waiting = {lk.id: lk.xmit_wait_per_s for lk in placed.links}
    names, points = loads
    return [
        Section(
            "Timeline",
            "timeline",
            "Time inside and bytes per step, by MPI traffic "
            "category and file-system layer, summed over ranks.",
            [Figure(page_figures.timeline(timeline), "time and bytes per step", 460)],
        ),
        Section(
            "Per-rank heat map",
            "heatmap",
            "Share of each step a rank spent inside MPI; how unevenly each collective's "
            "ranks spent their time inside it.",
            [Figure(page_figures.rank_heatmap(prof), "share of time inside MPI", 520)],
            [
                Table(
                    [
                        "collective",
                        "comm",
                        "least time (arrives last)",
                        "median",
                        "most time (waits longest)",
                    ],
                    imbalance_rows,
                    [False, False, True, True, True],
                )
            ],
        ),
        *(card.report_section(cards[card.key]) for card in CARDS),
        Section(
            "Topology",
            "topology",
            "The fabric as last discovered; the links this job's "
            "hosts sit on and the switch links its traffic can cross, coloured by peak "
            "utilisation over the window, haloed where congested (mean PortXmitWait); this "
            "job's hosts marked.",
            [
                Figure(
                    figures.topology(
                        nodes,
                        all_links,
                        highlighted,
                        {h.host for h in placed.hosts},
                        waiting=waiting,
                        congested_from=congested_from,
                    ),
                    "the fabric",
                    520,
                )
            ],
            [
                Table(["host", "ranks", "found by", "HCA ports"], host_rows),
                Table(_LINK_HEADINGS, link_rows[:SECTION_ROWS], _LINK_NUMERIC),
            ],
        ),
        Section(
            "Fabric series",
            "fabric",
            "The busiest of these links over the window.",
            [Figure(figures.link_loads(names, points), "utilisation and PortXmitWait", 480)],
        ),
    ]


# ---- the window report ----------------------------------------------------------------------


def window_report(
    session: Session,
    jobs_in_all: int,
    from_ns: int,
    to_ns: int,
    hosts: list[str] | None,
    progress: Progress = no_progress,
    congested_from: float = CONGESTED_WAIT_PER_S,
) -> Report:
    """The report of the fabric over [from_ns, to_ns), on the links of `hosts` and the
    switch links between them (all links when None): their load, PortXmitWait and errors,
    the topology (a link congested from `congested_from` PortXmitWait ticks per second),
    the fabric series, the fabric events, and the jobs that ran there that the session may
    read (`jobs_in_all`: how many ran there whoever owns them; the others are counted,
    never named)."""
    steps_total = 4
    progress(0, steps_total, "fabric")
    nodes, all_links = fabric.nodes(session), fabric.links(session)
    unmatched: list[str] = []
    if hosts:
        placed = placement.place({h: [] for h in hosts}, {}, nodes, all_links)
        unmatched = [h["host"] for h in placed["hosts"] if h["match"] == "unmatched"]
        chosen = [lk for lk in all_links if lk["id"] in {c["id"] for c in placed["links"]}]
    else:
        chosen = list(all_links)
    progress(1, steps_total, "link load over the window")
    ports = [p for lk in chosen for p in (lk["a_port_id"], lk["b_port_id"]) if p is not None]
    sums = placement.window_sums(session, ports, from_ns, to_ns)
    hca = {n["guid"] for n in nodes if n["type"] == "hca"}
    links = [
        PlacedLink(
            **{k: lk[k] for k in ("id", "a", "b", "state", "capacity_bytes_per_s")},
            kind="host" if lk["a"]["guid"] in hca or lk["b"]["guid"] in hca else "candidate",
            hosts=[],
            **placement.link_window(lk, sums.get(lk["a_port_id"]), sums.get(lk["b_port_id"])),
        )
        for lk in chosen
    ]
    busiest = sorted(links, key=lambda lk: (-(lk.peak_utilisation or 0), -(lk.xmit_wait or 0)))
    errors = _link_errors(session, all_links, [lk.id for lk in links], from_ns, to_ns)
    progress(2, steps_total, "jobs and events")
    jobs = reports_repo.window_jobs(session, from_ns, to_ns, hosts)
    others = max(0, jobs_in_all - len(jobs))
    events, _ = history.events(session, from_ns, to_ns, None, None, SECTION_ROWS, None)
    events.sort(key=lambda e: (e["start_ns"], e["id"]))
    progress(3, steps_total, "fabric series and figures")
    active = [lk.id for lk in busiest if lk.peak_utilisation or lk.xmit_wait]
    loads = _fabric_points(session, all_links, active or [lk.id for lk in busiest], from_ns, to_ns)
    where = "hosts " + ", ".join(hosts) if hosts else "the whole fabric"
    facts = [
        ("Window", f"{_utc(from_ns)} – {_utc(to_ns)} ({_seconds(to_ns - from_ns)})"),
        ("Scope", where),
        ("Links in scope", f"{len(links)} ({sum(lk.kind == 'host' for lk in links)} host links)"),
        (
            "Jobs in the window",
            f"{len(jobs)} of yours" + (f", {others} of other users (not named)" if others else ""),
        ),
        ("Fabric samples", f"{sum(lk.samples for lk in links):,} port samples overlap the window"),
    ]
    if unmatched:
        facts.append(("Hosts not found on the fabric", ", ".join(unmatched)))
    findings = link_findings(busiest, errors)
    findings += [_event_text(e) for e in events[:5]]
    for j in jobs[:5]:
        findings.append(
            f"Job {j['job']} ({j['user'] or '?'}, {j['world_size']} ranks, "
            f"{j['status']}) ran on {len(j['hosts'])} host{'s' if len(j['hosts']) != 1 else ''} "
            f"of this scope in the window."
        )
    if others:
        findings.append(f"{others} job(s) of other users also ran here in the window.")
    if not findings:
        findings = [
            f"Nothing stood out: no link at {BUSY_LINK:.0%} or more, no PortXmitWait, "
            "no error, no fabric event, no job."
        ]
    link_rows = [_link_row(lk, errors) for lk in busiest]
    for row, lk in zip(link_rows, busiest, strict=True):
        row[1] = "host link" if lk.kind == "host" else "switch link"
    first, note = ranked(link_rows, FIRST_PAGE_ROWS)
    job_rows = [
        [
            j["job"],
            j["user"],
            j["command"],
            j["status"],
            str(j["world_size"]),
            _utc(j["started_ns"]),
            _utc(j["last_seen_ns"]),
            ", ".join(j["hosts"][:20]),
        ]
        for j in jobs
    ]
    job_table = Table(
        ["job", "user", "command", "status", "ranks", "started", "last seen", "hosts"],
        job_rows,
        [False, False, False, False, True, False, False, False],
        f"{others} job(s) of other users not named." if others else "",
    )
    summary = [
        ("Links (busiest first)", Table(_LINK_HEADINGS, first, _LINK_NUMERIC, note)),
        ("Jobs", job_table),
    ]
    names, points = loads
    highlighted = {lk.id: lk.peak_utilisation for lk in links}
    waiting = {lk.id: lk.xmit_wait_per_s for lk in links}
    sections = [
        Section(
            "Topology",
            "topology",
            f"The fabric as last discovered; the links of {where} "
            "coloured by peak utilisation over the window, haloed where congested (mean "
            "PortXmitWait).",
            [
                Figure(
                    figures.topology(
                        nodes,
                        all_links,
                        highlighted,
                        set(hosts or []),
                        waiting=waiting,
                        congested_from=congested_from,
                    ),
                    "the fabric",
                    520,
                )
            ],
        ),
        Section(
            "Fabric series",
            "fabric",
            "The busiest links over the window.",
            [Figure(figures.link_loads(names, points), "utilisation and PortXmitWait", 480)],
        ),
        Section(
            "Links",
            "links",
            "",
            [],
            [Table(_LINK_HEADINGS, link_rows[:SECTION_ROWS], _LINK_NUMERIC)],
        ),
        _events_section(events),
    ]
    keys = ("links", "topology", "fabric")
    evidence_rows = [list(EVIDENCE[k]) for k in keys] + [
        ["Jobs in the window", "measured", "the hosts and interval times their ranks reported"]
    ]
    progress(4, steps_total, "done")
    return Report(
        kind="window",
        title=f"Fabric window {_utc(from_ns)} – {_utc(to_ns)}",
        facts=facts,
        findings=findings[:MAX_FINDINGS],
        summary=summary,
        sections=sections,
        evidence=Table(["figure", "basis", "how"], evidence_rows),
        filename=_filename("window", f"{from_ns // 10**9}-{to_ns // 10**9}"),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )


def _event_text(event: dict[str, Any]) -> str:
    """A fabric event in words: "link down: host2[1] - leaf1[2] from ... (still open)"."""
    what = f"{event['kind'].replace('_', ' ')}: {event['subject']}"
    if event["end_ns"] is None:
        return f"{what} from {_utc(event['start_ns'])}, still open."
    if event["end_ns"] == event["start_ns"]:
        return f"{what} at {_utc(event['start_ns'])}."
    return f"{what} from {_utc(event['start_ns'])} to {_utc(event['end_ns'])}."


# ---- the incident report --------------------------------------------------------------------

#: Context shown around an incident: this much before its start and after its end, at least.
INCIDENT_CONTEXT_NS = 60 * 10**9


def incident_report(session: Session, incident_id: int, progress: Progress = no_progress,
                    congested_from: float = CONGESTED_WAIT_PER_S) -> Report:  # fmt: skip
    """The report of one incident (as GET /api/incidents/{id} answers it to the session's
    viewer: another user's job is "another job"): its links with their evidence series,
    its jobs by role with theirs, the topology with its links highlighted (haloed where
    their PortXmitWait reached `congested_from` ticks per second), the fabric events and
    the links' load over its time."""
    steps_total = 3
    progress(0, steps_total, "incident")
    inc = incident_answers.details(session, incident_id)
    end = inc.end_ns if inc.end_ns is not None else max(inc.updated_ns, inc.start_ns + 1)
    pad = max(INCIDENT_CONTEXT_NS, (end - inc.start_ns) // 2)
    lo, hi = max(0, inc.start_ns - pad), min(end + pad, LATEST_NS)
    progress(1, steps_total, "fabric over the incident's time")
    nodes, all_links = fabric.nodes(session), fabric.links(session)
    ids = [lk.id for lk in inc.links]
    by_id = {lk["id"]: lk for lk in all_links}
    loads = {
        x["id"]: x
        for x in fabric.window_loads(session, [by_id[i] for i in ids if i in by_id], lo, hi)
    }
    errors = _link_errors(session, all_links, ids, lo, hi)
    events, _ = history.events(session, lo, hi, None, None, SECTION_ROWS, None)
    events.sort(key=lambda e: (e["start_ns"], e["id"]))
    progress(2, steps_total, "figures and findings")
    visible = [m for m in inc.members if m.visible]
    facts = [
        ("Incident", f"{inc.id}: {inc.title}"),
        ("Kind and severity", f"{inc.kind}, {inc.severity}"),
        ("Status", "open" if inc.open else "ended"),
        ("Start", _utc(inc.start_ns)),
        ("End", "still open" if inc.end_ns is None else _utc(inc.end_ns)),
        ("Duration", _seconds(end - inc.start_ns) + (" so far" if inc.end_ns is None else "")),
        ("Detected", _utc(inc.detected_ns)),
        ("Signals", ", ".join(inc.signals)),
        ("Jobs", f"{len(inc.members)} ({len(visible)} of yours)"),
        ("Window of this report", f"{_utc(lo)} – {_utc(hi)}"),
    ]
    findings = [inc.summary + "."]
    link_rows = []
    names: dict[int, str] = {}
    points: dict[int, list[tuple[int, float | None, float]]] = {}
    highlighted: dict[int, float | None] = {}
    waiting: dict[int, float | None] = {}
    for lk in inc.links:
        name = link_label(lk.a, lk.b) if lk.a and lk.b else f"link {lk.id}"
        utils = [e["utilisation"] for e in lk.evidence if e.get("utilisation") is not None]
        waits = [e["xmit_wait_per_s"] for e in lk.evidence if e.get("xmit_wait_per_s") is not None]
        peak_util = max(utils) if utils else None
        highlighted[lk.id] = peak_util
        waiting[lk.id] = max(waits) if waits else None
        names[lk.id] = name
        points[lk.id] = [
            (e["t_ns"], e.get("utilisation"), e.get("xmit_wait_per_s") or 0.0)
            for e in lk.evidence
            if "t_ns" in e
        ]
        findings.append(
            f"Link {name}: {', '.join(lk.signals)}, {lk.peak:.1f}× its threshold at worst; "
            f"utilisation up to {_percent(peak_util)}, PortXmitWait up to "
            f"{max(waits) if waits else 0:,.0f} ticks/s."
        )
        load = loads.get(lk.id)
        link_rows.append(
            [
                name,
                ", ".join(lk.signals),
                f"{lk.peak:.2f}",
                _percent(peak_util),
                f"{max(waits):,.0f}" if waits else "?",
                _percent(load["utilisation"]) if load else "?",
                "?" if errors.get(lk.id) is None else f"{errors[lk.id]:,}",
            ]
        )
    job_rows = []
    site_rows: list[list[str]] = []
    per_byte: dict[str, list[tuple[int, float | None, float | None]]] = {}
    for m in inc.members:
        if not m.visible:
            findings.append(f"Another job (not yours) was the {m.role}.")
            job_rows.append(["another job", "", m.role, "", "", "", ""])
            continue
        onlink = "?" if m.link_bytes is None else format_bytes(m.link_bytes)
        findings.append(
            f"Job {m.job} ({m.user or '?'}) was the {m.role}"
            + (f": {', '.join(m.signals)}" if m.signals else "")
            + (f"; ranks most affected: {rank_ranges(m.ranks)}" if m.ranks else "")
            + f"; {onlink} on these links (routed)."
        )
        for signal, ev in m.evidence.items():
            factor = ev.get("peak_factor") if isinstance(ev, dict) else None
            waits_in = ev.get("waits_in") if isinstance(ev, dict) else None
            if factor:
                findings.append(
                    f"Job {m.job}: {signal.replace('_', ' ')}, time per byte up to "
                    f"{factor:.1f}× its own baseline"
                    + (f", most of it in {WAIT_WORDS[waits_in]}." if waits_in in WAIT_WORDS
                       else ".")
                )  # fmt: skip
            named = ev.get("ranks", []) if isinstance(ev, dict) else []
            findings += [f"Job {m.job}: {n['text']}." for n in named]
            steps = ev.get("series", []) if isinstance(ev, dict) else []
            per_byte[f"{m.job}: {signal}"] = [
                (s["t_ns"], s.get("per_byte_ns"), s.get("baseline_per_byte_ns"))
                for s in steps
                if "t_ns" in s
            ]
        for n, site in enumerate(m.callsites):
            findings.append(
                f"Job {m.job}: its time rose {'also' if n else 'most'} at {site.label} "
                f"({site.op}), "
                f"+{site.rise_ns_per_s / 1e9:.2f} s per second over its ranks "
                f"({site.share:.0%} of the rise)."
            )
            site_rows.append(
                [
                    m.job or "",
                    site.signal.replace("_", " "),
                    site.label,
                    site.op,
                    f"{site.calls:,}",
                    _seconds(site.time_ns),
                    f"{site.before_calls:,}",
                    _seconds(site.before_time_ns),
                    f"+{site.rise_ns_per_s / 1e9:.2f}",
                    f"{site.share:.0%}",
                    str(site.most_time_rank),
                ]
            )
        job_rows.append(
            [
                m.job or "",
                m.user or "",
                m.role,
                ", ".join(m.signals),
                rank_ranges(m.ranks),
                "; ".join(m.files[:5]),
                onlink,
            ]
        )
    summary = [
        (
            "Links",
            Table(
                [
                    "link",
                    "signals",
                    "peak (× threshold)",
                    "peak util.",
                    "peak PortXmitWait/s",
                    "mean util. (window)",
                    "errors (window)",
                ],
                link_rows,
                [False, False, True, True, True, True, True],
            ),
        ),
        (
            "Jobs",
            Table(
                ["job", "user", "role", "signals", "ranks", "files", "bytes on links"],
                job_rows,
                [False, False, False, False, False, False, True],
                "Roles: aggressor = most bytes on the links (likely cause); victim = "
                "its MPI or I/O time per byte rose; on link = crosses it.",
            ),
        ),
    ]
    if site_rows:
        headings = ["job", "signal", "call site", "op", "calls", "time", "calls before",
                    "time before", "rise (s/s)", "share", "most time there (rank)"]  # fmt: skip
        note = ("Per victim: the sites of its kind of waiting whose time per second rose "
                "during the signal against the window before it, summed over its ranks (the "
                "job's call-site table over those windows). The rank with the most time at a "
                "site is often one that waits there for a late one, not the late one.")  # fmt: skip
        numeric = [False] * 4 + [True] * 7
        summary.append(("Call sites whose time rose", Table(headings, site_rows, numeric, note)))
    sections = [
        Section(
            "Evidence: the links",
            "links",
            "Per sweep, as the detectors saw it.",
            [Figure(figures.link_loads(names, points), "utilisation and PortXmitWait", 480)],
        ),
        Section(
            "Evidence: the jobs",
            "jobs",
            "Time per byte of the jobs you may read, against their own baseline.",
            [Figure(figures.per_byte(per_byte), "ns per byte", 420)],
        ),
        Section(
            "Topology",
            "topology",
            "The fabric as last discovered; the incident's links "
            "coloured by their highest utilisation during it, haloed where congested "
            "(highest PortXmitWait).",
            [
                Figure(
                    figures.topology(
                        nodes,
                        all_links,
                        highlighted,
                        set(),
                        waiting=waiting,
                        congested_from=congested_from,
                    ),
                    "the fabric",
                    520,
                )
            ],
        ),
        _events_section(events),
    ]
    evidence = Table(
        ["figure", "basis", "how"],
        [
            [
                "Incident, signals, roles",
                "derived",
                "the detectors' rules on the stored series "
                "(thresholds held for N sweeps; time per byte against the job's own baseline)",
            ],
            list(EVIDENCE["links"]),
            [
                "Bytes of a job on the links",
                "routed",
                "the job's measured transfers placed on the "
                "links by the forwarding tables (server/traffic)",
            ],
            list(EVIDENCE["topology"]),
        ],
    )
    progress(3, steps_total, "done")
    return Report(
        kind="incident",
        title=f"Incident {inc.id}: {inc.title}",
        facts=facts,
        findings=findings[:MAX_FINDINGS],
        summary=summary,
        sections=sections,
        evidence=evidence,
        filename=_filename("incident", str(inc.id)),
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    )
