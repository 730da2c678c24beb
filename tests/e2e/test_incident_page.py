"""End to end: an incident's own page (`/incidents/<id>`, the URL the alert webhook sends)
in Chromium, as alice, over alice's and bob's jobs, the small fabric with its spine link
congested at 4 % utilisation (tests/server/fabric_data.py CONGESTED) and a congestion
incident on it with bob's job the likely aggressor and alice's the victim
(tests/access/data.py): the page shows the incident, its link and alice's job, and of
bob's job only "another job"; its link leads to the Fabric page replaying the incident's
first sweep with the link's detail panel open and the link marked congested (not the idle
one), in playback and live, with the legend saying so; alice's job leads to her job page
over the incident's window, the report link to the incident's report; the Incidents
list's row opens the page; no console errors. The Incidents list reads whole at 1,400 px:
a long incident's sentence wraps in its row, every time is whole and no column needs a
sideways scroll."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.access.viewer import Access
from server.incidents import repository as incidents
from stacklens.db import make_engine
from stacklens.schema import Job
from stacklens_cli.site import create_site
from tests.access.data import (
    ALICE_JOB,
    BOB_JOB,
    BOB_NAMES,
    save_two_users_incident,
    send_two_users_jobs,
    token_for,
)
from tests.collector.test_ingest import T0
from tests.conftest import chromium_page, free_port, serving
from tests.server.fabric_data import CONGESTED, later_round, write_small_fabric


@pytest.fixture
def served(collector, pg_url) -> Iterator[dict]:
    """The API + dashboard (auth_mode=oidc) with the incident; alice's token."""
    send_two_users_jobs(collector)
    write_small_fabric(pg_url)
    later_round(pg_url, CONGESTED)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    incident = save_two_users_incident(engine)
    try:
        with serving(create_site(engine, api_base_url=base, refresh_ms=1000,
                                access=Access(mode="oidc")), port=port):  # fmt: skip
            yield {"base": base, "alice": token_for(engine, "alice"), "incident": incident}
    finally:
        engine.dispose()


