"""Every page read as a person reads it (issue #29 points 1, 2 and 6), in Chromium over the
real API, dashboard, collector and PostgreSQL with two users' jobs, the small fabric with a
congested spine link and an incident on it (tests/access/data.py):

- no console warning or error on any page (a warning is a failure);
- no grid cell cut without a tooltip saying its whole text, and every column resizable;
- every figure with data has a title, axis titles and a legend (a heat map: its colour bar);
- every time shown says its zone (UTC) and is not cut; a time axis says it in its title;
- the header's time range is carried in the URL and reaches every request the pages make
  for it (the dashboard's own API calls and the browser's);
- a wrong job, window or run is a clear page state, not empty charts;
- the Overview (/) links into the detail pages from the API's data.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.access.data import ALICE_JOB, BOB_JOB, save_two_users_incident, send_two_users_jobs
from tests.collector.test_ingest import T0
from tests.conftest import CHROMIUM_ARGS, free_port, serving
from tests.server.fabric_data import CONGESTED, later_round, write_small_fabric

S = 10**9


@pytest.fixture
def served(collector, pg_url) -> Iterator[dict]:
    """The API + dashboard over the two users' jobs, the fabric and the incident; every
    request the server answers is recorded (path?query)."""
    send_two_users_jobs(collector)
    write_small_fabric(pg_url)
    later_round(pg_url, CONGESTED)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    incident = save_two_users_incident(engine)
    app = create_site(engine, api_base_url=base, refresh_ms=1000)
    asked: list[str] = []

    @app.middleware("http")
    async def record(request, call_next):  # type: ignore[no-untyped-def]
        asked.append(f"{request.url.path}?{request.url.query}")
        return await call_next(request)

    try:
        with serving(app, port=port):
            yield {"base": base, "incident": incident, "asked": asked}
    finally:
        engine.dispose()


@contextlib.contextmanager
def reader() -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page and every console warning and error it logs."""
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


def cut_cells(page: Page) -> list[dict]:
    """The grid cells whose text is wider than the cell (cut), with their text and a
    selector-friendly position."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.ag-center-cols-container .ag-cell')]
            .map((c, i) => ({i, text: c.textContent.trim(),
                             cut: c.scrollWidth > c.clientWidth + 1 ||
                                  [...c.querySelectorAll('*')].some(
                                      e => e.scrollWidth > e.clientWidth + 1)}))
            .filter(c => c.cut && c.text)"""
    )


def assert_cells_readable(page: Page) -> None:
    """Every cut cell says its whole text on hover; every column can be widened."""
    for cell in cut_cells(page)[:6]:  # a few of each page: hovering takes its delay
        target = page.locator(".ag-center-cols-container .ag-cell").nth(cell["i"])
        target.scroll_into_view_if_needed()
        target.hover()
        expect(page.locator(".ag-tooltip")).to_contain_text(cell["text"].rstrip("…"))
        page.mouse.move(0, 0)
        expect(page.locator(".ag-tooltip")).to_have_count(0)
    fixed = page.evaluate(
        """() => [...document.querySelectorAll('.ag-header-cell')]
            .filter(h => h.offsetParent && !h.querySelector('.ag-header-cell-resize'))
            .map(h => h.textContent.trim())"""
    )
    assert fixed == [], f"columns that cannot be widened: {fixed}"


def figure_faults(page: Page) -> list[str]:
    """What each figure with data lacks: a title, an axis title, a legend (or colour bar),
    ticks of an axis of bytes in binary units ("1.5 GiB", not Plotly's "1.5B": billions)."""
    return page.evaluate(
        r"""() => [...document.querySelectorAll('.js-plotly-plot')]
            .filter(g => g.data && g.data.length)
            .flatMap(g => {
                const name = (g.layout.title && g.layout.title.text) || g.id || '?';
                const faults = [];
                if (!(g.layout.title && g.layout.title.text)) faults.push(name + ': no title');
                for (const [key, axis] of Object.entries(g._fullLayout)) {
                    if (!/^[xy]axis[0-9]*$/.test(key) || !axis.visible) continue;
                    const shared = key.startsWith('x') && axis.matches;
                    if (!shared && !(axis.title && axis.title.text))
                        faults.push(name + ': ' + key + ' untitled');
                    if (!/^bytes/.test((axis.title && axis.title.text) || '')) continue;
                    for (const tick of g.querySelectorAll(`.${axis._id}tick text`))
                        if (!/^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB|PiB)(\/s)?$/.test(tick.textContent))
                            faults.push(`${name}: ${key} tick ${tick.textContent}`);
                }
                if (!g.querySelector('.legend') && !g.querySelector('.colorbar'))
                    faults.push(name + ': no legend');
                return faults;
            })"""
    )


