"""The Jobs page in Chromium at scale and in trouble (#12 points 1, 2, 6; #18 point 6).

A real collector fills the real database; the API and the dashboard run as `stacklens up`
serves them (create_app, uvicorn); the dashboard reads the API through a forwarding proxy
that the slow-server test slows down. Each test checks what a person sees, and that the
page logs no console error: a job with 5,000 files and a list of 20,000 jobs show their
data and keep refreshing; a search finds one job among 2,000, a click opens its own page
and its URL alone opens it too; a slow
server leaves the last view up with "N s behind"; a failing query shows its error in its
card while the other cards stay; a batch script's shell counts as a process, not a rank,
in the grid, in the overview's running jobs and in its job page's ranks card.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import psycopg
import pytest
from playwright.sync_api import Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stacklens import wire
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.collector.test_ingest import T0, exchange
from tests.conftest import chromium_page, free_port, serving

#: Frames sent per connection when seeding.
BATCH = 500


class SlowProxy:
    """An HTTP proxy to the API that waits `delay_s` before forwarding each request."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.delay_s = 0.0
        self.app = Starlette(routes=[Route("/{path:path}", self._forward)])

    async def _forward(self, request: Request) -> Response:
        import asyncio

        await asyncio.sleep(self.delay_s)
        async with httpx.AsyncClient(base_url=self.target, timeout=60) as client:
            answer = await client.get(request.url.path, params=request.query_params)
        kept = {k: v for k, v in answer.headers.items() if k.lower() == "content-type"}
        return Response(answer.content, answer.status_code, headers=kept)


@pytest.fixture
def dashboard(pg_url) -> Iterator[tuple[str, SlowProxy]]:
    """The API and the dashboard (refreshing every 500 ms) on one port; the dashboard reads
    the API through a SlowProxy on another. Yields the page's base URL and the proxy."""
    engine = make_engine(pg_url)
    api_port, proxy_port = free_port(), free_port()
    proxy = SlowProxy(f"http://127.0.0.1:{api_port}")
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{proxy_port}", refresh_ms=500)
    with serving(app, port=api_port), serving(proxy.app, port=proxy_port):
        yield f"http://127.0.0.1:{api_port}", proxy
    engine.dispose()


