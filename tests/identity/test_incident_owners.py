"""The incidents list's job filter keeps owners apart (issue #31): two Unix users' jobs of
one id (proven owners: root sends each user's frames over the collector's Unix socket as
that user, as `stacklens replay --all-users` does) each stall in their file I/O, and the
detector service makes one incident of each. An admin filtering the list by that id
without `owner` gets a 409 naming both owners, as on the job routes; `?owner=<user>`
lists that owner's incident alone; each user filtering by the id alone gets their own;
`owner` without `job` is refused."""

from __future__ import annotations

import socket

from fastapi.testclient import TestClient
from playwright.sync_api import expect
from sqlalchemy import Engine

from server.access.viewer import Access
from server.app import create_app
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens import wire
from stacklens.db import make_engine
from stacklens.sender import open_connection
from stacklens.settings import Settings
from stacklens_cli.site import create_site
from tests.access.data import token_for
from tests.conftest import chromium_page, free_port, serving
from tests.identity.test_proven_senders import owners_of, proven_collector

S = 10**9
T0 = 1_700_000_000 * S
JOB = "inc-same-id"
STEPS = 24
#: The intervals in which each user's reads take 6x as long per byte (0: user A, 1: B).
STALLED = (range(8, 14), range(15, 21))
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=60 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip


def _frames(stalled: range) -> bytes:
    """One rank's STEPS intervals: 64 MiB read per second in 100 ms, 600 ms while stalled."""
    out = []
    for i in range(STEPS):
        reads = {"layer": 1, "phase": 0, "opens": 1, "reads": 8, "bytes_read": 64 << 20,
                 "read_time_ns": (600 if i in stalled else 100) * 10**6,
                 "path": b"/scratch/input.dat", "mount": b"/scratch",
                 "fstype": b"lustre"}  # fmt: skip
        tables = {"io": wire.records("io", [reads])}
        if i == 0:
            tables["rank_info"] = wire.records("rank_info", [{"command": b"./reader"}])
        out.append(wire.encode_frame(job_id=JOB, world_rank=0, world_size=1, seq=i,
                                     host="node1", pid=300, interval_start_ns=T0 + i * S,
                                     interval_end_ns=T0 + (i + 1) * S, tables=tables))  # fmt: skip
    return b"".join(out)


def _send_as(settings: Settings, uid: int, payload: bytes, frames: int) -> None:
    """Send frames as owner `uid` (root may name any owner) and wait for their acks."""
    with open_connection(settings, owner_uid=uid, timeout=30) as sock:
        sock.sendall(payload)
        acks = [wire.decode_ack(sock.recv(wire.ACK_SIZE, socket.MSG_WAITALL))
                for _ in range(frames)]  # fmt: skip
    assert {status for status, _ in acks} == {wire.Status.COMMITTED}


def _stage(pg_url, shared_dir, munge_socket, users) -> tuple[Engine, list[dict]]:
    """Each user's frames sent as that user, and the detector service over them: the engine
    and the incidents it opened."""
    a, b = users
    with proven_collector(pg_url, shared_dir, munge_socket) as collector:
        settings = Settings(collector=collector.endpoint, munge_socket=munge_socket,
                            collector_socket=str(shared_dir / "ingest.sock"))  # fmt: skip
        for user, stalled in zip(users, STALLED, strict=True):
            _send_as(settings, user.pw_uid, _frames(stalled), STEPS)
    assert owners_of(pg_url, JOB) == sorted([a.pw_uid, b.pw_uid])
    engine = make_engine(pg_url)
    now = [T0]
    service = IncidentService(engine, TH, clock=lambda: now[0])
    opened = []
    for i in range(STEPS + 6):
        now[0] = T0 + (i + 1) * S + 1_600_000_000
        opened += [m["incident"] for m in service.tick() if m["event"] == "opened"]
    return engine, opened


