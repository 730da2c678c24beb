"""End to end: the job page in Chromium over a job with a known time profile (the frames of
tests/server/test_slow_rank through the real collector), opened by its URL with a window.

A person opening a shared link sees the window it names, the late rank named first in words
(and marked on the heat map) with the ranks waiting for it, the exact calls of that window;
choosing "whole job" puts the new view in the URL and shows the whole job's numbers (rank
0's I/O burst, which made no rank wait, is no finding); a link with a playback position
shows that step alone (the I/O burst), its slider's label the step's start in UTC, whole;
the page logs no console errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, expect

from presentation.formatting import format_utc_ns
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0
from tests.conftest import chromium_page, free_port, serving
from tests.e2e.test_dashboard import _table_rows
from tests.e2e.test_jobs_page import grid_rows
from tests.server.test_slow_rank import INTERVALS, RANKS, interval_frame

S = 10**9
T = M0 // S  # epoch seconds of the job's start


@pytest.fixture
def served(collector, pg_url) -> Iterator[str]:
    """The known-profile job stored, and the whole server (API and pages) on HTTP."""
    frames = [interval_frame(k, r) for k in range(INTERVALS) for r in range(RANKS)]
    statuses = [s for s, _ in exchange(collector.address, b"".join(frames), acks=len(frames))]
    assert statuses == [0] * len(frames)
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port):
        yield f"http://127.0.0.1:{port}"
    engine.dispose()


def _calls(page: Page, op: str) -> int:
    """The calls of `op` in the page's MPI operations table."""
    # Columns: operation, category, ranks, calls, bytes, payload, time inside.
    rows = {t[0]: t for t in _table_rows(page, "card-ops-table")}
    return int(rows[op][3])


def test_a_shared_link_opens_the_job_over_its_window(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/jobs/slow?from={T + 11}&to={T + 16}")
        expect(page.locator("#jv-title")).to_contain_text(
            "Job slow — all runs, 2023-11-14 22:14:11 UTC – 2023-11-14 22:14:16 UTC", timeout=20_000
        )
        outliers = page.locator("#jv-outliers")
        late = outliers.locator("li").first  # the culprit first, marked late
        expect(late).to_have_text(
            "rank 2 arrives last at MPI_Allreduce: 3.75 s more computing than the median rank "
            "(75% of the elapsed time); ranks 0, 1, 3 wait for it"
        )
        expect(late).to_have_class("outlier late")
        expect(outliers).to_contain_text(
            "MPI_Allreduce on communicator 00000007 (4 ranks): rank 2 arrives last (the least time "
            "inside: 250 ms, median 4.00 s); rank 0 waits longest (4.00 s)"
        )
        expect(page.locator("#jv-heatmap .annotation-text")).to_have_text(
            ["◀ late"], timeout=20_000
        )
        expect(page.locator("#card-ops-table tbody tr")).to_have_count(1)
        assert _calls(page, "MPI_Allreduce") == RANKS * 5  # the five slow intervals
        expect(page.locator("#jv-heatmap .heatmaplayer")).to_have_count(1)

        page.locator("#tr-preset").get_by_text("All").click()  # the header's range: all
        expect(page).to_have_url(f"{served}/jobs/slow", timeout=20_000)
        expect(page.locator("#card-ops-table")).to_contain_text("MPI_Finalize", timeout=20_000)
        assert _calls(page, "MPI_Allreduce") == RANKS * (INTERVALS - 2)
        # over the whole job rank 2 is still late (3.75 s of 30 s); rank 0's I/O burst took
        # the place of its computing: no finding
        expect(late).to_have_text(
            "rank 2 arrives last at MPI_Allreduce: 3.75 s more computing than the median rank "
            "(12% of the elapsed time); ranks 0, 1, 3 wait for it",
            timeout=20_000,
        )
        expect(outliers.locator("li.outlier")).to_have_count(1)
        assert errors == []


def test_a_playback_position_shows_that_step_alone(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/jobs/slow?from={T + 15}&to={T + 25}&at={T + 21}")
        expect(page.locator("#jv-step-shown")).to_have_text(
            "cards: the step from 2023-11-14 22:14:21 UTC", timeout=20_000
        )
        expect(page.locator("#card-io-files .ag-row [col-id=path]")).to_have_text("/scratch/burst")
        io = grid_rows(page, "card-io-files")
        assert [(row["path"], row["bytes_written"]) for row in io] == [
            ("/scratch/burst", str(2**30))
        ]
        assert _calls(page, "MPI_Allreduce") == RANKS

        # The slider's thumb says its step's start in UTC, never cut; the keys move it a
        # step (the URL and the cards follow), or to the window's first step.
        thumb = page.locator("#jv-playback .mantine-Slider-thumb")
        label = page.locator("#jv-playback .mantine-Slider-label")
        for key, at in (("ArrowRight", T + 22), ("Home", T + 15)):
            thumb.press(key)
            expect(page).to_have_url(re.compile(rf"[?&]at={at}$"), timeout=20_000)
            shown = format_utc_ns(at * S)
            expect(page.locator("#jv-step-shown")).to_have_text(f"cards: the step from {shown}")
            thumb.hover()
            expect(label).to_have_text(shown)
            assert _inside(label, page.locator("section.card").first)
            page.mouse.move(0, 0)
        assert errors == []


def _inside(inner: Locator, outer: Locator) -> bool:
    """Whether `inner` is drawn whole within `outer`'s box."""
    a, b = inner.bounding_box(), outer.bounding_box()
    assert a is not None and b is not None
    return (a["x"] >= b["x"] and a["y"] >= b["y"] and a["x"] + a["width"] <= b["x"] + b["width"]
            and a["y"] + a["height"] <= b["y"] + b["height"])  # fmt: skip