def test_the_incident_page_shows_it_and_leads_to_its_job_link_and_report(served):
    base, incident = served["base"], served["incident"]
    start = T0 // 10**9 + 5
    with chromium_page() as (page, errors):
        page.set_extra_http_headers({"Authorization": f"Bearer {served['alice']}"})
        page.goto(f"{base}/incidents")
        row = page.locator("#inc-grid .ag-row", has_text="Congestion on spine1[1]").first
        expect(row).to_contain_text("major", timeout=20_000)
        row.locator(".ag-cell").nth(3).click()
        page.wait_for_url(f"{base}/incidents/{incident}", timeout=20_000)
        title = page.locator("#inc-title")
        expect(title).to_have_text(
            f"Incident {incident}: Congestion on spine1[1] – leaf1[3]; likely aggressor: "
            f"another job; victim: job {ALICE_JOB}",
            timeout=20_000,
        )
        expect(page.locator("#inc-facts")).to_have_text(
            "major · ended · 2023-11-14 22:13:25 UTC – 2023-11-14 22:13:26 UTC · 1 job hit, "
            "6.0 s lost · detected 2023-11-14 22:13:26 UTC"
        )
        jobs = page.locator("#inc-jobs")
        expect(jobs).to_contain_text("another job")
        expect(jobs).to_contain_text("rank 1")
        expect(jobs).to_contain_text("POSIX:/scratch/a/out.dat")
        expect(page.locator("#inc-evidence .main-svg").first).to_be_visible(timeout=20_000)
        shown = page.inner_text("body")
        assert [n for n in BOB_NAMES if n in shown] == []

        # the report: the incident's, as alice may see it
        report = page.locator("#inc-report-html").get_attribute("href")
        assert report == f"/api/reports/incidents/{incident}?format=html"
        answer = httpx.get(base + report, headers={"Authorization": f"Bearer {served['alice']}"},
                           timeout=60)  # fmt: skip
        assert answer.status_code == 200
        assert f"Incident {incident}: Congestion on spine1[1] – leaf1[3]" in answer.text

        # the link: the Fabric page over the incident's window, replaying its first sweep
        # (the one that ended at T0 + 6 s), the link's detail panel open, the link marked
        # congested at 4 % utilisation and host1's idle link not
        link = page.locator("#inc-links a").first
        expect(link).to_have_text("spine1[1] – leaf1[3]")
        expect(page.locator("#inc-links")).to_contain_text(
            "congestion; utilisation up to 4.0 %; PortXmitWait up to 5,000,000 ticks/s"
        )
        href = link.get_attribute("href") or ""
        query = parse_qs(urlsplit(href).query)
        assert query["from"] == [str(start - 30)] and query["to"] == [str(start + 1 + 30)]
        assert (query["at"], query["step"], query["focus"]) == ([str(start + 1)], ["1"],
                                                               ["link-1"])  # fmt: skip
        link.click()
        page.wait_for_url(f"{base}{href}", timeout=20_000)
        panel = page.locator("#fabric-panel-title")
        expect(panel).to_contain_text("spine1[1]", timeout=20_000)
        expect(panel).to_contain_text("leaf1[3]")
        expect(page.locator("#fabric-playback-shown")).to_contain_text(
            "replaying 2023-11-14 22:13:26 – 2023-11-14 22:13:27 UTC", timeout=20_000
        )
        assert _links_drawn(page) == CONGESTED_LOOK
        expect(page.locator("div.legend")).to_contain_text("congested: PortXmitWait ≥ 1,000,000")
        page.goto(f"{base}/fabric")  # live: the newest sweep is that one (long ago: stale)
        stale = {k: [v[0], v[1] + " (stale)"] for k, v in CONGESTED_LOOK.items() if k != "live"}
        assert _links_drawn(page) == {**stale, "live": True}

        # alice's job: her job page over the incident's window
        page.goto(f"{base}/incidents/{incident}")
        job = page.locator("#inc-jobs a.job-link")
        expect(job).to_have_text(ALICE_JOB, timeout=20_000)
        job.click()
        page.wait_for_url(
            f"{base}/jobs/{ALICE_JOB}?owner=alice&from={start - 30}&to={start + 1 + 30}",
            timeout=20_000,
        )
        expect(page.locator("#jv-title")).to_contain_text(f"Job {ALICE_JOB}", timeout=20_000)
        assert errors == [], "\n".join(errors)


#: The spine link congested (its halo) at 4 % utilisation; host1's link idle, no halo.
CONGESTED_LOOK = {
    "spine": [True, "4.0% (152.59 MiB/s), PortXmitWait 5.0 M ticks/s (congested)"],
    "host1": [False, "0.0% (0 B/s)"],
    "live": False,
}


def _links_drawn(page) -> dict:
    """Whether the graph marks the spine link and host1's link congested, and their
    titles; whether the graph shows the live state (no playback step)."""
    page.wait_for_function(
        "() => { const el = document.querySelector('#fabric-graph');"
        " const cy = el && el._cyreg && el._cyreg.cy;"
        " return cy && cy.edges('.congested').length > 0; }",
        timeout=20_000,
    )
    return page.evaluate(
        "() => { const cy = document.querySelector('#fabric-graph')._cyreg.cy;"
        " const look = (id) => { const e = cy.getElementById(id);"
        "   return [e.hasClass('congested'), e.data('title').split(': ').slice(1).join(': ')]; };"
        " return {spine: look('link-1'), host1: look('link-2'),"
        "         live: !new URLSearchParams(location.search).has('at')}; }"
    )


#: An incident with a long sentence, ended unobserved (its state the longest a row has).
LONG_TITLE = "Imbalance on rails leaf1 – spine1 (2 links): spine1[1] – leaf1[3] busiest"
LONG_SUMMARY = f"{LONG_TITLE}; likely aggressor: another job; victim: job {ALICE_JOB}"


