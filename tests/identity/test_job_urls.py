"""Job URLs name the owner (#13 point 1 of the follow-up): two real Unix users run MPI jobs
with the same job id through the hooks (proven over the collector's Unix socket,
SO_PEERCRED), so the database holds two jobs of one id. An admin reading that id without
an owner gets a 409 that lists both owners, on every job route (enumerated from the app);
`?owner=<user>` opens each one with its own exact bytes; each user still opens their own
job by its id alone; the job list's rows link to the qualified pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import expect

from frontend import components
from server.access.viewer import Access
from server.app import create_app
from stacklens.api_models import JobList
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.access.data import token_for
from tests.access.test_owner_filter import _job_routes
from tests.conftest import TABLES, chromium_page, free_port, query, serving
from tests.e2e.test_jobs_page import grid_rows
from tests.hooks import jobs
from tests.identity.test_proven_senders import (
    EXPECTED,
    ITERATIONS,
    RANKS,
    SIZE,
    owners_of,
    proven_collector,
    ring_as,
    user_job_env,
)

JOB = "ident-same-id"
#: B's messages are this size (+ rank): its job's bytes differ from A's.
B_SIZE = 1000
B_EXPECTED = {(r, (r + 1) % RANKS): (ITERATIONS * (B_SIZE + r), ITERATIONS) for r in range(RANKS)}


def _cells(matrix: dict) -> dict[tuple[int, int], tuple[int, int]]:
    return {(c["src"], c["dst"]): (c["bytes"], c["messages"]) for c in matrix["cells"]}


@pytest.fixture(scope="module")
def same_id(pg_server, shared_dir, munge_socket, users) -> Iterator[dict]:
    """A's and B's jobs of one id, sent through the hooks as each user; the API (with the
    dashboard mounted) and tokens for A, B and an admin."""
    a, b = users
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")
    unix = {"STACKLENS_COLLECTOR_SOCKET": str(shared_dir / "ingest.sock")}
    with proven_collector(pg_server, shared_dir, munge_socket) as collector:
        for user, size in ((a, SIZE), (b, B_SIZE)):
            result = ring_as(user, user_job_env(collector.endpoint, user, JOB, **unix), size=size)
            assert result.returncode == 0 and "stacklens:" not in result.stderr, result.stderr
    assert owners_of(pg_server, JOB) == sorted([a.pw_uid, b.pw_uid])
    assert query(pg_server, 'SELECT DISTINCT "user" FROM jobs ORDER BY 1') == [
        (a.pw_name,), (b.pw_name,)]  # fmt: skip
    engine = make_engine(pg_server)
    app = create_app(engine, access=Access(mode="oidc", admins=frozenset({"sladmin"})))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {
            who: {"Authorization": f"Bearer {token_for(engine, name)}"}
            for who, name in (("a", a.pw_name), ("b", b.pw_name), ("admin", "sladmin"))
        }
        yield {"app": app, "client": client, "headers": headers, "a": a.pw_name, "b": b.pw_name}
    engine.dispose()


def _url(route, job: str, query: str = "") -> str:
    return re.sub(r"\{job(:path)?\}", quote(job, safe=""), route.path) + query


def test_an_admin_gets_409_naming_both_owners_on_every_job_route(same_id):
    client, admin = same_id["client"], same_id["headers"]["admin"]
    a, b = same_id["a"], same_id["b"]
    with_job, _ = _job_routes(same_id["app"])
    assert len(with_job) >= 11  # runs, matrix, ops, io, collectives, sizes, rma, ranks, ...
    for route in with_job:
        takes = {p.alias for p in route.dependant.query_params}
        assert "owner" in takes, route.path  # every job route takes the qualifier
        both = client.get(_url(route, JOB), headers=admin)
        assert both.status_code == 409, (route.path, both.text)
        assert both.json() == {
            "detail": f"job {JOB!r} is the id of jobs of 2 owners ({a!r}, {b!r}): name one "
            f"with ?owner=<user>, e.g. ?owner={a}"
        }
        for owner in (a, b):
            one = client.get(_url(route, JOB, f"?owner={owner}"), headers=admin)
            assert one.status_code == 200, (route.path, one.text)
        nobody = client.get(_url(route, JOB, "?owner=nobody"), headers=admin)
        assert nobody.status_code == 404, (route.path, nobody.text)
        assert nobody.json() == {"detail": f"unknown job {JOB!r} of owner 'nobody'"}
    overview = client.get(f"/api/overview?job={JOB}", headers=admin)
    assert overview.status_code == 409 and f"({a!r}, {b!r})" in overview.json()["detail"]


def test_each_owner_qualified_url_opens_that_owners_exact_job(same_id):
    client, admin = same_id["client"], same_id["headers"]["admin"]
    a, b = same_id["a"], same_id["b"]
    for owner, expected in ((a, EXPECTED), (b, B_EXPECTED)):
        matrix = client.get(f"/api/jobs/{JOB}/matrix?owner={owner}", headers=admin).json()
        assert _cells(matrix) == expected
        ranks = client.get(f"/api/jobs/{JOB}/ranks?owner={owner}&run=1", headers=admin).json()
        assert len(ranks["ranks"]) == RANKS
        shown = client.get(f"/api/overview?job={JOB}&owner={owner}", headers=admin).json()
        assert _cells(shown["shown"]["matrix"]) == expected
    # the list's first job is shown with its own owner: no 409 for the default view
    first = client.get("/api/overview", headers=admin).json()
    newest = first["jobs"]["jobs"][0]
    assert _cells(first["shown"]["matrix"]) == (EXPECTED if newest["user"] == a else B_EXPECTED)


def test_each_user_opens_their_own_job_by_its_id_alone(same_id):
    client, headers = same_id["client"], same_id["headers"]
    a, b = same_id["a"], same_id["b"]
    for who, owner, other, expected in (("a", a, b, EXPECTED), ("b", b, a, B_EXPECTED)):
        mine = client.get(f"/api/jobs/{JOB}/matrix", headers=headers[who])
        assert mine.status_code == 200 and _cells(mine.json()) == expected
        qualified = client.get(f"/api/jobs/{JOB}/matrix?owner={owner}", headers=headers[who])
        assert _cells(qualified.json()) == expected
        theirs = client.get(f"/api/jobs/{JOB}/matrix?owner={other}", headers=headers[who])
        # the other owner's job is unknown to this user, as any job that does not exist
        assert theirs.status_code == 404
        assert theirs.json() == {"detail": f"unknown job {JOB!r} of owner {other!r}"}


def test_the_job_list_links_every_row_to_its_owners_page(same_id):
    client, admin = same_id["client"], same_id["headers"]["admin"]
    a, b = same_id["a"], same_id["b"]
    listed = JobList.model_validate(client.get("/api/jobs", headers=admin).json())
    rows = components.job_rows(listed)
    assert sorted(r["id"] for r in rows) == sorted(
        [f"/jobs/{JOB}?owner={a}", f"/jobs/{JOB}?owner={b}"]
    )
    assert {r["job"] for r in rows} == {JOB}
    # the old URL still opens a job whose id names one job
    assert components.job_path("solo") == "/jobs/solo"
    assert components.job_path("run/7", "a b") == "/jobs/run%2F7?owner=a%20b"


def test_the_job_list_has_a_row_per_owner_with_only_its_own_runs(same_id):
    """Issue #24 finding 6: the job list (GET /api/jobs, and the list of GET /api/overview)
    is grouped by (owner, job id): the admin sees two rows of the id, each with its own
    owner's run and command only (its messages' size in its arguments); each user sees
    one row, theirs."""
    client, headers = same_id["client"], same_id["headers"]
    a, b = same_id["a"], same_id["b"]
    ring = jobs.example("openmpi", "ring_allreduce")
    command = {a: f"{ring} {ITERATIONS} {SIZE} 20", b: f"{ring} {ITERATIONS} {B_SIZE} 20"}

    def rows(who: str) -> list[list[tuple]]:
        listed = client.get("/api/jobs", headers=headers[who]).json()["jobs"]
        shown = client.get("/api/overview", headers=headers[who]).json()["jobs"]["jobs"]
        return [
            sorted((j["job"], j["user"], j["command"],
                    [(r["run"], r["user"], r["command"], r["ranks_seen"]) for r in j["runs"]])
                   for j in answer)
            for answer in (listed, shown)
        ]  # fmt: skip

    def row(owner: str) -> tuple:
        return (JOB, owner, command[owner], [(1, owner, command[owner], RANKS)])

    assert rows("admin") == [sorted([row(a), row(b)])] * 2
    assert rows("a") == [[row(a)]] * 2
    assert rows("b") == [[row(b)]] * 2


def test_the_job_page_says_which_owners_or_shows_the_one_named(same_id, pg_server):
    """In Chromium, as the admin: the job page of the id alone says which owners to choose
    from; with ?owner= it shows that owner's job and exact bytes; a click on a row of the
    job list opens the page of that row's owner."""
    a, b = same_id["a"], same_id["b"]
    engine = make_engine(pg_server)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    access = Access(mode="oidc", admins=frozenset({"sladmin"}))
    token = token_for(engine, "sladmin")
    app = create_site(engine, api_base_url=base, refresh_ms=1000, access=access)
    try:
        with serving(app, port=port), chromium_page() as (page, errors):
            page.set_extra_http_headers({"Authorization": f"Bearer {token}"})
            page.goto(f"{base}/jobs/{JOB}")
            expect(page.locator("#jv-status")).to_contain_text(
                f"job {JOB!r} is the id of jobs of 2 owners ({a!r}, {b!r})", timeout=90_000
            )
            page.goto(f"{base}/jobs/{JOB}?owner={b}")
            expect(page.locator("#jv-title")).to_contain_text(f"Job {JOB} of {b}", timeout=90_000)
            pairs = page.locator("#card-matrix-pairs .ag-center-cols-container .ag-row")
            expect(pairs).to_have_count(RANKS, timeout=30_000)
            shown = {(int(r["src"]), int(r["dst"])): int(r["bytes"])
                     for r in grid_rows(page, "card-matrix-pairs")}  # fmt: skip
            assert shown == {pair: sent for pair, (sent, _) in B_EXPECTED.items()}
            page.goto(f"{base}/jobs")
            row = page.locator("#jobs-grid .ag-row", has_text=a)
            expect(row).to_contain_text(JOB, timeout=90_000)
            row.locator("[col-id=command]").click()
            expect(page).to_have_url(f"{base}/jobs/{JOB}?owner={a}", timeout=30_000)
            expect(page.locator("#jv-title")).to_contain_text(f"Job {JOB} of {a}", timeout=90_000)
            assert errors == []
    finally:
        engine.dispose()
