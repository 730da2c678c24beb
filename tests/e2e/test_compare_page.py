"""End to end: the Compare page in Chromium over three runs of one program with known time
per operation and file I/O (tests/server/test_compare.py), opened by its URL: a person sees
the finding in words, both sides, the differences with their shares, the program's runs in
a table and a trend, every figure with a legend and axis titles, and no console error. A
window of each run in the URL is compared and named to the fraction of a second, and the
page's report buttons download that comparison (PDF and HTML)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, free_port, serving
from tests.server.test_compare import three_runs  # noqa: F401  (the runs, a fixture)

#: How the sides name the program: its executable's path, then its arguments.
PROGRAM = "/opt/solver/bin/solver -n 64"


@pytest.fixture
def served(three_runs, pg_url) -> Iterator[str]:  # noqa: F811
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port):
        yield f"http://127.0.0.1:{port}"
    engine.dispose()


def _rows(page, element_id: str) -> list[list[str]]:
    return page.locator(f"#{element_id} tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )


def test_two_runs_side_by_side_and_the_history(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/compare?a=cmp-a&b=cmp-b")
        expect(page.locator("#cmp-finding")).to_have_text(
            "+5.0 s elapsed per run (10.0 s → 15.0 s): MPI_Allreduce +4.0 s per rank (80%), "
            "file I/O on /scratch/out +1.0 s per rank (20%); placement moved from n1 to n2.",
            timeout=20_000,
        )
        assert _rows(page, "cmp-sides") == [
            ["a: cmp-a run 1", PROGRAM, "2023-11-14 22:13:20 UTC", "10.0 s", "n0, n1"],
            ["b: cmp-b run 1", PROGRAM, "2023-11-14 22:16:40 UTC", "15.0 s", "n0, n2"],
        ]
        assert _rows(page, "cmp-diffs") == [
            ["MPI_Allreduce", "2.00 s", "6.00 s", "+4.00 s", "80%"],
            ["file I/O on /scratch/out", "0 ns", "1.00 s", "+1.00 s", "20%"],
        ]
        expect(page.locator("#cmp-sites-caption")).to_have_text(
            "No call sites in either run (STACKLENS_CALLSITE_DEPTH=0 switches them off)."
        )
        assert [r[0] for r in _rows(page, "cmp-history")] == [
            "cmp-b run 1", "cmp-alice run 1", "cmp-c run 1", "cmp-a run 1",
        ]  # fmt: skip
        for graph in ("cmp-parts", "cmp-trend"):  # drawn once their figure came (not "Loading…")
            for part in (".gtitle", ".g-xtitle", ".g-ytitle", ".legend"):
                expect(page.locator(f"#{graph} {part}")).to_have_count(1)
            expect(page.locator(f"#{graph} .annotation-text")).not_to_have_text(["Loading…"])
        expect(page.locator("#cmp-parts .legend .traces")).to_have_count(2)
        # each side's placement and fabric: two hosts, none on a fabric here, nothing invented
        assert _rows(page, "cmp-context") == [
            ["a: cmp-a run 1", "2 (0 placed)", "0", "0 (0 between switches)", "unknown",
             "unknown", "0 B (0 jobs)", "0"],
            ["b: cmp-b run 1", "2 (0 placed)", "0", "0 (0 between switches)", "unknown",
             "unknown", "0 B (0 jobs)", "0"],
        ]  # fmt: skip
        # the report buttons download this comparison
        for fmt in ("pdf", "html"):
            assert page.locator(f"#cmp-report-{fmt}").get_attribute("href") == (
                f"/api/reports/compare?b=cmp-b&a=cmp-a&format={fmt}"
            )
        # the comparison as JSON and its tables as CSV files
        exports = page.locator("#cmp-exports a")
        assert exports.all_inner_texts() == [
            "⤓ JSON", "⤓ CSV: call sites", "⤓ CSV: families", "⤓ CSV: parts",
            "⤓ CSV: classes", "⤓ CSV: message sizes", "⤓ CSV: files",
            "⤓ CSV: late rank and fabric"]  # fmt: skip
        assert [exports.nth(i).get_attribute("href") for i in range(8)] == [
            "/api/compare?b=cmp-b&a=cmp-a",
            *(f"/api/compare?b=cmp-b&a=cmp-a&format=csv&table={t}"
              for t in ("sites", "families", "differences", "classes", "sizes", "files",
                        "context")),
        ]  # fmt: skip
        assert _rows(page, "cmp-classes") == [
            ["collective", "2.00 s", "6.00 s", "+4.00 s", "80%"],
            ["file I/O", "0 ns", "1.00 s", "+1.00 s", "20%"],
            ["computation", "7.00 s", "7.00 s", "+0 ns", "0%"],
            ["point-to-point", "1.00 s", "1.00 s", "+0 ns", "0%"],
        ]
        assert errors == []


def test_without_a_the_run_is_compared_with_its_history(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/compare?b=cmp-b&last=2")
        expect(page.locator("#cmp-finding")).to_contain_text(
            "−6.0 s elapsed per run (21.0 s → 15.0 s)", timeout=20_000
        )
        assert _rows(page, "cmp-sides")[0][0] == "a: median of 2 earlier runs"
        expect(page.locator("#cmp-result")).to_be_visible()
        expect(page.locator("#cmp-runs")).to_be_visible()
        page.goto(f"{served}/compare?b=nope")
        expect(page.locator("#cmp-error")).to_contain_text("unknown job 'nope'", timeout=20_000)
        # an error is the page's state: no empty charts or tables beneath it
        expect(page.locator("#cmp-result")).to_be_hidden()
        expect(page.locator("#cmp-runs")).to_be_hidden()
        # a first run is no error: the page says so beside its one-run history
        page.goto(f"{served}/compare?b=cmp-other")
        expect(page.locator("#cmp-note")).to_have_text(
            "cmp-other run 1 is the first run of its program that you may read: nothing earlier "
            "to compare it with. Name run a to compare it with another run.",
            timeout=20_000,
        )
        expect(page.locator("#cmp-error")).to_be_empty()
        expect(page.locator("#cmp-result")).to_be_hidden()
        expect(page.locator("#cmp-history tbody tr")).to_have_count(1)
        page.goto(f"{served}/compare")
        expect(page.locator("#cmp-note")).to_contain_text("Name run b", timeout=20_000)
        expect(page.locator("#cmp-error")).to_be_empty()
        expect(page.locator("#cmp-result")).to_be_hidden()
        assert page.locator(".js-plotly-plot:visible").count() == 0
        assert errors == []


def test_a_window_of_each_run_and_its_report_from_the_buttons(served, tmp_path):
    windows = "a_from=1700000000.5&a_to=1700000005.5&b_from=1700000210.5"
    with chromium_page() as (page, errors):
        page.goto(f"{served}/compare?a=cmp-a&b=cmp-b&{windows}")
        expect(page.locator("#cmp-finding")).to_have_text(
            "−500 ms elapsed per run (5.0 s → 4.5 s): computation −1.5 s per rank (300%), "
            "MPI_Send −1.0 s per rank (200%); placement moved from n1 to n2.",
            timeout=20_000,
        )
        a_name = "cmp-a run 1, 2023-11-14 22:13:20.5–22:13:25.5 UTC"
        b_name = "cmp-b run 1, from 2023-11-14 22:16:50.5 UTC"
        assert _rows(page, "cmp-sides") == [
            [f"a: {a_name}", PROGRAM, "2023-11-14 22:13:20 UTC", "5.00 s", "n0, n1"],
            [f"b: {b_name}", PROGRAM, "2023-11-14 22:16:40 UTC", "4.50 s", "n0, n2"],
        ]
        assert page.locator("#cmp-parts .legendtext").evaluate_all(
            "ts => ts.map(t => t.textContent)") == [f"a: {a_name}", f"b: {b_name}"]  # fmt: skip
        query = "b=cmp-b&b_from=1700000210.5&a=cmp-a&a_from=1700000000.5&a_to=1700000005.5"
        for fmt in ("pdf", "html"):
            button = page.locator(f"#cmp-report-{fmt}")
            expect(button).to_have_attribute("href", f"/api/reports/compare?{query}&format={fmt}")
            with page.expect_download(timeout=120_000) as download:
                button.click()
            path = tmp_path / f"compare.{fmt}"
            download.value.save_as(path)
            text = (path.read_text() if fmt == "html" else subprocess.run(
                ["pdftotext", str(path), "-"], capture_output=True, text=True, check=True
            ).stdout)  # fmt: skip
            # the text without its spaces: a PDF line may break after the window's dash
            letters = "".join(text.split())
            for name in ("Comparison: job cmp-b run 1", f"job {a_name}", f"job {b_name}"):
                assert "".join(name.split()) in letters, (fmt, name)
        assert page.locator("#cmp-exports a").first.get_attribute("href") == f"/api/compare?{query}"
        # every download button lies inside the card (they wrap, none past its edge)
        card = page.locator("section.card").first.bounding_box()
        assert card is not None
        for box in page.locator(".card-head a.button").evaluate_all(
            "as => as.map(a => a.getBoundingClientRect().right)"
        ):
            assert box <= card["x"] + card["width"], (box, card)
        assert errors == []
