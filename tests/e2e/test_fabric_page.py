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

import pytest
from playwright.sync_api import Page, expect

from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine
from tests.collector.test_ingest import T0, exchange
from tests.conftest import free_port, serving
from tests.e2e.test_dashboard import _table_rows, browser_page  # noqa: F401 (fixture)
from tests.server.fabric_data import relink_host2, write_small_fabric


@pytest.fixture
def served(pg_url) -> Iterator[str]:
    """The stacklens API + dashboard over the test database on a free port; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    try:
        with serving(create_app(engine, api_base_url=base, refresh_ms=300), port=port):
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
    """Where an element of the graph is on the page (its rendered midpoint)."""
    box = page.locator("#fabric-graph").bounding_box()
    point = page.evaluate(
        "(id) => document.querySelector('#fabric-graph')._cyreg.cy"
        ".getElementById(id).renderedMidpoint()",
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


def test_fabric_page_shows_load_errors_and_down_links(pg_url, served, browser_page):  # noqa: F811
    write_small_fabric(pg_url)
    page, errors = browser_page
    page.goto(served + "/")
    page.get_by_role("link", name="Fabric").click()
    expect(page).to_have_url(served + "/fabric")

    summary = page.locator("#fabric-summary")
    expect(summary).to_have_text(
        "4 nodes (2 switches, 2 HCAs, 1 gone) · 3 links (1 down) · "
        "1 with errors in the last sweep · busiest link 50.0 %",
        timeout=20_000,
    )
    expect(page.locator("#fabric-links-table tbody tr")).to_have_count(3)
    # Columns: link, state, utilisation, a->b, b->a, capacity, symbol errors, link error
    # recovery, link downed, rcv errors, xmit discards, VL15 dropped, xmit wait, sampled.
    t2 = "2023-11-14 22:13:22 UTC"
    assert _table_rows(page, "fabric-links-table") == [
        ["host1[1] - leaf1[1]", "up", "10.0 %", "0", "400000000", "4000000000"]
        + ["3", "1", "0", "?", "0", "0", "77", t2],
        ["host2[1] - leaf1[2]", "down", "?", "?", "?", "2000000000"]  # no stale rates
        + ["?", "?", "?", "?", "?", "?", "?", "?"],
        ["spine1[1] - leaf1[3]", "up", "50.0 %", "2000000000", "1000000000", "4000000000"]
        + ["0", "0", "0", "0", "0", "0", "0", t2],
    ]
    t3 = "2023-11-14 22:13:23 UTC"
    # the events overlapping the last 15 minutes: still open, by start (leaf1[1]'s error
    # burst began with the interval of the second sweep)
    assert _table_rows(page, "fabric-events-table") == [
        [t3, "link_down", "host2[1] - leaf1[2]"],
        [t3, "node_gone", "host2"],
        ["2023-11-14 22:13:21 UTC", "error_burst", "leaf1[1]"],
    ]

    _drawn(page, 3)
    graph = _graph(page)
    assert (graph["nodes"], graph["edges"], graph["gone"]) == (4, 3, ["host2"])
    # Colours as cytoscape computes them: 50 % on the log scale (0.01 % .. 100 %, 4 steps)
    # is 92.5 % of the way, 70 % between #2171b5 and #08306b; red errors, dashed down.
    assert graph["link1"] == ["link up", "rgb(16,68,129)", "solid"]
    assert graph["link2"] == ["link up error", "rgb(217,45,32)", "solid"]
    assert graph["link3"] == ["link down unknown", "rgb(152,162,179)", "dashed"]

    # Pointing at a link with the mouse says what it carries.
    _point_at(page, "link-2", "host1[1] - leaf1[1]: 10.0% (381.47 MiB/s), 4 errors")

    relink_host2(pg_url)  # same drawing: the page patches the elements' data and classes
    expect(summary).to_contain_text("(2 switches, 2 HCAs, 0 gone) · 3 links (0 down)")
    # host2's link_down and node_gone ended (years ago): out of the last 15 minutes
    expect(page.locator("#fabric-events-table tbody tr")).to_have_count(1)
    expect(page.locator("#fabric-events-table tbody tr").first).to_contain_text("error_burst")
    graph = _graph(page)
    assert (graph["nodes"], graph["edges"], graph["gone"]) == (4, 3, [])
    assert graph["link3"][0] == "link up"
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
    expect(page.locator("#fabric-links-table tbody tr")).to_have_count(3, timeout=20_000)
    _drawn(page, 3)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE fabric_events RENAME TO fabric_events_away")
        try:
            expect(status).to_contain_text("GET /api/fabric/events", timeout=20_000)
            expect(status).to_contain_text("HTTP 500")
            expect(page.locator("#fabric-links-table tbody tr")).to_have_count(3)
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
