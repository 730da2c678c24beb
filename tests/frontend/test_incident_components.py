"""The incidents' pure frontend parts (frontend/components.py, presentation/figures.py): the
grid rows, the banner (only while incidents are open), an incident page's facts, its links
to the Fabric page at its time and its jobs table (the job, ranks and files linked to the
job's page over the incident's window; another user's job as "another job", with nothing
to follow), and the evidence figure's traces and axes."""

from __future__ import annotations

from dash import html

from frontend import components
from presentation import figures
from stacklens.api_models import IncidentDetails, IncidentList

T0 = 1_800_000_000 * 10**9
SUMMARY = "Congestion on spine01[5] – leaf02[9]; likely aggressor: another job; victim: job a|b"


def _summary(**extra: object) -> dict:
    return {"id": 3, "kind": "congestion", "severity": "major", "title": "Congestion on "
            "spine01[5] – leaf02[9]", "summary": SUMMARY, "open": True, "start_ns": T0,
            "end_ns": None, "detected_ns": T0 + 2 * 10**9, "updated_ns": T0, "unobserved_ns": None,
            "lost_ns": 6 * 10**9, "hit": 1, "signals": ["congestion", "mpi_slowdown"],
            "link_ids": [39], "jobs": 2, **extra}  # fmt: skip


def _list(*rows: dict) -> IncidentList:
    return IncidentList.model_validate(
        {"incidents": list(rows), "page": {"total": len(rows), "limit": 1, "next_cursor": None}}
    )


def test_rows_and_banner():
    listed = _list(_summary(), _summary(id=2, open=False, end_ns=T0 + 9 * 10**9, jobs=0),
                   _summary(id=1, open=False, end_ns=T0 + 4 * 10**9, hit=0, lost_ns=0,
                            unobserved_ns=T0 + 4 * 10**9))  # fmt: skip
    assert components.incident_rows(listed) == [
        {"id": 3, "severity": "major", "kind": "congestion", "summary": SUMMARY,
         "state": "open", "start": "2027-01-15 08:00:00 UTC", "end": "", "jobs": 2,
         "lost": 6.0},
        {"id": 2, "severity": "major", "kind": "congestion", "summary": SUMMARY,
         "state": "ended", "start": "2027-01-15 08:00:00 UTC",
         "end": "2027-01-15 08:00:09 UTC", "jobs": 0, "lost": 6.0},
        {"id": 1, "severity": "major", "kind": "congestion", "summary": SUMMARY,
         "state": "unobserved since 2027-01-15 08:00:04 UTC", "start": "2027-01-15 08:00:00 UTC",
         "end": "2027-01-15 08:00:04 UTC", "jobs": 2, "lost": 0.0},
    ]  # fmt: skip
    assert components.INCIDENT_COLUMNS[0]["headerName"] == "Id"  # a reference, not a count
    (banner,) = components.incident_banner(_list(_summary()))
    assert isinstance(banner, html.Div) and banner.role == "alert"
    assert banner.className == "notice notice-error incident-banner severity-major"
    assert banner.children[0].children == "1 open incident"
    assert banner.children[1] == f" — major: {SUMMARY} "
    assert (banner.children[2].children, banner.children[2].href) == (
        "see incident 3", "/incidents/3")  # fmt: skip
    assert (banner.children[4].children, banner.children[4].href) == (
        "all incidents", "/incidents")  # fmt: skip
    assert components.incident_banner(_list()) == []