def time_faults(page: Page) -> list[str]:
    """The times on the page shown without their zone or cut: a text with a date and time
    or a clock time without "UTC" in it, or wider than its box; a figure's time axis
    whose title does not say UTC (its ticks are bare times)."""
    return page.evaluate(
        r"""() => {
            const time = /\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\b\d\d:\d\d:\d\d\b/;
            const faults = [];
            const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            while (texts.nextNode()) {
                const el = texts.currentNode.parentElement;
                const text = texts.currentNode.textContent.trim();
                if (!time.test(text) || el.closest('svg') || !el.offsetParent) continue;
                if (!text.includes('UTC')) faults.push('no zone: ' + text);
                if (el.scrollWidth > el.clientWidth + 1) faults.push('cut: ' + text);
            }
            for (const g of document.querySelectorAll('.js-plotly-plot')) {
                for (const [key, axis] of Object.entries(g._fullLayout || {})) {
                    if (!/^xaxis[0-9]*$/.test(key) || axis.type !== 'date') continue;
                    if (axis.matches) continue;  // shares the titled axis below it
                    const title = (axis.title && axis.title.text) || '';
                    if (!title.includes('UTC')) faults.push(`${g.id || '?'}: ${key} ${title}`);
                }
            }
            return faults;
        }"""
    )


PAGES = (
    ("/", "#ov-fabric", "links up"),
    ("/jobs", "#jobs-grid", ALICE_JOB),
    (f"/jobs/{ALICE_JOB}?owner=alice", "#jv-title", f"Job {ALICE_JOB} of alice"),
    ("/fabric", "#fabric-links-caption", "links 1–3 of 3"),
    (f"/compare?b={ALICE_JOB}", "#cmp-history", f"{ALICE_JOB} run 1"),
    ("/incidents", "#inc-grid", "Congestion on spine1[1]"),
    ("/incidents/{incident}", "#inc-title", "Congestion on spine1[1]"),
)


def test_every_page_reads_clean(served):
    """No warning, no cut cell without its tooltip, every figure labelled, every time
    shown with its zone and whole, on every page."""
    with reader() as (page, said):
        for path, ready, text in PAGES:
            page.goto(served["base"] + path.format(incident=served["incident"]))
            expect(page.locator(ready)).to_contain_text(text, timeout=30_000)
            page.wait_for_timeout(1500)  # the figures and grids of the page's first answer
            expect(page.locator("#tr-shown")).to_contain_text("UTC")
            assert_cells_readable(page)
            assert figure_faults(page) == [], path
            assert time_faults(page) == [], path
        assert said == []


def test_the_overview_links_into_the_detail_pages(served):
    base = served["base"]
    with reader() as (page, said):
        page.goto(base + "/")
        fabric = page.locator("#ov-fabric")
        expect(fabric).to_contain_text("2 links up", timeout=30_000)
        expect(fabric).to_contain_text("1 down")
        expect(page.locator("#ov-health")).to_contain_text("last sweep")
        expect(page.locator("#ov-incidents")).to_contain_text("No incident is open.")
        hottest = fabric.locator("li a").first
        expect(hottest).to_have_text("spine1[1] – leaf1[3]")
        hottest.click()
        page.wait_for_url(re.compile(r".*/fabric\?focus=link-\d+(&live=5m)?$"))
        expect(page.locator("#fabric-links-caption")).to_contain_text("links", timeout=30_000)
        assert said == []


def _after(asked: list[str], mark: int, prefix: str) -> list[dict[str, list[str]]]:
    """The queries of the requests to paths starting with `prefix` since `mark`."""
    return [parse_qs(urlsplit(a).query) for a in asked[mark:] if a.startswith(prefix)]


def _asked_since(asked: list[str], prefixes: tuple[str, ...]) -> dict[str, list[dict]]:
    """From now on, until each of `prefixes` was asked at least twice (30 s at most): the
    queries of the requests to each (the page's refreshes after it showed its range)."""
    mark = len(asked)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(
        len(_after(asked, mark, p)) >= 2 for p in prefixes
    ):
        time.sleep(0.25)
    return {p: _after(asked, mark, p) for p in prefixes}


