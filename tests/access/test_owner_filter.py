"""Users see their own jobs, admins everything (#13 point 4), for every route of the app.

The routes are enumerated from the app itself, so a route added later is covered (or the
test fails until it is classified): alice, signed in with an API token, gets 404 for
every job endpoint of bob's job (as for a job that does not exist) and 200 for her own;
no answer she gets names bob's job, command, files, hosts or user; bob sees only his job;
an admin sees both. The jobs come through the real collector into the real database.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Mount, Route

from server.access.viewer import Access
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.access.data import ALICE_JOB, BOB_JOB, BOB_NAMES, send_two_users_jobs, token_for
from tests.server.fabric_data import write_small_fabric

#: Routes that take no job and read no job data, by path: answered to anyone signed in.
JOBLESS = {
    "/api/health", "/api/overview", "/api/jobs", "/api/fabric/topology", "/api/fabric/links",
    "/api/fabric/groups", "/api/fabric/events", "/api/fabric/state", "/api/fabric/series",
    "/metrics", "/openapi.json", "/docs",
    "/api/incidents",
    "/api/reports/window",  # names the viewer's jobs only, counts the others
    "/api/deployment",  # the modes, and how many users sent runs: names nobody
}  # fmt: skip
#: One incident: other users' jobs in it are "another job" (tests/server/test_incidents.py).
INCIDENT = {"/api/incidents/{incident_id}", "/api/reports/incidents/{incident_id}"}
#: A link's attribution, a node's jobs and a link group's jobs: other users' jobs on it are
#: "another job", without id or user (tests/fabric/test_attribution.py checks the masking
#: for alice, bob and an admin on links; tests/fabric/test_node_jobs.py on nodes; a group's
#: jobs are its busiest member's attribution, server/fabric/groups.jobs_on).
LINK_ATTRIBUTION = {
    "/api/fabric/links/{link}/attribution", "/api/fabric/links/{link}/attribution/series",
    "/api/fabric/nodes/{guid}/jobs", "/api/fabric/groups/{group}",
}  # fmt: skip
#: Routes that name runs by query parameters (?job=, ?a=, ?b=): checked below.
RUNS_BY_QUERY = {"/api/compare", "/api/compare/history", "/api/reports/compare"}
#: Routes that write: the ingest has its own gate (server/ingest/gate.py).
WRITES = {"/api/ingest/frames"}
#: The catch-all 404 for unknown /api/ paths (server/errors.py).
CATCH_ALL = {"/api/{rest:path}"}
#: The OIDC login (server/access/oidc.py; tests/access/test_modes.py).
LOGIN = {"/auth/login", "/auth/callback", "/auth/logout"}


@pytest.fixture
def two_users(collector, pg_url) -> Iterator[dict]:
    """The API (with the dashboard mounted) over alice's and bob's jobs and a small fabric;
    API clients as alice, bob and carol (an admin)."""
    send_two_users_jobs(collector)
    write_small_fabric(pg_url)
    engine = make_engine(pg_url)
    app = create_site(engine, api_base_url="http://127.0.0.1",
                     access=Access(mode="oidc", admins=frozenset({"carol"})))  # fmt: skip
    clients = {}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for user in ("alice", "bob", "carol"):
            clients[user] = {"Authorization": f"Bearer {token_for(engine, user)}"}
        yield {"app": app, "client": client, "headers": clients}
    engine.dispose()


def _flat(routes: list) -> Iterator:
    """Every route, those of included routers too (FastAPI keeps those in wrappers that
    list them as `effective_candidates`)."""
    for route in routes:
        if hasattr(route, "effective_candidates"):
            yield from _flat(route.effective_candidates())
        else:
            yield route


def _job_routes(app) -> tuple[list, list[str]]:
    """(the routes with a job in their path; the paths of every other route), failing on a
    route of a kind this test does not know."""
    with_job, others = [], []
    for route in _flat(app.routes):
        kind = getattr(route, "original_route", route)
        if isinstance(kind, APIRoute) and "{job" in route.path:
            assert route.methods == {"GET"}, route.path
            with_job.append(route)
        elif isinstance(kind, Route | Mount):
            others.append(route.path)
        else:
            raise AssertionError(f"a route of an unknown kind: {route!r}")
    return with_job, others


def _url(route, job: str) -> str:
    return re.sub(r"\{job(:path)?\}", job, route.path)


def _names_of_bob(body: str) -> list[str]:
    return [name for name in BOB_NAMES if name in body]


def test_every_route_is_classified(two_users):
    with_job, others = _job_routes(two_users["app"])
    assert len(with_job) >= 8  # runs, matrix, ops, io, collectives, sizes, rma, ranks
    dash_and_static = {"", "/docs-assets"}  # the dashboard (Mount "/") and docs files
    unknown = (
        set(others)
        - JOBLESS
        - INCIDENT
        - LINK_ATTRIBUTION
        - RUNS_BY_QUERY
        - WRITES
        - CATCH_ALL
        - LOGIN
        - dash_and_static
    )
    assert unknown == set(), f"classify these routes in this test: {sorted(unknown)}"


def test_alice_gets_404_for_every_endpoint_of_bobs_job(two_users):
    client, alice = two_users["client"], two_users["headers"]["alice"]
    with_job, _ = _job_routes(two_users["app"])
    per_run = 0
    for route in with_job:
        mine = client.get(_url(route, ALICE_JOB), headers=alice)
        assert mine.status_code == 200, (route.path, mine.text)
        takes_run = "run" in {p.alias for p in route.dependant.query_params}
        per_run += takes_run
        for query in ("", "?run=1") if takes_run else ("",):
            theirs = client.get(_url(route, BOB_JOB) + query, headers=alice)
            assert theirs.status_code == 404, (route.path, theirs.text)
            unknown = client.get(_url(route, "no-such-job") + query, headers=alice)
            # another user's job answers exactly like a job that does not exist
            assert theirs.json()["detail"].replace(BOB_JOB, "X") == unknown.json()[
                "detail"].replace("no-such-job", "X")  # fmt: skip
            assert _names_of_bob(theirs.text.replace(BOB_JOB, "")) == []  # only what she asked
    assert per_run >= 7  # matrix, ops, io, collectives, sizes, rma, ranks: also per run


def test_alice_compares_only_her_own_runs(two_users):
    client, alice = two_users["client"], two_users["headers"]["alice"]
    for params in ({"b": BOB_JOB}, {"b": ALICE_JOB, "a": BOB_JOB}):
        theirs = client.get("/api/compare", params=params, headers=alice)
        assert theirs.status_code == 404, params
        assert theirs.json() == {"detail": f"unknown job {BOB_JOB!r}"}
    history = client.get("/api/compare/history", params={"job": BOB_JOB}, headers=alice)
    assert history.json() == {"detail": f"unknown job {BOB_JOB!r}"}
    mine = client.get("/api/compare/history", params={"job": ALICE_JOB}, headers=alice)
    assert mine.status_code == 200 and [r["job"] for r in mine.json()["runs"]] == [ALICE_JOB]
    assert _names_of_bob(mine.text) == []


def test_no_answer_to_alice_names_bobs_job(two_users):
    client, alice = two_users["client"], two_users["headers"]["alice"]
    _, others = _job_routes(two_users["app"])
    asked = [path for path in others if path in JOBLESS]
    assert sorted(asked) == sorted(JOBLESS)
    series = {"/api/fabric/series": "/api/fabric/series?link=1"}  # a series needs its subject
    for path in [*(series.get(p, p) for p in asked), f"/api/overview?job={BOB_JOB}",
                 "/api/overview?limit=1000"]:  # fmt: skip
        answer = client.get(path, headers=alice)
        assert answer.status_code == 200, (path, answer.text)
        assert _names_of_bob(answer.text) == [], path
    overview = client.get(f"/api/overview?job={BOB_JOB}", headers=alice).json()
    assert [j["job"] for j in overview["jobs"]["jobs"]] == [ALICE_JOB]
    assert overview["jobs"]["page"]["total"] == 1
    assert overview["shown"] is None  # bob's job is unknown to her
    overview = client.get("/api/overview", headers=alice).json()
    assert overview["shown"]["job"] == ALICE_JOB
    assert overview["shown"]["matrix"]["cells"] == [
        {"src": 0, "dst": 1, "bytes": 8192, "messages": 8},
        {"src": 1, "dst": 0, "bytes": 8192, "messages": 8},
    ]
    # the fabric is everyone's: alice sees all of it
    topology = client.get("/api/fabric/topology", headers=alice).json()
    assert len(topology["nodes"]) == 4


def test_bob_sees_his_job_and_an_admin_sees_both(two_users):
    client, headers = two_users["client"], two_users["headers"]
    bob = client.get("/api/jobs", headers=headers["bob"]).json()["jobs"]
    assert [(j["job"], j["user"], j["bytes_sent"]) for j in bob] == [(BOB_JOB, "bob", 16384)]
    assert client.get(f"/api/jobs/{ALICE_JOB}/ranks", headers=headers["bob"]).status_code == 404
    admin = client.get("/api/jobs", headers=headers["carol"]).json()["jobs"]
    assert sorted((j["job"], j["user"]) for j in admin) == [
        (ALICE_JOB, "alice"), (BOB_JOB, "bob")]  # fmt: skip
    io = client.get(f"/api/jobs/{BOB_JOB}/io", headers=headers["carol"]).json()
    assert [f["path"] for f in io["files"]] == ["/scratch/bob/bob-secret-output.dat"]


def test_nobody_and_forged_passes_get_nothing(two_users):
    client = two_users["client"]
    for path in ("/api/jobs", f"/api/jobs/{ALICE_JOB}/matrix", "/api/fabric/topology", "/"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code in (401, 302), (path, answer.status_code)
        assert _names_of_bob(answer.text) == [] and ALICE_JOB not in answer.text
    forged = client.get("/api/jobs", headers={"X-Stacklens-Viewer-Pass": '["carol",true,"oidc"]'})
    assert forged.status_code == 401
    assert forged.json() == {"detail": "invalid or expired viewer pass"}
