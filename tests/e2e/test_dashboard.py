"""End to end: `stacklens up`, a real 4-rank Open MPI job under the hooks, the page in Chromium.

A person opening the dashboard sees the job in the jobs grid and reads its exact
rank x rank byte counts in the rank pairs grid, the calls and bytes of its MPI operations, its
collectives per communicator, its message sizes, its one-sided traffic, the bytes of every
file it wrote or read and where its ranks ran; the page logs no console errors.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from presentation.formatting import format_bytes
from tests.conftest import (
    chromium_page,
    free_port,
    mpi_env,
    query,
    running_up,
    serving,
    stacklens_run,
)
from tests.e2e.test_jobs_page import grid_rows
from tests.hooks.test_surface import expected_p2p

RANKS = 4


@pytest.fixture
def stacklens_up(pg_url, tmp_path) -> Iterator[dict[str, str]]:
    """`stacklens up` against the test database on free ports; yields its settings."""
    with running_up(pg_url, tmp_path / "state", STACKLENS_REFRESH_MS="500") as up:
        yield up


def _table_rows(page: Page, table_id: str) -> list[list[str]]:
    """The body rows of a table as a person reads them: the text of every cell."""
    rows = page.locator(f"#{table_id} tbody tr")
    return [
        [text.strip() for text in rows.nth(i).locator("td").all_inner_texts()]
        for i in range(rows.count())
    ]


def _matrix_rows(page: Page) -> dict[tuple[int, int], tuple[int, int]]:
    """The rank pairs grid as a person reads it: (source, destination) -> (bytes, messages)."""
    return {
        (int(r["src"]), int(r["dst"])): (int(r["bytes"]), int(r["messages"]))
        for r in grid_rows(page, "card-matrix-pairs")
    }


def _grid_row_count(page: Page, grid_id: str):
    """The rows a grid has drawn (a locator, for expect)."""
    return page.locator(f"#{grid_id} .ag-center-cols-container .ag-row")


def _op_rows(page: Page) -> dict[str, tuple[str, int, int, int, str]]:
    """The MPI operations table: op -> (category, ranks, calls, bytes, payload)."""
    # Columns: operation, category, ranks, calls, bytes, payload (human), time inside.
    return {
        t[0]: (t[1], int(t[2]), int(t[3]), int(t[4]), t[5])
        for t in _table_rows(page, "card-ops-table")
    }


@pytest.fixture
def browser_page() -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page and the list its console errors are collected into."""
    with chromium_page() as page_and_errors:
        yield page_and_errors