def test_the_job_filter_names_one_owners_job(pg_url, shared_dir, munge_socket, users):
    a, b = users
    engine, opened = _stage(pg_url, shared_dir, munge_socket, users)
    assert [(o["kind"], [(j["job"], j["user"], j["role"]) for j in o["jobs"]]) for o in opened] == [
        ("io_stall", [(JOB, a.pw_name, "victim")]),
        ("io_stall", [(JOB, b.pw_name, "victim")]),
    ]  # fmt: skip
    ids = {a.pw_name: opened[0]["id"], b.pw_name: opened[1]["id"]}
    app = create_app(engine, access=Access(mode="oidc", admins=frozenset({"sladmin"})))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {name: {"Authorization": f"Bearer {token_for(engine, name)}"}
                   for name in (a.pw_name, b.pw_name, "sladmin")}  # fmt: skip

        def listed(user: str, **params: str) -> list[int]:
            answer = client.get("/api/incidents", params=params, headers=headers[user])
            assert answer.status_code == 200, answer.text
            return [row["id"] for row in answer.json()["incidents"]]

        both = client.get("/api/incidents", params={"job": JOB}, headers=headers["sladmin"])
        assert both.status_code == 409
        assert both.json() == {
            "detail": f"job {JOB!r} is the id of jobs of 2 owners ({a.pw_name!r}, "
            f"{b.pw_name!r}): name one with ?owner=<user>, e.g. ?owner={a.pw_name}"
        }
        assert sorted(listed("sladmin")) == sorted(ids.values())  # unfiltered: both
        for name in (a.pw_name, b.pw_name):
            assert listed("sladmin", job=JOB, owner=name) == [ids[name]]
            assert listed(name, job=JOB) == [ids[name]]  # a user sees one job of that id
            assert listed(name, job=JOB, owner=name) == [ids[name]]
        assert listed(a.pw_name, job=JOB, owner=b.pw_name) == []  # not hers to read
        assert listed("sladmin", job=JOB, owner="nobody") == []
        alone = client.get("/api/incidents", params={"owner": a.pw_name},
                           headers=headers["sladmin"])  # fmt: skip
        assert alone.status_code == 422
        assert alone.json() == {"detail": "'owner' qualifies 'job': name the job too"}
    engine.dispose()


def test_the_incidents_page_has_an_owner_box(pg_url, shared_dir, munge_socket, users):
    """The Incidents page as an admin: the job box with that id alone says, in words, to
    choose one of its owners in the owner box (not the API's 409), which lists both; with
    one chosen, the list shows that owner's incident alone; no console errors."""
    a, b = users
    engine, opened = _stage(pg_url, shared_dir, munge_socket, users)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = create_site(engine, api_base_url=base, refresh_ms=1000,
                      access=Access(mode="oidc", admins=frozenset({"sladmin"})))  # fmt: skip
    try:
        with serving(app, port=port), chromium_page() as (page, errors):
            page.set_extra_http_headers({"Authorization": f"Bearer {token_for(engine, 'sladmin')}"})
            page.goto(f"{base}/incidents")
            caption = page.locator("#inc-caption")
            expect(caption).to_have_text("2 incidents", timeout=30_000)
            page.fill("#inc-job", JOB)
            page.press("#inc-job", "Enter")
            expect(page.locator("#inc-error")).to_have_text(
                f"Job {JOB} is the id of jobs of several owners: choose one in the owner box.",
                timeout=20_000,
            )
            expect(page.locator("#inc-grid .ag-row")).to_have_count(0)
            page.locator("#inc-owner").click()
            choices = page.get_by_role("option")
            expect(choices).to_have_count(2, timeout=20_000)
            assert sorted(choices.all_inner_texts()) == sorted([a.pw_name, b.pw_name])
            page.get_by_role("option", name=b.pw_name).click()
            expect(caption).to_have_text("1 incident", timeout=20_000)
            expect(page.locator("#inc-error")).to_have_text("")
            row = page.locator("#inc-grid .ag-row")
            expect(row).to_have_count(1)
            expect(row).to_contain_text(str(opened[1]["id"]))
            assert errors == []
    finally:
        engine.dispose()
