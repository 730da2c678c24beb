"""End to end: the report buttons of the job page and the fabric page in Chromium download
the server's report of what the page shows (the job page's run and window; the fabric
page's typed window), the same file `stacklens report` writes."""

from __future__ import annotations

import subprocess

from playwright.sync_api import expect

from tests.conftest import chromium_page
from tests.e2e.test_job_page import T, served  # noqa: F401 — the fixture

__all__ = ["served"]


def test_the_buttons_download_the_report_of_the_shown_view(served, tmp_path):  # noqa: F811
    with chromium_page() as (page, errors):
        page.goto(f"{served}/jobs/slow?from={T + 11}&to={T + 16}")
        expect(page.locator("#jv-title")).to_contain_text("Job slow — all runs", timeout=30_000)
        pdf = page.locator("#jv-report-pdf")
        expect(pdf).to_have_attribute(
            "href", f"/api/reports/jobs/slow?from={T + 11}&to={T + 16}&format=pdf"
        )
        with page.expect_download(timeout=120_000) as download:
            pdf.click()
        path = tmp_path / "job.pdf"
        download.value.save_as(path)
        assert download.value.suggested_filename == "stacklens-job-slow.pdf"
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
        assert "Job slow — all 1 run(s)" in text and "Rank 2 spent" in text

        page.goto(f"{served}/fabric")
        page.locator("#fabric-report-from").fill(str(T))
        page.locator("#fabric-report-to").fill(str(T + 30))
        page.locator("#fabric-report-to").press("Enter")
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
        assert errors == []