@pytest.fixture
def browser_page() -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page and the list its console errors are collected into."""
    with chromium_page() as page_and_errors:
        yield page_and_errors


def job_frame(
    job: str,
    start_s: int,
    *,
    rank: int = 0,
    ranks: int = 1,
    user: str = "alice",
    command: str = "./solver",
    io: list[dict] | None = None,
) -> bytes:
    """The only frame of `rank` of a job started `start_s` seconds after T0: it sends 100
    bytes to the next rank, and did the I/O `io` (rows of the io table)."""
    tables = {
        "rank_info": wire.records("rank_info", [{"command": command.encode(),
                                                 "user": user.encode()}]),
        "p2p": wire.records("p2p", [{"peer": (rank + 1) % ranks, "bytes_sent": 100,
                                     "msgs_sent": 1}]),
    }  # fmt: skip
    if io:
        tables["io"] = wire.records("io", io)
    return wire.encode_frame(
        job_id=job,
        world_rank=rank,
        world_size=ranks,
        seq=0,
        interval_start_ns=T0 + start_s * 10**9,
        interval_end_ns=T0 + (start_s + 1) * 10**9,
        token="secret",
        tables=tables,
    )


def process_frame(job: str, start_s: int, *, user: str = "alice",
                  command: str = "bash script.sh") -> bytes:  # fmt: skip
    """The only frame of a process without MPI (the job's processes run: a batch script's
    shell) of a job started `start_s` seconds after T0."""
    return wire.encode_frame(
        job_id=job, run_id=0, proc_start_ns=T0 + start_s * 10**9, pid=4242, world_rank=0,
        world_size=1, seq=0, interval_start_ns=T0 + start_s * 10**9,
        interval_end_ns=T0 + (start_s + 1) * 10**9, token="secret",
        tables={"rank_info": wire.records("rank_info", [{"command": command.encode(),
                                                         "user": user.encode()}])},
    )  # fmt: skip


def seed(collector, frames: list[bytes]) -> None:
    """Send the frames to the collector, a batch per connection, each committed, and wait
    for its resolver to name their call sites."""
    for i in range(0, len(frames), BATCH):
        batch = frames[i : i + BATCH]
        acks = exchange(collector.address, b"".join(batch), acks=len(batch), timeout=120)
        assert [status for status, _ in acks] == [0] * len(batch)
    if hasattr(collector, "settle_sites"):
        collector.settle_sites()  # the call sites named before the test reads them


def grid_rows(page: Page, grid_id: str) -> list[dict[str, str]]:
    """The rows a grid has drawn, in their displayed order: column field -> text."""
    return page.evaluate(
        """(id) => {
            const rows = [...document.querySelectorAll(`#${id} .ag-center-cols-container .ag-row`)];
            rows.sort((a, b) => a.getAttribute('row-index') - b.getAttribute('row-index'));
            return rows.map(r => Object.fromEntries([...r.querySelectorAll('.ag-cell')].map(
                c => [c.getAttribute('col-id'), c.textContent.trim()])));
        }""",
        grid_id,
    )


def wait_updated(page: Page) -> None:
    """Until the page says its last whole refresh is recent."""
    expect(page.locator("#last-updated")).to_contain_text("updated", timeout=30_000)


def test_a_job_with_5000_files_shows_them_and_keeps_refreshing(collector, dashboard, browser_page):
    """5 ranks with 1,000 files each: the grid holds the first page (the 1,000 files with
    the most bytes), the caption says how many there are, refreshes keep coming."""
    base, _ = dashboard
    frames = [
        job_frame("files", 0, rank=r, ranks=5, io=[
            {"layer": 1, "opens": 1, "writes": 1, "bytes_written": 1000 * r + i,
             "path": f"/scratch/out.{r}.{i:04d}".encode(), "mount": b"/scratch",
             "fstype": b"lustre"} for i in range(1000)
        ])
        for r in range(5)
    ]  # fmt: skip
    seed(collector, frames)
    page, errors = browser_page
    page.goto(base + "/jobs")
    caption = page.locator("#card-io-caption")
    expect(caption).to_contain_text("The 1,000 of 5,000 files", timeout=30_000)
    wait_updated(page)
    rows = grid_rows(page, "card-io-files")
    assert rows and rows[0]["path"] == "/scratch/out.4.0999"  # most bytes first
    assert rows[0]["bytes_written"] == "4999"
    # The grid sorts in the browser: a click on a heading, fewest bytes of the 1,000 first.
    page.locator("#card-io-files .ag-header-cell[col-id=bytes_written]").click()
    top = page.locator("#card-io-files .ag-row[row-index='0'] [col-id=path]")
    expect(top).to_have_text("/scratch/out.4.0000")
    # Refreshes go on (none is superseded by the next tick): the clock stays "updated".
    first = page.locator("#last-updated").inner_text()
    expect(page.locator("#last-updated")).not_to_have_text(first, timeout=10_000)
    wait_updated(page)
    assert errors == [], "\n".join(errors)


def test_a_list_of_20000_jobs_pages_and_keeps_refreshing(collector, dashboard, browser_page):
    base, _ = dashboard
    seed(collector, [job_frame(f"job-{i:05d}", i) for i in range(20_000)])
    page, errors = browser_page
    page.goto(base + "/jobs")
    info = page.locator("#job-page-info")
    expect(info).to_have_text("jobs 1–100 of 20,000, newest first", timeout=60_000)
    wait_updated(page)
    rows = grid_rows(page, "jobs-grid")
    assert [r["job"] for r in rows[:3]] == ["job-19999", "job-19998", "job-19997"]
    expect(page.locator("#shown-job")).to_contain_text("job-19999")
    page.click("#job-older")
    expect(info).to_have_text("jobs 101–200 of 20,000, newest first", timeout=30_000)
    expect(page.locator("#jobs-grid .ag-row[row-index='0'] [col-id=job]")).to_have_text("job-19899")
    page.click("#job-newer")
    expect(info).to_have_text("jobs 1–100 of 20,000, newest first", timeout=30_000)
    wait_updated(page)
    assert errors == [], "\n".join(errors)


def test_a_search_finds_one_job_among_2000_and_its_url_opens_it(collector, dashboard, browser_page):
    base, _ = dashboard
    frames = [
        job_frame(f"run/{i:04d}", i, user=f"user{i % 7}", ranks=2, rank=r,
                  command=f"./app --case {i}")
        for i in range(2000)
        for r in range(2)
    ]  # fmt: skip
    seed(collector, frames)
    page, errors = browser_page
    page.goto(base + "/jobs")
    expect(page.locator("#job-page-info")).to_contain_text("of 2,000", timeout=30_000)
    page.fill("#job-search", "--case 1234")
    expect(page.locator("#job-page-info")).to_have_text(
        "jobs 1–1 of 1, newest first", timeout=30_000
    )
    expect(page.locator("#jobs-grid .ag-row [col-id=job]")).to_have_text("run/1234")
    page.locator("#jobs-grid .ag-row [col-id=command]").click()
    # The job's own page: its URL (qualified by its owner), its view in sight, its rank pairs.
    expect(page).to_have_url(f"{base}/jobs/run%2F1234?owner=user2", timeout=30_000)
    # (The job page draws its timeline and profile first: slow on a loaded machine.)
    expect(page.locator("#jv-title")).to_contain_text("Job run/1234", timeout=90_000)
    expect(page.locator("#jv-title")).to_be_in_viewport()
    pairs = page.locator("#card-matrix-pairs .ag-center-cols-container .ag-row")
    expect(pairs).to_have_count(2, timeout=30_000)
    assert grid_rows(page, "card-matrix-pairs") == [
        {"src": "0", "dst": "1", "bytes": "100", "sent": "100 B", "messages": "1"},
        {"src": "1", "dst": "0", "bytes": "100", "sent": "100 B", "messages": "1"},
    ]
    # The URL alone opens the job, in a new page too; an unknown job says so.
    page.goto(f"{base}/jobs/{quote('run/0007', safe='')}")
    expect(page.locator("#jv-title")).to_contain_text("Job run/0007", timeout=90_000)
    page.goto(f"{base}/jobs/no-such-job")
    expect(page.locator("#jv-status")).to_contain_text("unknown job 'no-such-job'", timeout=90_000)
    assert errors == [], "\n".join(errors)


def test_a_slow_server_leaves_the_last_view_and_says_how_far_behind(
    collector, dashboard, browser_page
):
    base, proxy = dashboard
    seed(collector, [job_frame("steady", 0, ranks=2), job_frame("steady", 0, rank=1, ranks=2)])
    page, errors = browser_page
    page.goto(base + "/jobs")
    wait_updated(page)
    expect(page.locator("#jobs-grid .ag-row [col-id=job]")).to_have_text("steady")
    proxy.delay_s = 8
    label = page.locator("#last-updated")
    expect(label).to_have_text(re.compile(r"refreshing… \d+ s behind"), timeout=20_000)
    # The last good view stays on screen meanwhile.
    expect(page.locator("#jobs-grid .ag-row [col-id=job]")).to_have_text("steady")
    assert len(grid_rows(page, "card-matrix-pairs")) == 2
    proxy.delay_s = 0
    wait_updated(page)
    assert errors == [], "\n".join(errors)


def test_a_scripts_shell_is_a_process_not_a_rank(collector, dashboard, browser_page):
    """A batch script's job: its shell reports as a process, its `mpirun -np 2` as two
    ranks; the jobs grid, the overview's running jobs and the job page's ranks card say 2
    ranks and 1 process, a job of MPI ranks only reads as ever."""
    base, _ = dashboard
    mpi = [job_frame(job, i, rank=r, ranks=2) for i, job in enumerate(["plain", "script"])
           for r in (0, 1)]  # fmt: skip
    seed(collector, [process_frame("script", 1), *mpi])
    page, errors = browser_page
    page.goto(base + "/jobs")
    wait_updated(page)
    shown = {r["job"]: r["ranks"] for r in grid_rows(page, "jobs-grid")}
    assert shown == {"script": "2 / 2 · 1 process", "plain": "2 / 2"}
    page.goto(base + "/")
    running = page.locator("#ov-jobs li")
    expect(running).to_have_count(2, timeout=30_000)
    expect(running.nth(0)).to_have_text(re.compile(r"^script alice · 2 ranks · 1 process · "
                                                   r"200 B sent"))  # fmt: skip
    expect(running.nth(1)).to_have_text(re.compile(r"^plain alice · 2 ranks · 200 B sent"))
    # The job's own page: its ranks card counts the shell apart and its table names it a
    # process, after the ranks (it was "3 of 2 ranks reported" and a second rank 0); its
    # profile judges the two ranks alone (the shell's time summed into rank 0's named it
    # late, server/jobs/repository.py's mpi_runs)
    page.goto(f"{base}/jobs/script")
    expect(page.locator("#card-ranks-summary")).to_have_text(
        "2 of 2 ranks reported, and 1 process, on 1 host: localhost (3).", timeout=90_000
    )
    expect(page.locator("#jv-outliers")).to_have_text("No rank stands out in this window.")
    table = page.locator("#card-ranks-table")
    expect(table).to_contain_text("2 ranks and 1 process, those with folded or lost counts")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    # Columns: rank, host, pid, status, first seen, last seen, keys folded, frames lost,
    # frames spooled.
    cells = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(3)]
    assert [(c[0], c[1], c[2], c[3], *c[6:]) for c in cells] == [
        ("0", "localhost", "0", "running", "0", "0", "0"),
        ("1", "localhost", "0", "running", "0", "0", "0"),
        ("process 0", "localhost", "4242", "running", "0", "0", "0"),
    ]
    # a job of MPI ranks only reads as ever
    page.goto(f"{base}/jobs/plain")
    expect(page.locator("#card-ranks-summary")).to_have_text(
        "2 of 2 ranks reported, on 1 host: localhost (2).", timeout=90_000
    )
    expect(page.locator("#card-ranks-table tbody tr")).to_have_count(2)
    assert errors == [], "\n".join(errors)


@contextlib.contextmanager
def hidden_table(pg_url: str, table: str) -> Iterator[None]:
    """The table renamed away while the block runs: every query reading it fails."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_hidden")
        try:
            yield
        finally:
            conn.execute(f"ALTER TABLE {table}_hidden RENAME TO {table}")