def _details() -> IncidentDetails:
    end = {"guid": "0x0000000000000001", "port": 5, "name": "spine01"}
    member = {"role": "victim", "visible": True, "job": "a|b", "user": "alice",
              "label": "job a|b", "signals": ["mpi_slowdown"], "ranks": [1, 0],
              "files": ["MPI-IO:/x_y.h5"], "link_bytes": 3 << 20,
              "evidence": {"mpi_slowdown": {"baseline_per_byte_ns": 2.0,
                                            "lost_ns": 1_500_000_000, "series": [
                  {"t_ns": T0, "per_byte_ns": 2.0}, {"t_ns": T0 + 10**9, "per_byte_ns": 10.0},
                  {"t_ns": T0 + 2 * 10**9, "per_byte_ns": None}],
                  "ranks": [{"rank": 1, "role": "late", "op": "MPI_Bcast",
                             "text": "."}]}},
              "callsites": [{"signal": "mpi_slowdown", "key": "mpi:MPI_Bcast@ab+1f",
                             "label": "solver.c:212", "layer": "mpi", "op": "MPI_Bcast",
                             "time_ns": 3 * 10**9, "calls": 20, "before_time_ns": 10**8,
                             "before_calls": 60, "rise_ns_per_s": 1_450_000_000,
                             "share": 1.0, "most_time_rank": 0}]}  # fmt: skip
    hidden = {"role": "aggressor", "visible": False, "job": None, "user": None,
              "label": "another job", "signals": [], "ranks": [], "files": [],
              "link_bytes": None, "evidence": {}, "callsites": []}  # fmt: skip
    link = {"id": 39, "a": end, "b": {**end, "name": "leaf02", "port": 9},
            "capacity_bytes_per_s": 4, "signals": ["congestion"], "peak": 5.0,
            "evidence": [{"t_ns": T0, "utilisation": 0.1, "xmit_wait_per_s": 5e6},
                         {"t_ns": T0 + 2 * 10**9, "utilisation": 0.05,
                          "xmit_wait_per_s": 4e6}]}  # fmt: skip
    return IncidentDetails.model_validate({**_summary(), "links": [link],
                                           "members": [hidden, member]})  # fmt: skip


