"""End to end: every page of the dashboard (enumerated from Dash's page registry, so a new
page cannot be forgotten) in Chromium, signed in as alice with an API token, over alice's
and bob's jobs and a small fabric: each page shows alice's data and nothing that names
bob's job, in what it shows and in every answer the browser receives; an admin's
dashboard lists both jobs. The dashboard reads the API as the page's viewer (the viewer
pass, server/access/gate.py), so this also proves it never reads as anyone else.
"""

from __future__ import annotations

from collections.abc import Iterator

import dash
import pytest
from playwright.sync_api import Page, Response, expect

from server.access.viewer import Access
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.access.data import (
    ALICE_JOB,
    BOB_JOB,
    BOB_NAMES,
    save_two_users_incident,
    send_two_users_jobs,
    token_for,
)
from tests.conftest import chromium_page, free_port, serving
from tests.server.fabric_data import write_small_fabric

#: Per page (its path template): the URL alice opens, and what it shows once its data has
#: arrived (selector, text it contains).
READY = {
    "/": ("/", "#ov-fabric", "links up"),
    "/jobs": ("/jobs", "#jobs-grid", ALICE_JOB),
    "/fabric": ("/fabric", "#fabric-summary", "3 links (1 down)"),
    "/jobs/<job>": (f"/jobs/{ALICE_JOB}", "#jv-title", f"Job {ALICE_JOB}"),
    "/incidents": ("/incidents", "#inc-caption", "1 incident"),
    "/incidents/<incident_id>": ("/incidents/{incident}", "#inc-jobs", ALICE_JOB),
    "/compare": (f"/compare?b={ALICE_JOB}", "#cmp-history", f"{ALICE_JOB} run 1"),
}


@pytest.fixture
def served(collector, pg_url) -> Iterator[dict]:
    """The API + dashboard over both users' jobs (auth_mode=oidc, carol an admin)."""
    send_two_users_jobs(collector)
    write_small_fabric(pg_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    incident = save_two_users_incident(engine)  # bob's job its aggressor, alice's its victim
    access = Access(mode="oidc", admins=frozenset({"carol"}))
    try:
        with serving(create_site(engine, api_base_url=base, refresh_ms=1000, access=access),
                     port=port):  # fmt: skip
            yield {"base": base, "alice": token_for(engine, "alice"),
                   "carol": token_for(engine, "carol"), "incident": incident}  # fmt: skip
    finally:
        engine.dispose()


@pytest.fixture
def browser() -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page and the list its console errors are collected into."""
    with chromium_page() as page_and_errors:
        yield page_and_errors


def _received(page: Page) -> list[str]:
    """The bodies of every dashboard answer the page receives from now on."""
    bodies: list[str] = []

    def keep(response: Response) -> None:
        if "/_dash-update-component" in response.url:
            bodies.append(response.text())

    page.on("response", keep)
    return bodies


def test_every_page_shows_alice_nothing_of_bobs_job(served, browser):
    page, errors = browser
    page.set_extra_http_headers({"Authorization": f"Bearer {served['alice']}"})
    bodies = _received(page)
    pages = sorted(p.get("path_template") or p["path"] for p in dash.page_registry.values())
    assert pages == sorted(READY), "say in READY what each new page shows when ready"
    for template in pages:
        url, selector, text = READY[template]
        page.goto(served["base"] + url.format(incident=served["incident"]))
        expect(page.locator(selector)).to_contain_text(text, timeout=20_000)
        page.wait_for_timeout(2100)  # two more refreshes
        shown = page.inner_text("body")
        assert [n for n in BOB_NAMES if n in shown] == [], url
    assert bodies, "the pages received no data"
    leaked = [n for body in bodies for n in BOB_NAMES if n in body]
    assert leaked == []
    # bob's job by its URL: the same "unknown job" as a job that does not exist
    bodies.clear()
    page.goto(f"{served['base']}/jobs/{BOB_JOB}")
    expect(page.locator("#jv-status")).to_contain_text(f"unknown job '{BOB_JOB}'", timeout=20_000)
    page.wait_for_timeout(2100)
    shown = page.inner_text("body").replace(BOB_JOB, "")
    assert [n for n in BOB_NAMES if n in shown] == []
    leaked = [n for body in bodies for n in BOB_NAMES if n in body.replace(BOB_JOB, "")]
    assert leaked == []
    assert errors == []


def test_an_admins_dashboard_lists_every_job(served, browser):
    page, errors = browser
    page.set_extra_http_headers({"Authorization": f"Bearer {served['carol']}"})
    page.goto(served["base"] + "/jobs")
    table = page.locator("#jobs-grid")
    expect(table).to_contain_text(BOB_JOB, timeout=20_000)
    expect(table).to_contain_text(ALICE_JOB)
    assert errors == []


def test_without_a_login_no_page_is_served(served, browser):
    page, _ = browser
    for url, _, _ in READY.values():
        response = page.request.get(served["base"] + url.format(incident=served["incident"]),
                                    max_redirects=0)  # fmt: skip
        assert (response.status, response.headers["location"]) == (302, "/auth/login")
    update = page.request.post(served["base"] + "/_dash-update-component", data="{}")
    assert update.status == 401
    login = page.request.get(served["base"] + "/auth/login", max_redirects=0)
    assert login.status == 503  # no provider configured here: said so, never a 500
    assert login.json()["detail"].startswith("the login provider '' cannot be reached")


def test_an_admin_compares_two_users_runs_and_a_user_cannot(served, browser):
    """The Compare page carries the runs' owners from its URL (issue #28 point 4): carol (an
    admin) compares bob's run with alice's, and its report buttons name both owners; alice
    opening the same URL gets bob's job as an unknown job, nothing of it shown."""
    page, errors = browser
    url = f"{served['base']}/compare?b={BOB_JOB}&b_owner=bob&a={ALICE_JOB}&a_owner=alice"
    page.set_extra_http_headers({"Authorization": f"Bearer {served['carol']}"})
    page.goto(url)
    sides = page.locator("#cmp-sides")
    expect(sides).to_contain_text(f"b: {BOB_JOB} run 1", timeout=20_000)
    expect(sides).to_contain_text(f"a: {ALICE_JOB} run 1")
    assert page.locator("#cmp-report-pdf").get_attribute("href") == (
        f"/api/reports/compare?b={BOB_JOB}&b_owner=bob&a={ALICE_JOB}&a_owner=alice&format=pdf"
    )
    page.set_extra_http_headers({"Authorization": f"Bearer {served['alice']}"})
    page.goto(url)
    expect(page.locator("#cmp-error")).to_contain_text(f"unknown job '{BOB_JOB}'",
                                                        timeout=20_000)  # fmt: skip
    page.wait_for_timeout(1000)
    shown = page.inner_text("body").replace(BOB_JOB, "")
    assert [n for n in BOB_NAMES if n in shown and n != "bob"] == []
    assert errors == []
