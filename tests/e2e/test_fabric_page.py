"""End to end: a fabric written by the real FabricStore, the real API and dashboard served by
uvicorn, the Fabric page in Chromium.

A person opens the dashboard, clicks "Fabric" in the top bar and sees the topology drawn
(4 nodes, 3 links: the down one grey and dashed, the one with errors red, the loaded one
blue), the summary line, the exact row of the erroring link in the links table and the
events; when the unplugged host comes back, the page follows without a reload. No console
errors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from playwright.sync_api import Page, expect

from presentation.formatting import format_utc_ns
from stacklens import wire
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.collector.test_ingest import T0, exchange
from tests.conftest import free_port, serving
from tests.e2e.test_dashboard import _table_rows, browser_page  # noqa: F401 (fixture)
from tests.e2e.test_jobs_page import grid_rows
from tests.server.fabric_data import SECOND, relink_host2, write_small_fabric
from tests.server.fabric_data import T0 as FABRIC_T0


@pytest.fixture
def served(pg_url) -> Iterator[str]:
    """The stacklens API + dashboard over the test database on a free port; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    try:
        with serving(create_site(engine, api_base_url=base, refresh_ms=300), port=port):
            yield base
    finally:
        engine.dispose()


_GRAPH = """() => {
    const cy = document.querySelector('#fabric-graph')._cyreg.cy;
    const edge = (id) => {
        const e = cy.getElementById(id);
        return [e.classes().join(' '), e.style('line-color'), e.style('line-style')];
    };
    return {nodes: cy.nodes().length, edges: cy.edges().length,
            gone: cy.nodes('.gone').map((n) => n.data('label')),
            link1: edge('link-1'), link2: edge('link-2'), link3: edge('link-3')};
}"""


def _midpoint(page: Page, element_id: str) -> tuple[float, float]:
    """Where an element of the graph is in the viewport (its rendered midpoint), the graph
    scrolled into view first, as a person would."""
    graph = page.locator("#fabric-graph")
    graph.scroll_into_view_if_needed()
    box = graph.bounding_box()
    point = page.evaluate(
        "(id) => { const e = document.querySelector('#fabric-graph')._cyreg.cy"
        ".getElementById(id); return e.isNode() ? e.renderedPosition() : e.renderedMidpoint(); }",
        element_id,
    )
    return box["x"] + point["x"], box["y"] + point["y"]


