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

from tests.conftest import free_port, mpi_env, stacklens_run
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


def _matrix_rows(page: Page) -> dict[tuple[int, int], tuple[int, int]]:
    """The matrix table as a person reads it: (source, destination) -> (bytes, messages)."""
    shown = {}
    rows = page.locator("#matrix-table tbody tr")
    for i in range(rows.count()):
        # Columns: source rank, destination rank, bytes, sent (human), messages.
        texts = rows.nth(i).locator("td").all_inner_texts()
        src, dst, nbytes, msgs = (int(texts[c].strip()) for c in (0, 1, 2, 4))
        shown[(src, dst)] = (nbytes, msgs)
    return shown


@pytest.fixture
def browser_page() -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page and the list its console errors are collected into."""
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page, errors
        browser.close()


def test_page_follows_a_running_job_live(stacklens_up, browser_page, examples_built):
    """Open the page on an empty database, then start a job: it appears without a reload."""
    page, errors = browser_page
    page.goto(stacklens_up["base"] + "/")
    expect(page.locator("#status-message")).to_contain_text("No jobs yet", timeout=20_000)
    expect(page.locator("#status-message")).to_contain_text("stacklens run -- mpirun")
    expect(page.locator("#matrix-section")).to_be_hidden()

    job = f"live-{uuid.uuid4().hex[:8]}"
    iterations, size = 25, 4096
    run_env = mpi_env(**{k: v for k, v in stacklens_up.items() if k.startswith("STACKLENS_")})
    run_env.update(STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="200")
    program = [str(examples_built / "ring_allreduce"), str(iterations), str(size), "200"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens.cli", "run", "--", "mpirun", "-np", str(RANKS), *program],
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        row = page.locator("#jobs-table tr", has_text=job)
        expect(row).to_contain_text("running", timeout=20_000)
        assert proc.poll() is None, "the job ended before the page showed it running"
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    expect(row).to_contain_text("finished", timeout=20_000)
    expected = {(r, (r + 1) % RANKS): (iterations * (size + r), iterations) for r in range(RANKS)}
    expect(page.locator("#matrix-table tbody tr")).to_have_count(RANKS, timeout=20_000)
    expect(row.locator("td.bytes")).to_have_text(str(sum(b for b, _ in expected.values())))
    assert _matrix_rows(page) == expected
    assert errors == []


def test_unreachable_api_is_reported_on_the_page(browser_page):
    import threading

    import uvicorn
    from a2wsgi import WSGIMiddleware
    from fastapi import FastAPI

    from frontend.app import create_dash_app

    dead = f"http://127.0.0.1:{free_port()}"
    app = FastAPI()
    app.mount("/", WSGIMiddleware(create_dash_app(dead, refresh_ms=500).server))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        page, errors = browser_page
        page.goto(f"http://127.0.0.1:{port}/")
        message = page.locator("#status-message")
        expect(message).to_contain_text("stacklens server unreachable", timeout=20_000)
        expect(message).to_contain_text(f"{dead}/api/jobs")
        assert errors == []
    finally:
        server.should_exit = True
        thread.join(10)


def test_page_shows_the_job_and_its_matrix(
    stacklens_up, hook_library, examples_built, tmp_path, browser_page
):
    job = f"e2e-{uuid.uuid4().hex[:8]}"
    run_env = mpi_env(**{k: v for k, v in stacklens_up.items() if k.startswith("STACKLENS_")})
    run_env.update(STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="200")
    result = stacklens_run(
        ["mpirun", "-np", str(RANKS), str(examples_built / "p2p_pattern")], run_env, timeout=120
    )
    assert result.returncode == 0, result.stderr

    page, errors = browser_page
    page.goto(stacklens_up["base"] + "/")

    row = page.locator("#jobs-table tr", has_text=job)
    expect(row).to_have_count(1, timeout=20_000)
    expect(row).to_contain_text("finished")
    expect(row.locator("td.ranks")).to_have_text(f"{RANKS} / {RANKS}")
    total = sum(b for b, _ in p2p_pattern(RANKS).values())
    expect(row.locator("td.bytes")).to_have_text(str(total))

    expect(page.locator("#matrix-title")).to_contain_text(job, timeout=20_000)
    expect(page.locator("#matrix-table tbody tr")).to_have_count(
        RANKS * (RANKS - 1), timeout=20_000
    )
    assert _matrix_rows(page) == p2p_pattern(RANKS)
    expect(page.locator("#matrix-heatmap .main-svg").first).to_be_visible()
    page.screenshot(path=str(tmp_path / "dashboard.png"))
    assert errors == []
