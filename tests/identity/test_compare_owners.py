# tests/identity/test_compare_owners.py — a program's history holds only runs the viewer may read.
"""Run comparison with proven owners (issue #28 point 1: "never another user's unless the
viewer may see both"): two Unix users run one program (the same command line and world
size); root sends each user's frames over the collector's Unix socket as that user (as
`stacklens replay --all-users` does), so each job's owner is the one the collector proved
(its MUNGE daemon the test's own), never the name the frames claim. User A's runs last 10,
12 and 15 s; user B's 30 and 40 s between them, one under the id of A's first job. As A:
the history of A's last run lists A's three runs alone, its median is that of A's two
earlier ones (11 s), B's runs are unknown jobs to /api/compare and its report exactly as
a job that does not exist, and naming B as a run's owner finds nothing. As an admin, who
may see both: the history holds all five runs, the median takes B's too, and A's run
compares with B's when each is named with its owner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from server.access.viewer import Access
from server.app import create_app
from stacklens.db import make_engine
from stacklens.settings import Settings
from tests.access.data import token_for
from tests.collector.test_ingest import T0
from tests.identity.test_incident_owners import _send_as
from tests.identity.test_proven_senders import owners_of, proven_collector
from tests.server.test_compare import S, run_frames

#: (job, start after T0 in s, seconds, allreduce seconds per rank, user: 0 = A, 1 = B)
RUNS = [("own-1", 0, 10, 2, 0), ("own-1", 50, 30, 20, 1), ("own-2", 100, 12, 3, 0),
        ("own-b", 150, 40, 25, 1), ("own-3", 200, 15, 6, 0)]  # fmt: skip
ADMIN = "sladmin"


@pytest.fixture
def viewers(pg_url, shared_dir, munge_socket, users) -> Iterator[dict]:
    """The runs sent as their users; an API client and each viewer's headers by name, with
    A's and B's user names."""
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        settings = Settings(collector=collector.endpoint, munge_socket=munge_socket,
                            collector_socket=str(shared_dir / "ingest.sock"))  # fmt: skip
        for job, start, seconds, allreduce, who in RUNS:
            # every run's frames claim "mallory": the owner is the proven one
            frames = run_frames(job, T0 + start * S, seconds, allreduce, user=b"mallory", token="")
            _send_as(settings, users[who].pw_uid, b"".join(frames), len(frames))
    a, b = users
    assert owners_of(pg_url, "own-1") == sorted([a.pw_uid, b.pw_uid])
    engine = make_engine(pg_url)
    app = create_app(engine, access=Access(mode="oidc", admins=frozenset({ADMIN})))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {name: {"Authorization": f"Bearer {token_for(engine, name)}"}
                   for name in (a.pw_name, b.pw_name, ADMIN)}  # fmt: skip
        yield {"client": client, "headers": headers, "a": a.pw_name, "b": b.pw_name}
    engine.dispose()


def _listed(body: dict) -> list[tuple[str, str, int]]:
    return [(r["job"], r["owner"], r["elapsed_ns"] // S) for r in body["runs"]]


def test_a_user_sees_only_their_own_runs_of_the_program(viewers) -> None:
    client, a, b = viewers["client"], viewers["a"], viewers["b"]
    mine = viewers["headers"][a]

    def get(path: str, **params: str):
        return client.get(path, params=params, headers=mine)

    history = get("/api/compare/history", job="own-3")
    assert history.status_code == 200, history.text
    assert _listed(history.json()) == [("own-3", a, 15), ("own-2", a, 12), ("own-1", a, 10)]
    median = get("/api/compare", b="own-3").json()
    assert (median["a"]["runs"], median["a"]["elapsed_ns"]) == (2, 11 * S)
    assert b not in str(median) and "own-b" not in str(median)
    # B's runs are unknown to A, word for word as a job that does not exist
    for path in ("/api/compare", "/api/reports/compare"):
        theirs = get(path, b="own-3", a="own-b")
        assert (theirs.status_code, theirs.json()) == (404, {"detail": "unknown job 'own-b'"})
        assert get(path, b="own-b").json() == {"detail": "unknown job 'own-b'"}
        named = get(path, b="own-3", a="own-1", a_owner=b)
        assert (named.status_code, named.json()) == (
            404, {"detail": f"unknown job 'own-1' of owner {b!r}"})  # fmt: skip
    assert get("/api/compare/history", job="own-b").json() == {"detail": "unknown job 'own-b'"}
    # B sees B's own: their run under A's id and their later run
    theirs = client.get("/api/compare/history", params={"job": "own-b"},
                        headers=viewers["headers"][b])  # fmt: skip
    assert _listed(theirs.json()) == [("own-b", b, 40), ("own-1", b, 30)]


def test_an_admin_sees_both_users_runs(viewers) -> None:
    client, a, b = viewers["client"], viewers["a"], viewers["b"]
    admin = viewers["headers"][ADMIN]
    history = client.get("/api/compare/history", params={"job": "own-3", "owner": a},
                         headers=admin).json()  # fmt: skip
    assert _listed(history) == [("own-3", a, 15), ("own-b", b, 40), ("own-2", a, 12),
                                ("own-1", b, 30), ("own-1", a, 10)]  # fmt: skip
    median = client.get("/api/compare", params={"b": "own-3"}, headers=admin).json()
    assert (median["a"]["runs"], median["a"]["elapsed_ns"]) == (4, 21 * S)  # of 10, 12, 30, 40
    both = client.get("/api/compare", params={"b": "own-3", "a": "own-1", "a_owner": b},
                      headers=admin)  # fmt: skip
    assert both.status_code == 200, both.text
    body = both.json()
    assert [(body[s]["job"], body[s]["owner"], body[s]["elapsed_ns"] // S) for s in "ab"] == [
        ("own-1", b, 30), ("own-3", a, 15)]  # fmt: skip
    ambiguous = client.get("/api/compare", params={"b": "own-3", "a": "own-1"}, headers=admin)
    assert ambiguous.status_code == 409