def test_the_time_range_reaches_every_request(served):
    """A range in the header (a live preset, a custom range in the URL) is in the URL, on
    the header's page links and in every request the pages make for their cards."""
    base, asked = served["base"], served["asked"]
    job = f"/api/jobs/{ALICE_JOB}"
    cards = (f"{job}/profile", f"{job}/series", f"{job}/placement", "/api/overview")
    with reader() as (page, said):
        page.goto(f"{base}/jobs/{ALICE_JOB}?owner=alice")
        expect(page.locator("#jv-title")).to_contain_text("all runs", timeout=30_000)
        page.locator("#tr-preset").get_by_text("Live 1 h").click()
        page.wait_for_url(f"{base}/jobs/{ALICE_JOB}?owner=alice&live=1h")
        expect(page.locator("#tr-shown")).to_have_text("the last 1 h up to now (UTC)")
        # the title gives the window's bounds: from an hour ago (yesterday before 01:00 UTC)
        start = {time.strftime("%Y-%m-%d", time.gmtime(time.time() - s)) for s in (3660, 0)}
        expect(page.locator("#jv-title")).to_contain_text(
            re.compile("|".join(sorted(start))), timeout=30_000
        )
        for prefix, queries in _asked_since(asked, cards).items():
            assert queries, prefix
            assert all(abs(float(q["from"][0]) - (time.time() - 3600)) < 120 for q in queries)

        # A custom range (a shared link): the pickers show it, every card asks for it.
        a, b = "2023-11-14T22:13:20Z", "2023-11-14T22:13:30Z"
        page.goto(f"{base}/jobs/{ALICE_JOB}?owner=alice&from={a}&to={b}")
        shown = "2023-11-14 22:13:20 – 2023-11-14 22:13:30 UTC"
        expect(page.locator("#tr-shown")).to_have_text(shown)
        # the pickers show their values with the zone, as every time on the pages (#29)
        expect(page.locator("#tr-from")).to_have_text("2023-11-14 22:13:20 UTC")
        expect(page.locator("#tr-to")).to_have_text("2023-11-14 22:13:30 UTC")
        page.wait_for_timeout(1000)  # the page's first answers
        assert time_faults(page) == []
        expect(page.locator("#jv-title")).to_contain_text(
            "all runs, 2023-11-14 22:13:20 UTC – 2023-11-14 22:13:30 UTC", timeout=30_000
        )
        for prefix, queries in _asked_since(asked, cards).items():
            assert queries, prefix
            assert all(q.get("from") == [a] and q.get("to") == [b] for q in queries), prefix

        # The range goes along to the other pages, and into their requests.
        for name, path, ready, prefixes in (
            ("Incidents", "/incidents", "#inc-grid", ("/api/incidents",)),
            ("Fabric", "/fabric", "#fabric-links-caption",
             ("/api/fabric/state", "/api/fabric/links", "/api/fabric/events")),
            ("Jobs", "/jobs", "#jobs-grid", ("/api/overview",)),
        ):  # fmt: skip
            clicked = len(asked)  # the page before asks none of these
            page.get_by_role("link", name=name, exact=True).click()
            page.wait_for_url(f"{base}{path}?from={a.replace(':', '%3A')}&to="
                              f"{b.replace(':', '%3A')}")  # fmt: skip
            expect(page.locator("#tr-shown")).to_have_text(shown)
            expect(page.locator(ready)).to_be_visible(timeout=30_000)
            _asked_since(asked, prefixes)  # its refreshes too
            for prefix in prefixes:
                queries = _after(asked, clicked, prefix)
                # not the banner of every page: the incidents open now, whatever the range
                queries = [q for q in queries if q.get("open") != ["true"]]
                assert queries, prefix
                if prefix == "/api/overview":  # the job list: jobs started in the range
                    assert all((int(q["started_from"][0]), int(q["started_to"][0]))
                               == (T0, T0 + 10 * S) for q in queries)  # fmt: skip
                else:
                    assert all(q.get("from") == [a] and q.get("to") == [b]
                               for q in queries), (prefix, queries)  # fmt: skip
        assert said == []


def test_a_wrong_job_window_or_run_is_a_clear_page_state(served):
    base = served["base"]
    with reader() as (page, said):
        for path, title, detail in (
            ("/jobs/no-such-job", "Not found", "no-such-job"),
            (f"/jobs/{ALICE_JOB}?owner=alice&from=yesterday", "not valid", "yesterday"),
            (f"/jobs/{ALICE_JOB}?owner=alice&run=9", "Not found", "run 9"),
        ):
            page.goto(base + path)
            state = page.locator("#jv-status .error-state")
            expect(state).to_contain_text(title, timeout=30_000)
            expect(state).to_contain_text(detail)
            expect(page.locator("#jv-body")).to_be_hidden()
        page.goto(base + "/jobs?from=yesterday")
        expect(page.locator("#jobs-error")).to_contain_text("not readable", timeout=30_000)
        expect(page.locator("#jobs-error")).to_contain_text("yesterday")
        assert said == []


def test_the_jobs_list_has_one_sent_column_in_units(served):
    with reader() as (page, said):
        page.goto(served["base"] + "/jobs")
        row = page.locator("#jobs-grid .ag-row", has_text=BOB_JOB)
        expect(row).to_be_visible(timeout=30_000)
        headers = page.locator("#jobs-grid .ag-header-cell-text").all_inner_texts()
        assert headers == ["Job", "User", "Command", "Ranks seen / world", "Status",
                           "Started (UTC)", "Sent", "Messages sent"]  # fmt: skip
        assert re.fullmatch(r"\d+(\.\d\d)? (B|KiB|MiB)", row.locator("[col-id=bytes]").inner_text())
        started = row.locator("[col-id=started]")
        assert re.fullmatch(r"2023-11-14 22:13:2\d UTC", started.inner_text())
        assert page.evaluate("(e) => e.scrollWidth <= e.clientWidth + 1", started.element_handle())
        assert said == []