def _texts(component: object) -> list:
    """The text and links (text, href) of a component, in order, as a reader meets them."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, list | tuple):
        return [t for c in component for t in _texts(c)]
    children = getattr(component, "children", None)
    href = getattr(component, "href", None)
    if href is not None:
        return [(children, href)]
    return _texts(children) if children is not None else []


def test_the_page_facts_and_its_links_to_the_fabric_page_at_its_time():
    incident = _details()
    assert components.incident_facts(incident) == (
        "major · open · 2027-01-15 08:00:00 UTC – now · 1 job hit, 6.0 s lost · detected "
        "2027-01-15 08:00:02 UTC")  # fmt: skip
    ended = IncidentDetails.model_validate(
        {**incident.model_dump(), "open": False, "end_ns": T0 + 20 * 10**9 + 1,
         "unobserved_ns": T0 + 20 * 10**9 + 1, "hit": 0})  # fmt: skip
    assert components.incident_facts(ended) == (
        "major · unobserved since 2027-01-15 08:00:20 UTC · 2027-01-15 08:00:00 UTC – "
        "2027-01-15 08:00:20 UTC · no job hit · detected 2027-01-15 08:00:02 UTC")  # fmt: skip
    # 30 s around it (an open one: up to now); its first sweep after its start (2 s apart:
    # the step that shows the sweep ending at T0 + 2 s); the link
    at = T0 // 10**9
    assert _texts(components.incident_links(incident)) == [
        ("spine01[5] – leaf02[9]", f"/fabric?from={at - 30}&at={at + 2}&step=2&focus=link-39"),
        ": congestion; utilisation up to 10.0 %; PortXmitWait up to 5,000,000 ticks/s",
    ]
    assert _texts(components.incident_links(ended))[0][1] == (
        f"/fabric?from={at - 30}&to={at + 21 + 30}&at={at + 2}&step=2&focus=link-39"
    )


def test_the_jobs_table_links_the_job_its_ranks_and_files_and_names_no_other_job():
    """The late rank is marked so (the incident's evidence names it); the call site whose
    time rose links to the job page's call-site table over the incident's window."""
    table = components.incident_jobs(_details())
    head, hidden, mine = table.children
    assert _texts(head) == ["Role", "Job", "User", "Signals", "Lost", "Bytes on the links",
                            "Ranks", "Files", "Call sites whose time rose", "Report"]  # fmt: skip
    assert _texts(hidden) == ["aggressor", "another job", *[""] * 8]  # nothing to follow
    job = f"/jobs/a%7Cb?owner=alice&from={T0 // 10**9 - 30}"  # the job's page at its window
    report = f"/api/reports/jobs/a%7Cb?owner=alice&from={T0 // 10**9 - 30}&format=html"
    assert _texts(mine) == [
        "victim", ("a|b", job), "alice", "mpi_slowdown", "1.5 s", "3.00 MiB",
        ("rank 1 (late)", job), ", ", ("rank 0", job), ("MPI-IO:/x_y.h5", job),
        ("solver.c:212 MPI_Bcast (+1.45 s/s)", f"{job}#card-callsites"),
        ("⤓ HTML", report),
    ]  # fmt: skip


def test_evidence_figure():
    fig = figures.incident_evidence(_details())
    traces = [(t.name, list(t.y)) for t in fig.data]
    assert traces == [
        ("spine01[5] – leaf02[9] utilisation", [0.1, 0.05]),
        ("spine01[5] – leaf02[9] xmit-wait/s", [5e6, 4e6]),
        ("job a|b mpi_slowdown", [1.0, 5.0]),  # over the baseline; the unknown step left out
    ]
    # the legend above the plots, under the title: below them it covered the time axis'
    # title ("time (UTC)")
    legend = fig.layout.legend
    assert (legend.orientation, legend.y, legend.yanchor) == ("h", 1.02, "bottom")
    assert fig.layout.margin.t == 76 and fig.layout.title.y == 0.98
    # utilisation on 0-100 %; PortXmitWait (up to 5,000,000 ticks/s) in round ticks on the
    # same grid lines: 5 steps of 1M, the left axis' every 20 %
    left, right = fig.layout.yaxis, fig.layout.yaxis2
    assert (left.range, left.tickvals) == ((0, 1.0), (0, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert (right.range, right.tickvals) == ((0, 5e6), (0, 1e6, 2e6, 3e6, 4e6, 5e6))
    # both panels on one time axis over the series' span, no range of the figure's own: the
    # window is the series', the incident's as the server keeps it (a job's steps during
    # it, as the links' sweeps: tests/server/test_incidents.py)
    assert fig.layout.xaxis.matches == "x2" and fig.layout.xaxis2.range is None


def test_the_xmit_wait_ticks_are_round_and_on_the_utilisation_grid():
    """2, 4 or 5 steps of 1, 2 or 5 times a power of ten, the lowest top that reaches the
    data (of two, the more steps); not Plotly's ticks at the left axis' heights (0.62M,
    3.03M, 5.43M for a peak of 5.43M)."""
    assert figures.aligned_ticks(5.43e6) == [0, 2e6, 4e6, 6e6, 8e6]
    assert figures.aligned_ticks(4e6) == [0, 1e6, 2e6, 3e6, 4e6]
    assert figures.aligned_ticks(1e6) == [0, 2e5, 4e5, 6e5, 8e5, 1e6]
    assert figures.aligned_ticks(720) == [0, 200, 400, 600, 800]
    assert figures.aligned_ticks(0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]  # no data
    # a peak of 5.43M: 4 steps, the left axis' ticks every 25 %; a utilisation over 100 %
    # (sweeps' jitter) stretches both axes alike, their ticks still on the same lines
    link = _details().links[0]
    hot = link.model_copy(update={"evidence": [
        {"t_ns": T0, "utilisation": 1.1, "xmit_wait_per_s": 5.43e6}]})  # fmt: skip
    fig = figures.incident_evidence(_details().model_copy(update={"links": [hot]}))
    left, right = fig.layout.yaxis, fig.layout.yaxis2
    assert (left.range, left.tickvals) == ((0, 1.1), (0, 0.25, 0.5, 0.75, 1.0))
    assert (right.range, right.tickvals) == ((0, 8e6 * 1.1), (0, 2e6, 4e6, 6e6, 8e6))


def test_the_evidence_figure_draws_only_the_panels_it_has_data_for():
    """An MPI slowdown with no link (the demo's checkpoint victim): the jobs' panel alone,
    with its axis titles, not an empty links panel of 0-100 % and 0-1 ticks/s above it;
    nothing stored at all: a sentence, no axes."""
    jobs_only = figures.incident_evidence(_details().model_copy(update={"links": []}))
    assert [t.name for t in jobs_only.data] == ["job a|b mpi_slowdown"]
    assert jobs_only.layout.title.text == "Evidence: the jobs' time per byte"
    assert jobs_only.layout.yaxis.title.text == "time per byte / baseline"
    assert jobs_only.layout.xaxis.title.text == "time (UTC)"
    assert "yaxis2" not in jobs_only.layout and jobs_only.layout.height == 320
    links_only = figures.incident_evidence(_details().model_copy(update={"members": []}))
    assert [t.name for t in links_only.data] == ["spine01[5] – leaf02[9] utilisation",
                                                 "spine01[5] – leaf02[9] xmit-wait/s"]  # fmt: skip
    assert links_only.layout.title.text == "Evidence: the links"
    assert links_only.layout.xaxis.title.text == "time (UTC)"
    empty = figures.incident_evidence(_details().model_copy(update={"links": [], "members": []}))
    assert empty.data == ()
    assert [a.text for a in empty.layout.annotations] == [
        "No evidence series stored for this incident."
    ]