def _save_long_incident(pg_url: str) -> None:
    """Beside the fixture's incident, an ended unobserved one with a long sentence, its
    jobs bob's (aggressor) and alice's (victim), from T0 + 30 s to T0 + 42 s."""
    engine = make_engine(pg_url)
    start, end = T0 + 30 * 10**9, T0 + 42 * 10**9
    try:
        with Session(engine) as session, session.begin():
            jobs = {key: job for key, job in session.execute(select(Job.job_key, Job.id))}
            row = {"key": f"imbalance:1:{start}", "kind": "imbalance", "severity": "minor",
                   "title": LONG_TITLE, "start_ns": start, "end_ns": end, "detected_ns": start,
                   "updated_ns": end, "link_ids": [], "signals": ["imbalance"], "lost_ns": 0,
                   "hit": 0, "unobserved_ns": end, "links": [],
                   "members": [{"role": "aggressor"}, {"role": "victim"}]}  # fmt: skip
            members: list[dict[str, Any]] = [
                {"slot": slot, "job_id": jobs[job], "role": role, "signals": [],
                 "ranks": [], "files": [], "link_bytes": None, "evidence": {}}
                for slot, (job, role) in enumerate(((BOB_JOB, "aggressor"), (ALICE_JOB, "victim")))
            ]  # fmt: skip
            incidents.save(session, row, members)
    finally:
        engine.dispose()


def test_the_incidents_list_reads_whole_at_1400_px(served, pg_url):
    """At a 1,400 px window (chromium_page's): the long sentence whole in its row (wrapped,
    not cut), every time whole (its date, and its clock time with its zone, each on one
    line), the grid no wider than its box (no sideways scroll: the End and Lost columns
    in sight), no console error or warning (AG Grid warns of a layout it does not
    support)."""
    _save_long_incident(pg_url)
    with chromium_page() as (page, errors):
        page.on("console", lambda m: errors.append(m.text) if m.type == "warning" else None)
        page.set_extra_http_headers({"Authorization": f"Bearer {served['alice']}"})
        page.goto(f"{served['base']}/incidents")
        row = page.locator("#inc-grid .ag-center-cols-container .ag-row", has_text=LONG_TITLE)
        expect(row.locator("[col-id=summary]")).to_have_text(LONG_SUMMARY, timeout=20_000)
        expect(row.locator("[col-id=state]")).to_have_text(
            "unobserved since 2023-11-14 22:14:02 UTC"
        )
        expect(row.locator("[col-id=end]")).to_have_text("2023-11-14 22:14:02 UTC")
        page.wait_for_timeout(500)  # the rows as tall as their lines (autoHeight)
        assert page.evaluate(CUT_OR_SPLIT) == []
        viewport = page.evaluate(
            "() => { const v = document.querySelector('#inc-grid .ag-center-cols-viewport');"
            " return [v.scrollWidth, v.clientWidth]; }"
        )
        assert viewport[0] <= viewport[1], viewport
        box = page.locator("#inc-grid").bounding_box()
        for column in ("summary", "end", "lost"):
            seen = row.locator(f"[col-id={column}]").bounding_box()
            assert box is not None and seen is not None
            assert box["x"] <= seen["x"] and seen["x"] + seen["width"] <= box["x"] + box["width"]
        assert errors == [], "\n".join(errors)


#: The incidents grid's cells whose text is cut (wider or taller than its box), and the
#: times split across lines (a date, or a clock time with its zone, on two lines).
CUT_OR_SPLIT = r"""() => {
    const faults = [];
    for (const cell of document.querySelectorAll('#inc-grid .ag-row .ag-cell')) {
        const id = cell.getAttribute('col-id');
        for (const el of [cell, ...cell.querySelectorAll('*')])
            if (el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1)
                faults.push(`cut: ${id}: ${cell.innerText}`);
        const texts = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        while (texts.nextNode()) {
            const node = texts.currentNode;
            for (const m of node.textContent.matchAll(/\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d UTC/g)) {
                const range = document.createRange();
                range.setStart(node, m.index);
                range.setEnd(node, m.index + m[0].length);
                const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
                if (lines.size > 1) faults.push(`split: ${id}: ${m[0]}`);
            }
        }
    }
    return [...new Set(faults)];
}"""


def test_an_unknown_incident_says_so(served):
    with chromium_page() as (page, errors):
        page.set_extra_http_headers({"Authorization": f"Bearer {served['alice']}"})
        page.goto(f"{served['base']}/incidents/{served['incident'] + 1}")
        expect(page.locator("#inc-status")).to_contain_text(
            f"unknown incident {served['incident'] + 1}", timeout=20_000
        )
        assert errors == [], "\n".join(errors)