def test_page_follows_a_running_job_live(stacklens_up, pg_url, browser_page, examples_built):
    """Open the page on an empty database, then start a job: it appears without a reload,
    running, then finished.

    The page refreshes at its own pace, which backs off while refreshes are slow (under
    load, several seconds): a job of a few seconds could end between two refreshes and
    never be seen running. So once every rank's first frame is stored, the test holds the
    ranks (SIGSTOP) until the page shows the job running, then lets them finish."""
    page, errors = browser_page
    page.goto(stacklens_up["base"] + "/jobs")
    expect(page.locator("#status-message")).to_contain_text("No jobs yet", timeout=20_000)
    expect(page.locator("#status-message")).to_contain_text("stacklens run -- mpirun")
    expect(page.locator("#job-details")).to_be_hidden()

    job = f"live-{uuid.uuid4().hex[:8]}"
    iterations, size = 25, 4096
    run_env = mpi_env(**{k: v for k, v in stacklens_up.items() if k.startswith("STACKLENS_")})
    run_env.update(STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="200")
    program = [str(examples_built / "ring_allreduce"), str(iterations), str(size), "400"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens_cli", "run", "--", "mpirun", "-np", str(RANKS), *program],
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    held: list[int] = []
    try:
        _wait_running(pg_url, job, proc)
        held = [pid for pid in _descendants(proc.pid) if _command(pid) == "ring_allreduce"]
        assert len(held) == RANKS, held
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        row = page.locator("#jobs-grid .ag-row", has_text=job)
        expect(row).to_contain_text("running", timeout=90_000)
        assert proc.poll() is None, "the job ended before the page showed it running"
        for pid in held:
            os.kill(pid, signal.SIGCONT)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        for pid in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
    # (the refresh period may have backed off while the machine was busy: up to 30 s)
    expect(row).to_contain_text("finished", timeout=90_000)
    expected = {(r, (r + 1) % RANKS): (iterations * (size + r), iterations) for r in range(RANKS)}
    expect(_grid_row_count(page, "card-matrix-pairs")).to_have_count(RANKS, timeout=90_000)
    sent = sum(b for b, _ in expected.values())
    expect(row.locator("[col-id=bytes]")).to_have_text(format_bytes(sent))  # exact on hover
    # the job row and the cards are filled by callbacks of their own: the row may show the
    # last frame's bytes a moment before the rank pairs grid does
    assert _settled(lambda: _matrix_rows(page), expected) == expected
    expect(page.locator("#card-io-caption")).to_contain_text("No file I/O")  # stdout is no file
    expect(page.locator("#card-rma-caption")).to_have_text("No one-sided (RMA) calls in this job.")
    # Each rank: one Isend of size + r bytes per iteration.
    isend = ("point-to-point", RANKS, RANKS * iterations, sum(b for b, _ in expected.values()))
    assert _settled(lambda: _op_rows(page)["MPI_Isend"][:4], isend) == isend
    assert errors == []


def _settled(read, expected, timeout: float = 30):
    """What `read()` gives once it equals `expected`, or, after `timeout` seconds, what it
    gave last (for the assertion to show)."""
    deadline = time.monotonic() + timeout
    while (seen := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.25)
    return seen


def _wait_running(pg_url: str, job: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Waits until every rank of `job` has a stored frame and the job is running."""
    deadline = time.monotonic() + timeout
    while True:
        seen = query(pg_url, "SELECT count(*) FROM ranks r JOIN jobs j ON j.id = r.job_id "
                             "WHERE j.job_key = %s AND j.status = 'running'", (job,))  # fmt: skip
        if seen[0][0] == RANKS:
            return
        assert proc.poll() is None, f"the job ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, f"job {job} did not start in {timeout} s"
        time.sleep(0.02)


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _command(pid: int) -> str:
    """The command name of a process ("" if it ended)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_unreachable_api_is_reported_on_the_page(browser_page):
    from a2wsgi import WSGIMiddleware
    from fastapi import FastAPI

    from frontend.app import create_dash_app

    dead = f"http://127.0.0.1:{free_port()}"
    app = FastAPI()
    app.mount("/", WSGIMiddleware(create_dash_app(dead, refresh_ms=500).server))
    with serving(app) as port:
        page, errors = browser_page
        page.goto(f"http://127.0.0.1:{port}/jobs")
        message = page.locator("#jobs-error")
        expect(message).to_contain_text("stacklens server unreachable", timeout=20_000)
        expect(message).to_contain_text(f"{dead}/api/overview")
        assert errors == []


def test_page_shows_the_job_its_matrix_operations_and_files(
    stacklens_up, pg_url, hook_library, examples_built, tmp_path, browser_page
):
    """examples/mpi_surface.c: a known pattern over point-to-point, collectives, RMA,
    MPI-IO, POSIX and stdio (its exact per-rank values: tests/hooks/test_surface.py)."""
    job = f"e2e-{uuid.uuid4().hex[:8]}"
    files = tmp_path / "files"
    files.mkdir()
    run_env = mpi_env(**{k: v for k, v in stacklens_up.items() if k.startswith("STACKLENS_")})
    run_env.update(STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="200")
    program = [str(examples_built / "mpi_surface"), str(files)]
    result = stacklens_run(["mpirun", "-np", str(RANKS), *program], run_env, timeout=120)
    assert result.returncode == 0, result.stderr

    page, errors = browser_page
    page.goto(stacklens_up["base"] + "/jobs")

    row = page.locator("#jobs-grid .ag-row", has_text=job)
    expect(row).to_have_count(1, timeout=20_000)
    expect(row).to_contain_text("finished")
    expect(row.locator("[col-id=ranks]")).to_have_text(f"{RANKS} / {RANKS}")
    p2p = expected_p2p(RANKS)
    expect(row.locator("[col-id=bytes]")).to_have_text(
        format_bytes(sum(b for b, _ in p2p.values()))
    )

    expect(page.locator("#shown-job")).to_contain_text(job, timeout=20_000)
    expect(page.locator("#job-details")).to_be_visible()
    expect(_grid_row_count(page, "card-matrix-pairs")).to_have_count(len(p2p), timeout=20_000)
    assert _matrix_rows(page) == p2p
    expect(page.locator("#card-matrix-heatmap .gtitle")).to_have_count(1)

    # MPI operations: (category, ranks, calls, bytes, payload), summed over the ranks.
    expect(page.locator("#card-ops h2")).to_have_text("MPI operations")
    expect(page.locator("#card-ops-table")).to_contain_text("MPI_File_write_at_all")
    ops = _op_rows(page)
    isend_bytes = sum(100 * (p + 1) + r for r in range(RANKS) for p in range(RANKS) if p != r)
    assert ops["MPI_File_write_at_all"] == ("file I/O", RANKS, RANKS, 1000 * RANKS, "3.91 KiB")
    assert ops["MPI_Isend"] == ("point-to-point", RANKS, 3 * RANKS, isend_bytes, "2.95 KiB")
    assert ops["MPI_Send_init"] == ("point-to-point", 2, 2, 2 * 192, "384 B")
    assert ops["MPI_Wait"] == ("wait/test", 2, 12, 0, "0 B")
    assert ops["MPI_Bcast"] == ("collective", RANKS, RANKS, 1000 * RANKS, "3.91 KiB")
    assert ops["MPI_Put"] == ("RMA", RANKS, RANKS, 16 * RANKS, "64 B")
    summary = page.locator("#card-ops-summary")
    for label in ("point-to-point", "wait/test", "collective", "RMA", "file I/O"):
        expect(summary).to_contain_text(label)

    # File-system I/O, most bytes first: (layer, path, ranks, opens, reads, writes,
    # bytes read, bytes written).
    root = str(files.resolve())
    expected_io = (
        [("POSIX", f"{root}/posix.{r}", 1, 1, 1, 3, 12288, 12288) for r in range(RANKS)]
        + [("MPI-IO", f"{root}/mpiio.dat", RANKS, RANKS, 0, RANKS, 0, 1000 * RANKS)]
        + [("stdio", f"{root}/stdio.{r}", 1, 1, 0, 1, 0, 500) for r in range(RANKS)]
    )
    expect(_grid_row_count(page, "card-io-files")).to_have_count(len(expected_io))
    shown_io = grid_rows(page, "card-io-files")
    counts = ("ranks", "opens", "reads", "writes", "bytes_read", "bytes_written")
    assert [(r["layer"], r["path"], *(int(r[c]) for c in counts)) for r in shown_io] == (
        expected_io
    )
    assert all(r["fstype"] and root.startswith(r["mount"]) for r in shown_io)  # both known

    # Collectives per (communicator, op, root): (size, op, root, ranks, calls, bytes).
    expect(page.locator("#card-collectives h2")).to_have_text("Collectives")
    coll = _table_rows(page, "card-collectives-table")
    # Columns: communicator, size, operation, root, ranks, calls, bytes, payload, time.
    by_op = {}
    for t in coll:
        by_op.setdefault((t[2], t[3]), []).append((t[0], int(t[1]), *map(int, t[4:7]), t[7]))
    world = by_op[("MPI_Bcast", "1")][0][0]
    assert by_op[("MPI_Bcast", "1")] == [(world, RANKS, RANKS, RANKS, 1000 * RANKS, "3.91 KiB")]
    assert by_op[("MPI_Barrier", "none")] == [(world, RANKS, RANKS, RANKS, 0, "0 B")]
    halves = sorted(row for row in by_op[("MPI_Allreduce", "none")] if row[1] == 2)
    assert [row[1:] for row in halves] == [(2, 2, 2, 16, "16 B")] * 2  # one double per rank
    assert len({row[0] for row in halves} | {world}) == 3  # three distinct communicators
    comms = {t[0]: t[1:] for t in _table_rows(page, "card-collectives-communicators")}
    assert comms[world][:2] == [str(RANKS), str(RANKS)]  # size, ranks

    # Message sizes: the exact table beside the bar chart; MPI_Isend's sizes 100 (p + 1) + r.
    # the chart shows "Loading…" until the card's data comes: wait for its figure and table
    expect(page.locator("#card-sizes-histogram .gtitle")).to_have_count(1)
    expect(page.locator("#card-sizes-table")).to_contain_text("MPI_Isend")
    sizes = {}
    # Columns: operation, size, from (bytes), below (bytes), messages.
    for t in _table_rows(page, "card-sizes-table"):
        sizes.setdefault(t[0], []).append((t[1], int(t[2]), int(t[3]), int(t[4])))
    assert sizes["MPI_Isend"] == [
        ("64 B – 128 B", 64, 128, 3),  # 101, 102, 103
        ("128 B – 256 B", 128, 256, 3),  # 200, 202, 203
        ("256 B – 512 B", 256, 512, 6),
    ]
    assert sizes["MPI_Bcast"] == [("512 B – 1 KiB", 512, 1024, RANKS)]

    # One-sided: rank r puts 16 bytes into r + 1 and gets 8 bytes from r + 2.
    rma = {}
    for r in range(RANKS):
        rma[(r, (r + 1) % RANKS)] = ("1", "16", "16 B", "MPI_Put 1 call, 16 B")
        rma[(r, (r + 2) % RANKS)] = ("1", "8", "8 B", "MPI_Get 1 call, 8 B")
    shown_rma = grid_rows(page, "card-rma-pairs")
    assert [(int(r["origin"]), int(r["target"])) for r in shown_rma] == sorted(rma)
    assert {
        (int(r["origin"]), int(r["target"])): (r["calls"], r["bytes"], r["moved"], r["per_op"])
        for r in shown_rma
    } == rma

    # Ranks: where each ran, finished, nothing folded or lost; one frame spooled each: the
    # final frame goes to the spool before its live delivery (and counts itself).
    host = query(pg_url, "SELECT DISTINCT host FROM ranks JOIN jobs ON jobs.id = job_id "
                         "WHERE job_key = %s", (job,))  # fmt: skip
    assert len(host) == 1
    host = host[0][0]
    expect(page.locator("#card-ranks-summary")).to_have_text(
        f"{RANKS} of {RANKS} ranks reported, on 1 host: {host} ({RANKS})."
    )
    # Columns: rank, host, pid, status, first seen, last seen, keys folded, frames lost,
    # frames spooled.
    shown_ranks = _table_rows(page, "card-ranks-table")
    assert [(t[0], t[1], t[3], *t[6:]) for t in shown_ranks] == [
        (str(r), host, "finished", "0", "0", "1") for r in range(RANKS)
    ]
    assert all(int(t[2]) > 0 for t in shown_ranks)  # pids
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    assert errors == []
