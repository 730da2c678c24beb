"""The Fabric page at cluster scale, in Chromium, on the simulator: 512 and 1,792 hosts.

The simulator runs the fat tree, the real sampler sweeps it into the test database every
second (in a thread), the real API + dashboard serve it. The page must draw the aggregated
view (every switch, each leaf's hosts folded into one group: the element count is exactly
that, far below the full graph's), within loose time bounds (the benchmark,
bench/fabric_viewers.py, measures against the targets: first render <= 2 s, tick <= 1 s;
this machine is shared, so the test allows far more); show an erroring host link in the aggregated
view (its leaf's bundle red); and focus a searched host (its group expanded, the host
centred and marked); page through the links grid. No console errors.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench.fabric_viewers import measure_page
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.fattree import FatTree, fat_tree
from emulator.ibsim import FabricSim, TrafficEmulator
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import free_port, serving
from tests.e2e.test_dashboard import browser_page  # noqa: F401 (fixture)

#: Loose bounds for a shared 2-core machine (the targets: 2 s and 1 s; this test's first
#: viewer also finds the server's shared answers cold, and the sampler shares its process).
FIRST_RENDER_S = 30.0
TICK_MS = 5_000


@pytest.fixture(params=[512, 1792], ids=["512-hosts", "1792-hosts"])
def sampled(request, pg_url: str, scratch_root: Path) -> Iterator[tuple[FatTree, str, object]]:
    """(tree, base URL, traffic emulator): the simulator of the tree sampled every second
    into the test database, served with the dashboard."""
    tree = fat_tree(request.param)
    with (
        FabricSim(tree, scratch_root / f"scale-{request.param}") as sim,
        MadSource(env=sim.client_env(), workdir=sim.workdir) as mad,
    ):
        sampler = FabricSampler(pg_url, mad, interval_s=1.0, rediscover_s=3600)
        sampler.step()
        emu = TrafficEmulator(sim, mad, sampler.topology)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                sampler.step()

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        engine = make_engine(pg_url)
        try:
            with serving(create_site(engine, api_base_url=base, fabric_fold_above=256), port=port):
                yield tree, base, emu
        finally:
            stop.set()
            thread.join()
            sampler.store.close()
            engine.dispose()


def test_large_fabric_page(sampled, browser_page):  # noqa: F811
    tree, base, emu = sampled
    page, errors = browser_page
    figures = measure_page(page, base, ticks=3)
    print(f"\n{len(tree.hosts)} hosts: {figures}")
    assert figures["first_render_s"] < FIRST_RENDER_S
    assert figures["tick_max_ms"] < TICK_MS
    # Aggregated: every switch, one group per leaf; switch links, one bundle per leaf.
    switch_links = len(tree.links) - len(tree.hcas)
    assert (figures["nodes"], figures["edges"]) == (
        len(tree.switches) + len(tree.leaves),
        switch_links + len(tree.leaves),
    )
    assert figures["nodes"] + figures["edges"] < (len(tree.switches) + len(tree.hcas)) / 2 + len(
        tree.links
    )

    cy = "document.querySelector('#fabric-graph')._cyreg.cy"
    leaf = page.evaluate(f"() => {cy}.nodes().filter((n) => n.data('label') === "
                         f"'{tree.leaves[4]}')[0].id()")  # fmt: skip
    # An erroring host link (errors in one sweep) shows in the aggregated view: its leaf's
    # bundle turns red.
    emu.raise_counter(tree.leaves[4], 3, "symbol_errors", 7)  # a host link of leaf05
    page.wait_for_function(
        f"(id) => {cy}.getElementById('bundle-' + id).hasClass('error')", arg=leaf, timeout=20_000
    )
    title = page.evaluate(f"(id) => {cy}.getElementById('bundle-' + id).data('title')", leaf)
    # (" (stale)" when this loaded machine's sampler fell behind: said, not hidden)
    title = title.removesuffix(" (stale)")
    assert title.startswith("16 host links: ") and title.endswith(", 7 errors"), title

    # Search a host folded into its group: the group opens, the host is centred and marked.
    host = tree.hosts[777 % len(tree.hosts)]
    page.fill("#fabric-search", host)
    page.press("#fabric-search", "Enter")
    centred = (
        f"(name) => {{ const c = {cy}; const n = c.nodes('.focus');"
        " if (n.length !== 1 || n.data('label') !== name) return false;"
        " const p = n.renderedPosition();"
        " const off = (v, w) => Math.abs(v / w - 0.5);"
        " return off(p.x, c.width()) < 0.05 && off(p.y, c.height()) < 0.05; }"
    )
    page.wait_for_function(centred, arg=host, timeout=20_000)
    # The group of that host's leaf is expanded: its 16 hosts are nodes now.
    expanded = page.evaluate(f"() => {cy}.nodes('.hca').length")
    assert expanded == 16
    expect(page.locator("#fabric-search-message")).to_have_text("")

    # The links grid pages through every link (100 a page), busiest first.
    caption = page.locator("#fabric-links-caption")
    n = f"{len(tree.links):,}"
    expect(caption).to_contain_text(f"links 1–100 of {n}, busiest first, in the newest sweep")
    page.click("#fabric-links-older")
    expect(caption).to_contain_text(f"links 101–200 of {n}", timeout=20_000)
    page.click("#fabric-links-newer")
    expect(caption).to_contain_text(f"links 1–100 of {n}", timeout=20_000)
    assert errors == []
