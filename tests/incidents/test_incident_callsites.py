"""An incident names the call sites whose time rose (issue #31 point 5, issue #26 point 3):
late_site.c on 2 ranks meets in two MPI_Allreduce calls every iteration; rank 1 is 50 ms
late at the first all along, then for 8 iterations also 540 ms late at the second (the
line marked site:late). The incident service, over what the collector stored, opens an
MPI slowdown of that job whose only call site whose time rose is that line, with its
calls and time there during the slowdown and before it exactly the stored call-site
records', named by the API (linked to the job's call-site table), the incident page's
jobs table, the incident's report and the webhook's line and JSON."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from frontend import components
from server.incidents.detect import Thresholds
from stacklens.api_models import IncidentDetails
from stacklens.db import make_engine
from stacklens.schema import Rank
from tests.hooks import jobs
from tests.incidents.programs import build, line_of, tick_incident

S = 10**9
NORMAL, LATE = 60, 8
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=S)  # fmt: skip


def _seconds(ns: int) -> str:
    """An instant as the API's windows take it, exactly: epoch seconds with 9 decimals."""
    return f"{ns // S}.{ns % S:09d}"


def _texts(node) -> list[str]:
    """Every string in a Dash component tree."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list | tuple):
        return [t for n in node for t in _texts(n)]
    children = getattr(node, "children", None)
    return [] if children is None else _texts(children)


def _hrefs(node) -> list[str]:
    """Every href in a Dash component tree."""
    if isinstance(node, list | tuple):
        return [h for n in node for h in _hrefs(n)]
    found = [node.href] if getattr(node, "href", None) else []
    children = getattr(node, "children", None)
    return found + ([] if children is None or isinstance(children, str) else _hrefs(children))


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_an_mpi_slowdown_names_the_line_its_rank_came_late_to(
    tmp_path: Path, collector, pg_url, api_client, mpi: str
) -> None:
    program = build("late_site.c", mpi, tmp_path)
    job = f"late-{uuid.uuid4().hex[:8]}"
    done = jobs.run_job(collector, mpi, [str(program), str(tmp_path), str(NORMAL), str(LATE)],
                        job, ranks=2, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    late_from = int((tmp_path / "late_from").read_text())
    ticked = tick_incident(pg_url, job, TH)
    incident, messages, last = ticked.incident, ticked.messages, ticked.last_ns
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            first = session.scalar(select(func.min(Rank.first_seen_ns))
                                   .where(Rank.job_id == ticked.job_id))  # fmt: skip
    finally:
        engine.dispose()
    assert incident.kind == "mpi_slowdown" and incident.link_ids == [] and first is not None
    assert late_from - S < incident.start_ns < late_from + LATE * S

    late_line, steady_line = line_of("late_site.c", "late"), line_of("late_site.c", "steady")
    answer = api_client.get(f"/api/incidents/{incident.id}").json()
    (member,) = answer["members"]
    assert (member["job"], member["role"], member["signals"]) == (job, "victim", ["mpi_slowdown"])
    sites = [(s["label"], s["op"], s["layer"], s["signal"]) for s in member["callsites"]]
    assert sites == [(f"late_site.c:{late_line}", "MPI_Allreduce", "mpi", "mpi_slowdown")]
    (site,) = member["callsites"]
    # its calls and time during and before are the job's call-site table's over those windows
    during = api_client.get(f"/api/jobs/{job}/callsites", params={
        "from": _seconds(incident.start_ns), "to": _seconds(last)}).json()["sites"]  # fmt: skip
    before = api_client.get(f"/api/jobs/{job}/callsites", params={
        "from": _seconds(first), "to": _seconds(incident.start_ns)}).json()["sites"]  # fmt: skip
    at = {s["label"]: s for s in during}
    was = {s["label"]: s for s in before}
    label = f"late_site.c:{late_line}"
    assert (site["key"], site["calls"], site["time_ns"]) == (
        at[label]["key"], at[label]["calls"], at[label]["time_ns"])  # fmt: skip
    assert (site["before_calls"], site["before_time_ns"]) == (
        was[label]["calls"], was[label]["time_ns"])  # fmt: skip
    # rank 0 waits there for rank 1's 540 ms: the rank with the most time there
    assert site["most_time_rank"] == 0 and site["share"] >= 0.9
    # the steady site's time per second did not rise: it is not named
    steady = f"late_site.c:{steady_line}"
    assert steady in at and steady in was
    assert at[steady]["time_ns"] / (last - incident.start_ns) < (
        was[steady]["time_ns"] / (incident.start_ns - first))  # fmt: skip

    # the incident page's jobs table links the site to the job's call-site table
    table = components.incident_jobs(IncidentDetails.model_validate(answer))
    shown = [t for t in _texts(table) if t.startswith(f"late_site.c:{late_line} ")]
    assert shown == [
        f"late_site.c:{late_line} MPI_Allreduce (+{site['rise_ns_per_s'] / 1e9:.2f} s/s)"
    ]
    job_href = components.incident_job_href(IncidentDetails.model_validate(answer), job,
                                            member["user"])  # fmt: skip
    assert f"{job_href}#card-callsites" in _hrefs(table)
    # the incident's report says it in its findings and lists it in its call-site table
    report = api_client.get(f"/api/reports/incidents/{incident.id}", params={"format": "html"})
    assert report.status_code == 200, report.text
    rise = f"+{site['rise_ns_per_s'] / 1e9:.2f}"
    assert (f"Job {job}: its time rose most at {label} (MPI_Allreduce), {rise} s per second "
            f"over its ranks ({site['share']:.0%} of the rise).") in report.text  # fmt: skip
    assert "Call sites whose time rose" in report.text and "most time there (rank)" in report.text
    assert f"<td>{label}</td><td>MPI_Allreduce</td>" in report.text
    assert f'<td class="n">{rise}</td>' in report.text
    # the webhook: its line names the site, its JSON lists it with the call sites' URL
    (sent,) = messages
    assert f"victim: job {job} at late_site.c:{late_line} (MPI_Allreduce)" in sent["text"]
    (sent_job,) = sent["incident"]["jobs"]
    assert [s["label"] for s in sent_job["callsites"]] == [label]
    assert sent_job["callsites_url"] == f"http://sl.example{job_href}#card-callsites"
