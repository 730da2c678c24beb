"""End to end: `stacklens demo` stages its incident (stacklens_cli/demo_incident.py) on the
simulated fabric with real MPI jobs under the hooks; the detectors find it within 2 sweeps
and name it correctly (congestion on the shared spine link, demo-checkpoint the likely
aggressor, demo-solver the victim, its rank 0 late and rank 1 waiting for it), major once
the solver has lost 5 s; a person sees the banner on every page, the incident on the
Incidents page and on its own page with its jobs, and its link marked congested on the
Fabric graph, with the legend saying what the mark means: live while the incident is open,
and replaying the incident's first sweep on the Fabric page the incident leads to; no
console errors; everything the demo started is gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import httpx
from playwright.sync_api import expect

from tests.conftest import chromium_page, free_port, leftover_processes

SUMMARY = "likely aggressor: job demo-checkpoint; victim: job demo-solver"
#: What the Fabric page's legend says a congested link looks like (the default threshold).
LEGEND = "congested: PortXmitWait ≥ 1,000,000 ticks/s"


def _open_incident(base: str, major: bool = True) -> dict | None:
    """The open congestion incident with its victim, once major (the solver has lost 5 s:
    STACKLENS_INCIDENT_MIN_S) unless not `major`, if there is one yet."""
    try:
        listed = httpx.get(f"{base}/api/incidents", params={"open": "true"}, timeout=3).json()
    except (httpx.HTTPError, ValueError):
        return None
    for incident in listed.get("incidents", []):
        if (
            incident["kind"] == "congestion"
            and SUMMARY in incident["summary"]
            and (incident["severity"] == "major" or not major)
        ):
            return incident
    return None


def _marked_congested(page, link: str) -> None:
    """Waits until the Fabric page's graph marks `link` (its element id) congested."""
    page.wait_for_function(
        "(id) => { const el = document.querySelector('#fabric-graph');"
        " const cy = el && el._cyreg && el._cyreg.cy;"
        " return !!cy && cy.getElementById(id).hasClass('congested'); }",
        arg=link, timeout=30_000,
    )  # fmt: skip


def test_the_demo_incident_is_detected_named_and_shown(tmp_path, hook_library, examples_built):
    state = tmp_path / "state"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_STATE_DIR=str(state),
        STACKLENS_HTTP_PORT=str(port),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_COLLECTOR_SOCKET=str(tmp_path / "ingest.sock"),  # this demo's own
    )
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "demo.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "stacklens_cli", "demo", "--for", "80"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        with chromium_page() as (page, errors):
            started = time.monotonic()
            opened = None
            while opened is None and time.monotonic() - started < 75:
                assert proc.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
                time.sleep(0.5)
                opened = _open_incident(base, major=False)
            assert opened is not None, (tmp_path / "demo.log").read_text()[-3000:]
            # live, while it is open: the Fabric page marks its link congested, the legend
            # says what the mark means
            (link_id,) = opened["link_ids"]
            page.goto(base + "/fabric")
            _marked_congested(page, f"link-{link_id}")
            assert "at" not in parse_qs(urlsplit(page.url).query)  # live, not replaying
            expect(page.locator("div.legend")).to_contain_text(LEGEND)
            incident = None
            while incident is None and time.monotonic() - started < 75:
                assert proc.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
                time.sleep(0.5)
                incident = _open_incident(base)
            assert incident is not None, (tmp_path / "demo.log").read_text()[-3000:]
            # detected at the end of the second congested sweep (sweeps every second)
            assert 1.5e9 <= incident["detected_ns"] - incident["start_ns"] <= 2.5e9
            assert incident["title"].startswith("Congestion on spine")
            assert "– leaf02[" in incident["title"]
            assert incident["hit"] >= 1 and incident["lost_ns"] >= 5 * 10**9
            page.goto(base + "/jobs")  # (the Overview also links to all incidents)
            banner = page.locator("#incident-banner")
            expect(banner).to_contain_text("open incident", timeout=15_000)
            expect(banner).to_contain_text(SUMMARY)
            page.get_by_role("link", name="all incidents").click()
            grid = page.locator("#inc-grid")
            expect(grid).to_contain_text(SUMMARY, timeout=15_000)
            expect(grid).to_contain_text("congestion")
            page.locator("#inc-grid .ag-row", has_text=SUMMARY).first.locator(
                ".ag-cell").nth(3).click()  # fmt: skip
            # its own page (the URL the webhook sends): its jobs and its link
            page.wait_for_url(f"{base}/incidents/{incident['id']}", timeout=15_000)
            jobs = page.locator("#inc-jobs")
            expect(jobs).to_contain_text("aggressor", timeout=15_000)
            expect(jobs).to_contain_text("demo-checkpoint")
            expect(jobs).to_contain_text("victim")
            expect(jobs).to_contain_text("mpi_slowdown")
            expect(page.locator("#inc-evidence .main-svg").first).to_be_visible(timeout=15_000)
            # its link: the Fabric page replaying the incident's first sweep, the link
            # congested, the legend saying what that means
            link = page.locator("#inc-links a").first
            expect(link).to_contain_text("– leaf02[")
            query = parse_qs(urlsplit(link.get_attribute("href") or "").query)
            assert query["focus"] == [f"link-{link_id}"] and "at" in query
            link.click()
            _marked_congested(page, f"link-{link_id}")
            expect(page.locator("#fabric-playback-shown")).to_contain_text("replaying")
            expect(page.locator("div.legend")).to_contain_text(LEGEND)
            assert errors == [], "\n".join(errors)
        detail = httpx.get(f"{base}/api/incidents/{incident['id']}", timeout=5).json()
        roles = {m["job"]: m["role"] for m in detail["members"]}
        assert roles == {"demo-checkpoint": "aggressor", "demo-solver": "victim"}
        # the solver's rank 0 arrives late at its collectives: it is named first, as late,
        # and rank 1 as waiting for it (not the other way round)
        (solver,) = [m for m in detail["members"] if m["job"] == "demo-solver"]
        named = solver["evidence"]["mpi_slowdown"]["ranks"]
        assert [(n["rank"], n["role"]) for n in named] == [(0, "late"), (1, "waiting")], named
        assert named[0]["text"].startswith("rank 0 arrives last at MPI_"), named
        assert solver["ranks"] == [0, 1]
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:  # as Ctrl-C would: the demo stops what it started
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    assert leftover_processes(str(state)) == []
