"""A warning in the browser's console is a failure: the Fabric page (a real fabric from
the real FabricStore, the real API and dashboard, Chromium) draws its graph and links table
without one (it had AG Grid's "getRowId must return a string" and Cytoscape's "custom wheel
sensitivity")."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

from playwright.sync_api import expect

from tests.conftest import CHROMIUM_ARGS
from tests.e2e.test_fabric_page import _drawn, served  # noqa: F401 (fixture)
from tests.server.fabric_data import write_small_fabric


@contextlib.contextmanager
def watched_page() -> Iterator[tuple]:
    """A Chromium page and the list of every console warning and error it logs."""
    from playwright.sync_api import sync_playwright

    said: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: said.append(f"{m.type}: {m.text}")
                if m.type in ("warning", "error") else None)  # fmt: skip
        page.on("pageerror", lambda e: said.append(f"pageerror: {e}"))
        yield page, said
        browser.close()


def test_the_fabric_page_logs_no_warning(pg_url, served):  # noqa: F811
    write_small_fabric(pg_url)
    with watched_page() as (page, said):
        page.goto(served + "/fabric")
        expect(page.locator("#fabric-links-caption")).to_contain_text(
            "links 1–3 of 3", timeout=30_000
        )
        _drawn(page, 3)
        page.locator("#fabric-graph").hover()
        page.mouse.wheel(0, -200)  # a person zooms the graph
        page.wait_for_timeout(1000)
    assert said == []


def test_jobs_is_the_jobs_list(served):  # noqa: F811
    """`/jobs` (where the job pages, /jobs/J, live) is the Jobs list, not a 404 (and `/` the
    Overview)."""
    import httpx

    answer = httpx.get(served + "/jobs")
    assert answer.status_code == 200
    assert "Jobs — stacklens" in answer.text
