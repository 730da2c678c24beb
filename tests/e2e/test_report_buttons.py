"""End to end: the report buttons of the job page, the fabric page and the incidents page in
Chromium download the server's report of what the page shows (the job page's run and
window; the fabric page's typed window; the incident shown), the same file `stacklens
report` writes."""

from __future__ import annotations

import re
import subprocess

from playwright.sync_api import expect
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.incidents import repository as incidents
from stacklens.db import make_engine
from stacklens.schema import Job
from tests.conftest import chromium_page
from tests.e2e.test_job_page import T, served  # noqa: F401 — the fixture

__all__ = ["served"]


def _incident(url: str) -> int:
    """An ended incident whose victim is the job `slow` (no link: this test has no fabric)."""
    engine = make_engine(url)
    try:
        with Session(engine) as session, session.begin():
            job = session.scalars(select(Job.id).where(Job.job_key == "slow")).one()
            row = {"key": "mpi_slowdown:buttons", "kind": "mpi_slowdown", "severity": "minor",
                   "title": "MPI slowdown of job slow", "start_ns": (T + 10) * 10**9,
                   "end_ns": (T + 15) * 10**9, "detected_ns": (T + 12) * 10**9,
                   "updated_ns": (T + 15) * 10**9, "link_ids": [], "signals": ["mpi_slowdown"],
                   "links": [], "members": [{"role": "victim"}]}  # fmt: skip
            member = {"slot": 0, "job_id": job, "role": "victim", "signals": ["mpi_slowdown"],
                      "ranks": [2], "files": [], "link_bytes": None, "evidence": {}}  # fmt: skip
            return incidents.save(session, row, [member])
    finally:
        engine.dispose()


def test_the_buttons_download_the_report_of_the_shown_view(served, pg_url, tmp_path):  # noqa: F811
    incident = _incident(pg_url)
    with chromium_page() as (page, errors):
        # a console warning is a failure too (chromium_page collects the errors)
        page.on("console", lambda m: errors.append(f"warning: {m.text}")
                if m.type == "warning" else None)  # fmt: skip
        page.goto(f"{served}/jobs/slow?from={T + 11}&to={T + 16}")
        expect(page.locator("#jv-title")).to_contain_text("Job slow — all runs", timeout=30_000)
        pdf = page.locator("#jv-report-pdf")
        expect(pdf).to_have_attribute(
            "href", f"/api/reports/jobs/slow?from={T + 11}&to={T + 16}&format=pdf"
        )
        # While it builds, the page says so with the server's stages (issue #29 point 3):
        # every stage line the page showed, in order, read as it changed.
        page.evaluate(
            r"""() => { window.seenStages = [];
                new MutationObserver((records) => { for (const r of records) {
                    if (!r.target.classList || !r.target.classList.contains('report-progress'))
                        continue;
                    for (const n of r.addedNodes) {
                        if (n.nodeType !== Node.TEXT_NODE) continue;
                        const text = n.textContent.replace(/ \(\d+ s\)$/, '');
                        if (window.seenStages.at(-1) !== text) window.seenStages.push(text);
                    }
                } }).observe(document.body, {subtree: true, childList: true}); }"""
        )
        with page.expect_download(timeout=120_000) as download:
            pdf.click()
            expect(page.locator(".report-progress")).to_contain_text("Building the Report (PDF)…")
        progress = page.locator(".report-progress")
        expect(progress).to_contain_text("Report (PDF): ready in ")
        expect(progress).to_contain_text("s — stacklens-job-slow.pdf")
        stages = page.evaluate("window.seenStages")
        # the builder's stages, each as the server streamed it, then the rendering
        building = [s.removeprefix("Building the Report (PDF)… ") for s in stages
                    if s.startswith("Building")]  # fmt: skip
        assert building[0] == "starting"
        assert [s for s in building if s != "starting"] == [
            "0/7 job and runs", "1/7 profile of the ranks",
            "2/7 matrix, operations, collectives, sizes, I/O, ranks",
            "3/7 placement on the fabric", "4/7 fabric series", "5/7 figures and findings",
            "6/7 done", "6/7 rendering pdf",
        ]  # fmt: skip
        path = tmp_path / "job.pdf"
        download.value.save_as(path)
        assert download.value.suggested_filename == "stacklens-job-slow.pdf"
        # the finished file stays linked beside the buttons, the same bytes
        kept = progress.locator("a.report-file")
        expect(kept).to_have_text("stacklens-job-slow.pdf")
        assert kept.get_attribute("download") == "stacklens-job-slow.pdf"
        with page.expect_download(timeout=30_000) as again:
            kept.click()
        assert again.value.path().read_bytes() == path.read_bytes()
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        words = " ".join(text.split())  # the PDF's lines joined
        assert "Job slow — all 1 run(s)" in words
        assert "Rank 2 arrives last at MPI_Allreduce" in words  # the late rank, named first

        page.goto(f"{served}/fabric?from={T}&to={T + 30}")  # the report of the page's window
        html = page.locator("#fabric-report-html")
        expect(html).to_have_attribute(
            "href", f"/api/reports/window?from={T}&to={T + 30}&format=html", timeout=20_000
        )
        with page.expect_download(timeout=120_000) as download:
            html.click()
        path = tmp_path / "window.html"
        download.value.save_as(path)
        assert "Fabric window 2023-11-14 22:14:00 UTC – 2023-11-14 22:14:30 UTC" in (
            path.read_text()
        )

        page.goto(f"{served}/incidents")
        row = page.locator("#inc-grid .ag-row", has_text="MPI slowdown of job slow").first
        row.locator(".ag-cell").nth(3).click()
        html = page.locator("#inc-report-html")
        expect(html).to_have_attribute(
            "href", f"/api/reports/incidents/{incident}?format=html", timeout=20_000
        )
        expect(page.locator("#inc-report-pdf")).to_have_attribute(
            "href", re.compile(rf"^/api/reports/incidents/{incident}\?format=pdf$")
        )
        with page.expect_download(timeout=120_000) as download:
            html.click()
        path = tmp_path / "incident.html"
        download.value.save_as(path)
        text = path.read_text()
        assert f"Incident {incident}: MPI slowdown of job slow" in text
        assert (
            "Job slow (" in text
            and ") was the victim: mpi_slowdown; ranks most affected: 2" in text
        )
        assert errors == []