def test_a_server_error_shows_in_the_card_that_failed(collector, dashboard, browser_page, pg_url):
    base, _ = dashboard
    io = [{"layer": 1, "opens": 1, "writes": 1, "bytes_written": 7, "path": b"/scratch/a",
           "mount": b"/scratch", "fstype": b"lustre"}]  # fmt: skip
    seed(collector, [job_frame("broken", 0, io=io)])
    page, errors = browser_page
    page.goto(base + "/jobs")
    expect(page.locator("#card-io-caption")).to_contain_text("1 file", timeout=30_000)
    with hidden_table(pg_url, "io_deltas"):
        error = page.locator("#card-io-error")
        expect(error).to_contain_text(
            "the server could not read this card's data (ProgrammingError)", timeout=20_000
        )
        # Only that card: the others and the last view of this one stay.
        for card in ("card-matrix-error", "card-ops-error", "card-ranks-error", "jobs-error"):
            expect(page.locator(f"#{card}")).to_be_empty()
        expect(page.locator("#card-io-caption")).to_contain_text("1 file")
        expect(page.locator("#shown-job")).to_contain_text("broken")
    expect(page.locator("#card-io-error")).to_be_empty(timeout=60_000)
    # Chromium logs no error of its own: the failed request was the server's, not the page's.
    assert errors == [], "\n".join(errors)
