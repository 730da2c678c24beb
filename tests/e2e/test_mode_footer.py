"""The footer of every page says the deployment's modes (issue #24 finding 7): in
Chromium, the dashboard of a trusted-ingest deployment (the real app, its collector, the
real database) into which alice's and bob's frames came shows "ingest trusted, auth none ·
2 users sent runs in the last 24 h" and the warning, on the Jobs and the Fabric page, with
no console error."""

from __future__ import annotations

import time

from playwright.sync_api import expect

from collector.service import BackgroundCollector
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, free_port, serving
from tests.server.test_deployment_modes import WARNING, send_runs


def test_the_footer_says_the_modes_and_warns_of_trusted_ingest(pg_url, control_socket):
    engine = make_engine(pg_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        with (
            BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running,
            serving(create_site(engine, api_base_url=base, collector=running.link), port=port),
            chromium_page() as (page, errors),
        ):
            send_runs(running.address, ["alice", "bob"], time.time_ns())
            for path in ("/", "/fabric"):
                page.goto(base + path)
                footer = page.locator("#mode-footer .mode-line")
                expect(footer).to_have_text(
                    "ingest trusted, auth none · 2 users sent runs in the last 24 h",
                    timeout=60_000,
                )
                expect(page.locator("#mode-warning")).to_have_text(f"Warning: {WARNING}")
                expect(page.locator("#mode-warning")).to_be_visible()
            assert errors == []
    finally:
        engine.dispose()