def _point_at(page: Page, element_id: str, expected: str, timeout_s: float = 20) -> None:
    """Moves the mouse onto a graph element until the hover line reads `expected`, as a
    person would point again: the graph may still settle (fit, redraw) after it is shown,
    and a link is a thin target."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.mouse.move(0, 0)
        page.mouse.move(*_midpoint(page, element_id))
        try:
            expect(page.locator("#fabric-hover")).to_have_text(expected, timeout=1_000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _click_until(page: Page, element_id: str, where: str, expected: str, timeout_s=20) -> None:
    """Clicks a graph element until `where` reads `expected`, as a person clicks again when
    the graph was still moving (a fit or a focus after drawing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        page.mouse.click(*_midpoint(page, element_id))
        try:
            expect(page.locator(where)).to_have_text(expected, timeout=2_000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _graph(page: Page) -> dict:
    """What the topology graph draws, read from its cytoscape instance."""
    return page.evaluate(_GRAPH)


def _drawn(page: Page, edges: int, timeout_ms: int = 20_000) -> None:
    """Wait until the graph has `edges` edges and they are painted (the painter runs after
    the state arrives; the graph is drawn after the tables may already be)."""
    page.wait_for_function(
        "(n) => { const el = document.querySelector('#fabric-graph');"
        " const cy = el && el._cyreg && el._cyreg.cy;"
        " return cy && cy.edges().length === n && cy.edges('[title]').length === n; }",
        arg=edges,
        timeout=timeout_ms,
    )


#: The small fabric's window (its sweeps end at T0 + 1 s and T0 + 2 s), as the URL holds it.
WINDOW = f"from={FABRIC_T0 // SECOND}&to={FABRIC_T0 // SECOND + 5}"


def _grid(page: Page) -> list[dict[str, str]]:
    """The links grid as a person reads it."""
    return grid_rows(page, "fabric-links-grid")


def _settled(read, timeout_s: float = 10):
    """What `read()` returns once it returns the same twice in a row (a grid draws its
    cells a little after its rows)."""
    deadline = time.monotonic() + timeout_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = read()
        if now == last:
            return now
        last = now
    return last


def test_fabric_page_shows_load_errors_and_down_links(pg_url, served, browser_page):  # noqa: F811
    write_small_fabric(pg_url)
    page, errors = browser_page
    page.goto(served + "/")
    page.get_by_role("link", name="Fabric", exact=True).click()
    expect(page).to_have_url(served + "/fabric")

    summary = page.locator("#fabric-summary")
    expect(summary).to_have_text(
        "4 nodes (2 switches, 2 HCAs, 1 gone) · 3 links (1 down) · "
        "1 with errors in the last sweep · busiest link 50.0 %",
        timeout=20_000,
    )
    # Its last sweep is years old: the page says so and draws the data as stale.
    expect(page.locator("#fabric-freshness")).to_contain_text("STALE: last sweep ")
    expect(page.locator("#fabric-freshness")).to_contain_text("the graph shows the last data")
    # Live: the links in the newest sweep (the down one without a rate).
    expect(page.locator("#fabric-links-caption")).to_contain_text(
        "links 1–3 of 3, busiest first, in the newest sweep", timeout=20_000
    )
    # one uplink, single-HCA hosts: no group of parallel links (the card says so)
    expect(page.locator("#fabric-groups-caption")).to_contain_text(
        "No group of parallel links (two links between the same switches, a leaf's uplinks, "
        "a host's rails), over the last 5 min.",
        timeout=20_000,
    )
    t2 = "2023-11-14 22:13:22 UTC"
    columns = ("link", "state", "utilisation", "a_to_b", "b_to_a", "errors", "xmit_wait")
    assert _settled(lambda: [[r[c] for c in columns] for r in _grid(page)]) == [
        ["spine1[1] - leaf1[3]", "up", "50.0 %", "1.86 GiB/s", "953.67 MiB/s", "0", "0"],
        ["host1[1] - leaf1[1]", "up", "10.0 %", "0 B/s", "381.47 MiB/s", "4 (some ?)", "77"],
        ["host2[1] - leaf1[2]", "down", "?", "?", "?", "0 (some ?)", "?"],
    ]  # fmt: skip
    assert [r["sampled"] for r in _grid(page)][:2] == [t2, t2]
    # Open events overlap every window after their start.
    expect(page.locator("#fabric-events-table")).to_contain_text(
        "3 of 3 fabric events over the last 5 min"
    )

    _drawn(page, 3)
    graph = _graph(page)
    assert (graph["nodes"], graph["edges"], graph["gone"]) == (4, 3, ["host2"])
    # Colours as cytoscape computes them: 50 % on the log scale (0.01 % .. 100 %, 4 steps)
    # is 92.5 % of the way, 70 % between #2171b5 and #08306b; red errors, dashed down;
    # all of it stale (faded, dashed).
    assert graph["link1"] == ["link up stale", "rgb(16,68,129)", "dashed"]
    assert graph["link2"] == ["link up error stale", "rgb(217,45,32)", "dashed"]
    assert graph["link3"] == ["link down unknown stale", "rgb(152,162,179)", "dashed"]

    # Pointing at a link with the mouse says what it carries; a down link has no rate.
    _point_at(
        page,
        "link-2",
        "host1[1] - leaf1[1]: 10.0% (381.47 MiB/s), PortXmitWait 77 ticks/s, 4 errors (stale)",
    )
    title = page.evaluate(
        "() => document.querySelector('#fabric-graph')._cyreg.cy.getElementById('link-3')"
        ".data('title')"
    )
    assert title == "host2[1] - leaf1[2]: down (no rate) (stale)"

    # The window of the sweeps (custom, in the URL): the grid and the events are over it,
    # exactly as the API answers for that window.
    page.goto(f"{served}/fabric?{WINDOW}")
    expect(page.locator("#tr-preset input[value=custom]")).to_be_checked()  # the header's
    api = httpx.get(f"{served}/api/fabric/links?{WINDOW}&samples=false").json()
    expect(page.locator("#fabric-links-caption")).to_contain_text(
        "links 1–3 of 3, busiest first, from ", timeout=20_000
    )
    shown = {r["link"]: r for r in _grid(page)}
    for link in api["links"]:
        a, b = link["a"], link["b"]
        name = f"{a['name']}[{a['port']}] - {b['name']}[{b['port']}]"
        u = link["utilisation"]
        assert shown[name]["utilisation"] == ("?" if u is None else f"{u * 100:.1f} %"), name
        assert shown[name]["state"] == link["state"]
    assert shown["spine1[1] - leaf1[3]"]["utilisation"] != "?"
    t3 = "2023-11-14 22:13:23 UTC"
    assert _table_rows(page, "fabric-events-table")[:2] == [
        [t3, "open", "link_down", "host2[1] - leaf1[2]"],
        [t3, "open", "node_gone", "host2"],
    ]

    page.goto(f"{served}/fabric")  # live again (a custom window shows its own state)
    expect(summary).to_contain_text("3 links (1 down)", timeout=20_000)
    _drawn(page, 3)
    relink_host2(pg_url)  # same drawing: the page patches the elements' data and classes
    expect(summary).to_contain_text("(2 switches, 2 HCAs, 0 gone) · 3 links (0 down)")
    graph = _graph(page)
    assert (graph["nodes"], graph["edges"], graph["gone"]) == (4, 3, [])
    assert graph["link3"][0].startswith("link up ") and graph["link3"][0].endswith(" stale")
    assert errors == []


def test_api_failure_keeps_the_last_data_and_says_why(pg_url, served, browser_page):  # noqa: F811
    """The events query fails (its table renamed away for a moment): the page shows the
    server's error and keeps the graph and tables it had; once it answers again, the error
    goes."""
    import psycopg

    write_small_fabric(pg_url)
    page, errors = browser_page
    page.goto(served + "/fabric")
    status = page.locator("#fabric-status")
    expect(page.locator("#fabric-links-caption")).to_contain_text("links 1–3 of 3", timeout=20_000)
    _drawn(page, 3)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE fabric_events RENAME TO fabric_events_away")
        try:
            expect(status).to_contain_text("GET /api/fabric/", timeout=20_000)
            expect(status).to_contain_text("HTTP 500")
            assert len(_grid(page)) == 3
            expect(page.locator("#fabric-events-table tbody tr")).to_have_count(3)
            assert _graph(page)["edges"] == 3
        finally:
            conn.execute("ALTER TABLE fabric_events_away RENAME TO fabric_events")
    expect(status).to_be_empty(timeout=20_000)
    assert errors == []  # the API call fails on the server side; the callback still answers


def _job_on(host: str, job: str) -> bytes:
    """Frames of a two-rank job whose ranks ran on `host` (a simulated host name)."""
    return b"".join(
        wire.encode_frame(job_id=job, world_rank=rank, world_size=2, seq=0, host=host,
                          interval_start_ns=T0, interval_end_ns=T0 + 10**9, token="secret",
                          tables={"rank_info": wire.records("rank_info", [{"command": b"./a"}])})
        for rank in (0, 1)
    )  # fmt: skip


def test_search_focuses_a_node_or_a_job_host(pg_url, served, collector, browser_page):  # noqa: F811
    """The search box finds a switch by name, a host by GUID and a job by its id (its ranks'
    host), and says so when nothing matches."""
    write_small_fabric(pg_url)
    assert [s for s, _ in exchange(collector.address, _job_on("host1", "job-s"), acks=2)] == [0, 0]
    page, errors = browser_page
    page.goto(served + "/fabric")
    _drawn(page, 3)
    focused = "() => document.querySelector('#fabric-graph')._cyreg.cy.nodes('.focus')" \
              ".map((n) => n.data('label'))"  # fmt: skip
    message = page.locator("#fabric-search-message")
    for query, label, said in (
        ("spine1", "spine1", ""),
        ("0x0002c90300000012", "host2", ""),  # host2's GUID
        ("job-s", "host1", "job job-s: 1 host(s), showing host1"),
    ):
        page.fill("#fabric-search", query)
        page.press("#fabric-search", "Enter")
        page.wait_for_function(f"() => ({focused})().join() === {label!r}", timeout=20_000)
        expect(message).to_have_text(said)
    page.fill("#fabric-search", "nosuchthing")
    page.press("#fabric-search", "Enter")
    expect(message).to_have_text('nothing called "nosuchthing" in the fabric, and no such job')
    assert page.evaluate(focused) == ["host1"]
    assert [e for e in errors if "404" not in e] == []  # the job lookup's 404 is expected


def _summary_of_step(at_s: int) -> str:
    """The start of the summary line while the playback shows the step from `at_s`."""
    fmt = "%Y-%m-%d %H:%M:%S"
    start = datetime.fromtimestamp(at_s, UTC).strftime(fmt)
    end = datetime.fromtimestamp(at_s + 1, UTC).strftime(fmt)
    return f"replay of {start} – {end} UTC · "


def test_playback_panel_and_the_view_in_the_url(pg_url, served, browser_page):  # noqa: F811
    """Over the sweeps' window: playing moves the colours step by step (the spine link is
    coloured in the step of the second sweep, unknown in the next); the URL keeps the
    step and a reload shows it again; a click on a link opens its panel with exactly the
    series the API gives; the picker's live 1 h window changes what the grid and events
    are over."""
    write_small_fabric(pg_url)
    page, errors = browser_page
    t0 = FABRIC_T0 // SECOND
    page.goto(f"{served}/fabric?{WINDOW}")
    _drawn(page, 3)
    summary = page.locator("#fabric-summary")
    expect(summary).to_contain_text("busiest link 50.0 %", timeout=20_000)  # live

    page.click("#fabric-play")
    expect(page.locator("#fabric-play")).to_have_text("❚❚ pause")
    colour = "() => document.querySelector('#fabric-graph')._cyreg.cy" \
             ".getElementById('link-1').style('line-color')"  # fmt: skip
    # The step of the second sweep (the first one's deltas have no interval: no rate).
    page.wait_for_function(
        f"(s) => document.querySelector('#fabric-summary').textContent.startsWith(s)"
        f" && ({colour})() === 'rgb(16,68,129)'",
        arg=_summary_of_step(t0 + 2), timeout=30_000,
    )  # fmt: skip
    page.wait_for_function(
        f"(s) => document.querySelector('#fabric-summary').textContent.startsWith(s)"
        f" && ({colour})() === 'rgb(184,192,204)'",
        arg=_summary_of_step(t0 + 3), timeout=30_000,
    )  # fmt: skip
    page.wait_for_function(
        "(s) => document.querySelector('#fabric-summary').textContent.startsWith(s)",
        arg=_summary_of_step(t0 + 2),
        timeout=30_000,
    )
    page.click("#fabric-play")
    expect(page.locator("#fabric-play")).to_have_text("▶ play")
    url = page.url
    assert f"from={t0}" in url and "step=1" in url and "at=" in url, url
    step_at = int(float(url.split("at=")[1].split("&")[0]))
    # A reload (or the link shared) shows the same step.
    page.goto(url)
    expect(summary).to_contain_text(_summary_of_step(step_at), timeout=20_000)
    expect(page.locator("#fabric-playback-shown")).to_contain_text("graph: replaying ")
    page.locator("#fabric-playback .mantine-Slider-thumb").hover()  # its label: the step, UTC
    expect(page.locator("#fabric-playback .mantine-Slider-label")).to_have_text(
        format_utc_ns(step_at * SECOND)
    )
    page.mouse.move(0, 0)
    page.click("#fabric-live")
    # back to the state over the whole window (a custom one: not the newest sweep)
    whole = f"replay of {format_utc_ns(t0 * SECOND)[:-4]} – {format_utc_ns((t0 + 5) * SECOND)}"
    expect(summary).to_contain_text(whole, timeout=20_000)
    expect(summary).to_contain_text("busiest link 50.0 %")
    expect(page.locator("#fabric-playback-shown")).to_contain_text("graph: the whole window")
    # the location is written by its own callback, after the summary
    page.wait_for_function("() => !location.search.includes('at=')", timeout=20_000)

    # The detail panel of the spine link: its series over the window, as the API says.
    _drawn(page, 3)
    _click_until(page, "link-1", "#fabric-panel-title", "link spine1[1] - leaf1[3]")
    assert "focus=link-1" in page.url
    api = httpx.get(f"{served}/api/fabric/series?link=1&{WINDOW}").json()
    drawn = "() => { const g = document.querySelector('#fabric-panel-series .js-plotly-plot');" \
            " return g && g.data ? g.data.map((t) => [t.name, t.y]) : null; }"  # fmt: skip
    page.wait_for_function(f"() => ({drawn})() !== null", timeout=20_000)
    traces = dict(page.evaluate(drawn))
    assert traces["a → b"] == api["columns"]["a_to_b_bytes_per_s"]
    assert traces["b → a"] == api["columns"]["b_to_a_bytes_per_s"]
    assert any(v for v in traces["a → b"] if v)  # 2 GB/s in the second sweep
    expect(page.locator("#fabric-panel-jobs")).to_contain_text("No job's traffic")
    page.goto(page.url)  # reloaded: the panel is open on the same link
    expect(page.locator("#fabric-panel-title")).to_have_text(
        "link spine1[1] - leaf1[3]", timeout=20_000
    )

    # A node's panel: its ports summed; the close button closes the panel.
    _drawn(page, 3)
    spine = page.evaluate(
        "() => document.querySelector('#fabric-graph')._cyreg.cy.nodes()"
        ".filter((n) => n.data('label') === 'spine1')[0].id()"
    )
    _click_until(page, spine, "#fabric-panel-title", "node spine1")
    assert f"focus={spine}" in page.url
    page.click("#fabric-panel-close")
    expect(page.locator("#fabric-panel")).to_have_class("fabric-panel closed")
    assert "focus=" not in page.url

    # The window picker: live 1 h; the grid and the events are over it, in the URL.
    page.get_by_text("live 1 h").click()
    expect(page.locator("#fabric-events-table")).to_contain_text(
        "over the last 1 h", timeout=20_000
    )
    expect(page.locator("#fabric-links-caption")).to_contain_text("in the newest sweep")
    assert "live=1h" in page.url and "from=" not in page.url
    assert errors == []
