"""End to end: `stacklens up`, a real 4-rank Open MPI job under the hooks, the page in Chromium.

A person opening the dashboard sees the job in the jobs table and reads its exact
rank x rank byte counts in the matrix table; the page logs no console errors.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.conftest import free_port, mpi_env
from tests.hooks.patterns import p2p_pattern

RANKS = 4
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def stacklens_up(pg_url, tmp_path) -> Iterator[dict[str, str]]:
    """`stacklens up` against the test database on free ports; yields its settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_DATABASE_URL=pg_url,
        STACKLENS_STATE_DIR=str(tmp_path / "state"),
        STACKLENS_HTTP_PORT=str(free_port()),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INGEST_TOKEN="e2e-token",
        STACKLENS_REFRESH_MS="500",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens.cli", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{env['STACKLENS_HTTP_PORT']}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "stacklens up did not come up"
            time.sleep(0.1)
        yield {**env, "base": base}
    finally:
        proc.terminate()
        proc.wait(20)


def test_page_shows_the_job_and_its_matrix(stacklens_up, hook_library, examples_built, tmp_path):
    job = f"e2e-{uuid.uuid4().hex[:8]}"
    run_env = mpi_env(**{k: v for k, v in stacklens_up.items() if k.startswith("STACKLENS_")})
    run_env.update(STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="200")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacklens.cli",
            "run",
            "--",
            "mpirun",
            "-np",
            str(RANKS),
            str(examples_built / "p2p_pattern"),
        ],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page: Page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(stacklens_up["base"] + "/")

        row = page.locator("#jobs-table tr", has_text=job)
        expect(row).to_have_count(1, timeout=20_000)
        expect(row).to_contain_text("finished")
        expect(row.locator("td.ranks")).to_have_text(f"{RANKS} / {RANKS}")
        total = sum(b for b, _ in p2p_pattern(RANKS).values())
        expect(row.locator("td.bytes")).to_have_text(str(total))

        expect(page.locator("#matrix-title")).to_contain_text(job, timeout=20_000)
        cells = page.locator("#matrix-table tbody tr")
        expect(cells).to_have_count(RANKS * (RANKS - 1), timeout=20_000)
        shown = {}
        for i in range(cells.count()):
            cell = cells.nth(i)
            src, dst, nbytes, msgs = (
                int(cell.locator(f"td.{column}").inner_text())
                for column in ("src", "dst", "bytes", "messages")
            )
            shown[(src, dst)] = (nbytes, msgs)
        assert shown == p2p_pattern(RANKS)
        expect(page.locator("#matrix-heatmap .main-svg").first).to_be_visible()
        page.screenshot(path=str(tmp_path / "dashboard.png"))
        browser.close()
    assert errors == []
