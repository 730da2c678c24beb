"""The incident service on a staged incident (tests/server/incident_data.py) through the
real fabric store, collector and database: detected within 2 sweeps of the congestion's
start, joined with the victim's MPI slowdown, the aggressor named by its routed bytes, a
job on another part of the fabric left out; stored, closed after the quiet sweeps; the API
lists and filters it and shows each user the other users' jobs as "another job"."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from server.access.viewer import Access
from server.app import create_app
from server.incidents import repository as incidents
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from server.incidents.webhook import Webhook
from server.query_params import Window
from server.traffic.repository import TrafficConfig
from server.traffic.service import DIRECTIONS, AttributionCache
from stacklens.db import make_engine
from stacklens.schema import Incident
from tests.access.data import token_for
from tests.conftest import query
from tests.server.fabric_data import relink_host2, write_small_fabric
from tests.server.incident_data import T0, WAIT_PER_S, S, StagedFabric, send
from tests.server.test_incident_webhook import Receiver

TH = Thresholds(utilisation=0.8, xmit_wait_per_s=1e6, sweeps=2, clear=3, link_errors=1,
                flaps=2, slowdown=3.0, baseline_ns=60 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip


#: The dashboard's address the incidents' URLs are made with.
PUBLIC = "https://stacklens.example.org/hpc"


class Detecting:
    """The incident service of these tests over the test database (a sweep a second) on a
    clock the test sets: `now`, ns since the epoch."""

    def __init__(self, engine: Engine, now: int = T0):
        self.engine, self.now = engine, now

    def service(self, thresholds: Thresholds = TH, **options: Any) -> IncidentService:
        """An IncidentService with `thresholds` (TH by default) on this clock."""
        return IncidentService(self.engine, thresholds, sweep_interval_s=1.0,
                               clock=lambda: self.now, **options)  # fmt: skip


@pytest.fixture
def detecting(pg_url) -> Iterator[Detecting]:
    """Incident services over the emptied test database, the clock at T0."""
    engine = make_engine(pg_url)
    yield Detecting(engine)
    engine.dispose()


@pytest.fixture
def fabric(pg_url) -> Iterator[StagedFabric]:
    """The staged fabric (tests/server/incident_data.py): its topology written, a sweep of
    it per `fabric.sweep(i)`."""
    staged_fabric = StagedFabric(pg_url)
    yield staged_fabric
    staged_fabric.close()


@pytest.fixture
def staged(collector, detecting, fabric) -> Iterator[dict]:
    """The staged incident, alice's ranks meeting in MPI_Allreduce (stage)."""
    with stage(collector, detecting, fabric, "MPI_Allreduce") as staged_:
        yield staged_


@contextlib.contextmanager
def stage(collector, detecting: Detecting, fabric: StagedFabric, wait: str) -> Iterator[dict]:
    """25 sweeps and job intervals, a tick after each (the clock 1.6 s past the sweep), as
    `stacklens up` runs them: the ticks in this thread, the webhook's sender on an event
    loop of its own posting to a local HTTP receiver; the jobs' ranks meet in `wait`
    (tests/server/incident_data.py). The messages per tick, the bodies the receiver got,
    the engine."""
    receiver = Receiver(fail=0)
    hook = Webhook(receiver.url, attempts=2, backoff_s=0.05)
    loop = asyncio.new_event_loop()
    sender = threading.Thread(target=loop.run_forever, daemon=True)
    sender.start()
    asyncio.run_coroutine_threadsafe(hook.start(), loop).result(5)
    service = detecting.service(webhook=hook, base_url=PUBLIC)
    messages = {}
    try:
        for i in range(25):
            fabric.sweep(i)
            send(collector, i, wait=wait)
            detecting.now = T0 + (i + 1) * S + 1_600_000_000
            messages[i] = copy.deepcopy(service.tick())
        sent = sum(len(m) for m in messages.values())
        deadline = time.monotonic() + 20
        while hook.stats.delivered < sent and time.monotonic() < deadline:
            time.sleep(0.02)
        yield {"engine": detecting.engine, "messages": messages, "service": service,
               "received": receiver.bodies}  # fmt: skip
    finally:
        asyncio.run_coroutine_threadsafe(hook.stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        sender.join(5)
        loop.close()
        receiver.close()


def test_detected_within_two_sweeps_named_and_closed(staged):
    messages = staged["messages"]
    assert {i: [m["event"] for m in ms] for i, ms in messages.items() if ms} == {
        11: ["opened"], 12: ["updated"], 15: ["updated"], 18: ["closed"]
    }  # fmt: skip
    # at sweep 11 alice's slow interval [T0 + 10 s, T0 + 11 s) is in the step that ends at
    # T0 + 12 s (an interval counts in the step its end lies in), not yet settled: she is
    # on the link, and a victim one sweep later
    opened = messages[11][0]["incident"]
    assert opened["kind"] == "congestion" and opened["severity"] == "minor"
    assert [(j["job"], j["role"]) for j in opened["jobs"]] == [
        ("bob-inc", "aggressor"),
        ("alice-inc", "on link"),
    ]
    assert opened["title"] == "Congestion on spine[1] – leaf1[9]"
    assert opened["start_ns"] == T0 + 10 * S  # the congestion's start: sweep 10
    assert opened["detected_ns"] == T0 + 12 * S  # the end of sweep 11: 2 sweeps later
    assert opened["end_ns"] is None
    updated = messages[12][0]["incident"]
    # alice's first 2 slow steps: 5x her baseline, so 4/5 of her 2 x 500 ms waited beyond
    # it, over her 2 ranks: 400 ms each; major from 2 s lost (this test's min_ns), 5 steps
    assert (updated["severity"], updated["hit"], updated["lost_ns"]) == ("minor", 1, 8 * 10**8)
    assert [(m["incident"]["severity"], m["incident"]["lost_ns"]) for m in messages[15]] == [
        ("major", 2 * S)
    ]
    jobs = [(j["job"], j["user"], j["role"], j["signals"]) for j in updated["jobs"]]
    assert jobs == [("bob-inc", "bob", "aggressor", []),
                    ("alice-inc", "alice", "victim", ["mpi_slowdown"])]  # fmt: skip
    bob, alice = opened["jobs"]
    # bytes on the link at sweep 11: the intervals ending in [T0 + 8 s, T0 + 12 s] (from 2
    # sweeps before the start), both ranks (each direction crosses it), point-to-point (file
    # I/O is not placed on links): 5 x 2 x 50 MiB; alice 5 x 2 x 1 MiB
    assert bob["link_bytes"] == 10 * (50 << 20) and alice["link_bytes"] == 10 * (1 << 20)
    assert bob["files"] == ["MPI-IO:/scratch/bob/ckpt.h5"]
    assert alice["ranks"] == [0, 1]  # rank 0 arrives late, rank 1 waits for it: late first
    closed = messages[18][0]["incident"]
    assert [j["link_bytes"] for j in closed["jobs"]] == [20 * (50 << 20), 20 * (1 << 20)]
    assert closed["id"] == opened["id"] and closed["end_ns"] == T0 + 16 * S
    assert (closed["severity"], closed["lost_ns"], closed["unobserved_ns"]) == (
        "major", 24 * 10**8, None)  # fmt: skip
    assert staged["service"].stats.opened == 1 and staged["service"].stats.closed == 1
    # carol's job (one leaf) never crosses the link: not in it
    # stored by 8 passes (sweeps 11-18), it drew one id: the next incident gets the next
    with Session(staged["engine"]) as session:
        drawn = session.scalar(text("SELECT last_value FROM incidents_id_seq"))
    assert drawn == opened["id"]


def test_the_webhook_posts_the_url_and_a_line_a_chat_tool_can_post(staged):
    """What the local receiver got: every message in order, each with the incident's page
    at STACKLENS_PUBLIC_URL and one line of text (server/incidents/message.py)."""
    sent = [m for _, ms in sorted(staged["messages"].items()) for m in ms]
    assert staged["received"] == sent and len(sent) == 4
    incident_id = sent[0]["incident"]["id"]
    url = f"{PUBLIC}/incidents/{incident_id}"
    assert [(m["url"], m["incident"]["url"]) for m in sent] == [(url, url)] * 4
    start = "2023-11-14 22:13:30 UTC"  # T0 + 10 s
    assert [m["text"] for m in sent] == [
        f"[minor] stacklens incident {incident_id} opened: Congestion on spine[1] – "
        f"leaf1[9]; likely aggressor: job bob-inc (no job hit; since {start}) {url}",
        f"[minor] stacklens incident {incident_id} updated: Congestion on spine[1] – "
        f"leaf1[9]; likely aggressor: job bob-inc; victim: job alice-inc (1 job hit, 0.8 s "
        f"lost; since {start}) {url}",
        f"[major] stacklens incident {incident_id} updated: Congestion on spine[1] – "
        f"leaf1[9]; likely aggressor: job bob-inc; victim: job alice-inc (1 job hit, 2.0 s "
        f"lost; since {start}) {url}",
        f"[major] stacklens incident {incident_id} ended: Congestion on spine[1] – "
        f"leaf1[9]; likely aggressor: job bob-inc; victim: job alice-inc (1 job hit, 2.4 s "
        f"lost; {start} – 2023-11-14 22:13:36 UTC) {url}",
    ]


@pytest.fixture
def api(staged) -> Iterator[dict]:
    """The API as alice, bob and carol (an admin)."""
    engine = staged["engine"]
    app = create_app(engine, access=Access(mode="oidc", admins=frozenset({"carol"})))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        headers = {u: {"Authorization": f"Bearer {token_for(engine, u)}"}
                   for u in ("alice", "bob", "carol")}  # fmt: skip

        def get(user: str, path: str, **params: str | int) -> dict:
            answer = client.get(path, params=params, headers=headers[user])
            assert answer.status_code == 200, answer.text
            return answer.json()

        yield {"get": get, "client": client, "headers": headers}


def test_a_links_own_attribution_equals_the_whole_fabrics(staged):
    """The detector's per-link attribution (only the flows crossing the link) gives every
    link direction the whole fabric's figures."""
    cache = AttributionCache()
    window = Window(T0, T0 + 25 * S)
    with Session(staged["engine"]) as session:
        fab, _, whole, _ = cache.get(session, TrafficConfig(), window)
        assert len(fab.links) == 8
        for link in fab.links:
            alone = cache.link(session, TrafficConfig(), link, window)
            both = {(link, d) for d in DIRECTIONS}
            assert alone.shares == {c: f for c, f in whole.shares.items() if c in both}
            assert alone.left_out == whole.left_out
        assert sum(bool(whole.shares.get((link, d))) for link in fab.links
                   for d in DIRECTIONS) == 16  # fmt: skip


def test_the_api_shows_other_users_jobs_as_another_job(api):
    get = api["get"]
    listed = get("alice", "/api/incidents")
    assert listed["page"] == {"total": 1, "limit": 100, "next_cursor": None}
    (row,) = listed["incidents"]
    assert row["summary"] == ("Congestion on spine[1] – leaf1[9]; likely aggressor: another "
                              "job; victim: job alice-inc")  # fmt: skip
    assert (row["open"], row["jobs"], row["signals"]) == (False, 2, ["congestion", "mpi_slowdown"])
    assert get("bob", "/api/incidents")["incidents"][0]["summary"] == (
        "Congestion on spine[1] – leaf1[9]; likely aggressor: job bob-inc; victim: another job"
    )
    detail = get("alice", f"/api/incidents/{row['id']}")
    hidden, mine = detail["members"]
    assert hidden == {"role": "aggressor", "visible": False, "job": None, "user": None,
                      "label": "another job", "signals": [], "ranks": [], "files": [],
                      "link_bytes": None, "evidence": {}, "callsites": []}  # fmt: skip
    assert (mine["job"], mine["role"], mine["link_bytes"]) == ("alice-inc", "victim", 20 << 20)
    series = mine["evidence"]["mpi_slowdown"]
    # both ranks' MPI_Allreduce time over their MPI_Isend and MPI_Allreduce bytes
    assert series["baseline_per_byte_ns"] == 2 * 100 * 10**6 / (4 << 20)
    assert series["peak_factor"] == 5.0
    # the kind of waiting: all in the collective, over the 6 slow steps; the late rank
    # first, as the job's profile names it over the incident's window
    assert (series["waits_in"], series["waiting_ns"]) == ("coll", {"coll": 6 * S})
    assert series["ranks"] == late_and_waiting("MPI_Allreduce")
    assert mine["ranks"] == [0, 1]
    (link,) = detail["links"]
    assert (link["a"]["name"], link["b"]["name"], link["signals"]) == (
        "spine",
        "leaf1",
        ["congestion"],
    )
    waits = [p["xmit_wait_per_s"] for p in link["evidence"]]
    assert waits[:6] == [WAIT_PER_S] * 6  # the congested sweeps, one second apart
    # the incident's window, the same for the link and alice (the incident page's chart
    # shares its time axis between them): the step ending at its first second (T0 + 11 s)
    # to the last quiet one before it closed; not alice's steps before it (her baseline's)
    window = [T0 + i * S for i in range(11, 20)]
    assert [p["t_ns"] for p in link["evidence"]] == window
    assert [p["t_ns"] for p in series["series"]] == window
    admin = get("carol", f"/api/incidents/{row['id']}")
    assert [m["label"] for m in admin["members"]] == ["job bob-inc", "job alice-inc"]


def late_and_waiting(op: str) -> list[dict]:
    """Alice's ranks as the incident names them: rank 0 late at `op`, rank 1 waiting."""
    return [
        {"rank": 0, "role": "late", "op": op,
         "text": f"rank 0 arrives last at {op}: 4.00 s more computing than the median rank "
                 "(67% of the elapsed time); rank 1 waits for it"},
        {"rank": 1, "role": "waiting", "op": op,
         "text": "rank 1 waits for rank 0 (late): 4.00 s more inside MPI than the median "
                 f"rank (67% of the elapsed time), most in {op}"},
    ]  # fmt: skip


def test_a_job_slowed_inside_blocking_sendrecv_is_named_a_victim(collector, detecting, fabric):
    """Alice's ranks meet in MPI_Sendrecv instead: the time blocked in that point-to-point
    call is her slowdown (the spec's waits=p2p), so she is the congestion's victim as
    before, with the evidence of where she waited and who was late."""
    with stage(collector, detecting, fabric, "MPI_Sendrecv") as staged_:
        messages = staged_["messages"]
        assert {i: [m["event"] for m in ms] for i, ms in messages.items() if ms} == {
            11: ["opened"], 12: ["updated"], 15: ["updated"], 18: ["closed"]
        }  # fmt: skip
        closed = messages[18][0]["incident"]
        assert [(j["job"], j["role"], j["signals"], j["ranks"]) for j in closed["jobs"]] == [
            ("bob-inc", "aggressor", [], [0, 1]),
            ("alice-inc", "victim", ["mpi_slowdown"], [0, 1]),
        ]
        with Session(staged_["engine"]) as session:
            (alice,) = [j for j in incidents.visible_jobs(session, [closed["id"]])[closed["id"]]
                        .values() if j["job"] == "alice-inc"]  # fmt: skip
    evidence = alice["evidence"]["mpi_slowdown"]
    assert (evidence["waits_in"], evidence["waiting_ns"]) == ("p2p", {"p2p": 6 * S})
    assert evidence["ranks"] == late_and_waiting("MPI_Sendrecv")
    slow = [p for p in evidence["series"] if p.get("per_byte_ns") and p["per_byte_ns"] > 100]
    assert [p["waiting_ns"] for p in slow] == [{"p2p": S}] * 6
    assert evidence["peak_factor"] == 5.0


def test_the_list_filters_and_refuses_unknown_parameters(api):
    get, client, headers = api["get"], api["client"], api["headers"]
    link = get("alice", "/api/incidents")["incidents"][0]["link_ids"][0]

    def count(**params: object) -> int:
        return int(get("alice", "/api/incidents", **params)["page"]["total"])

    assert count(open="false") == 1 and count(open="true") == 0
    assert count(kind="congestion") == 1 and count(kind="mpi_slowdown") == 1
    assert count(kind="io_stall") == 0 and count(severity="major") == 1
    assert count(severity="critical") == 0
    assert count(job="alice-inc") == 1 and count(job="bob-inc") == 0  # not hers
    assert int(get("bob", "/api/incidents", job="bob-inc")["page"]["total"]) == 1
    assert count(link=link) == 1 and count(link=link + 1) == 0
    assert count(**{"from": str((T0 + 17 * S) / S)}) == 0  # it ended at T0 + 16 s
    assert count(to=str((T0 + 10 * S) / S)) == 0 and count(to=str((T0 + 11 * S) / S)) == 1
    bad = client.get("/api/incidents", params={"since": "1"}, headers=headers["alice"])
    assert bad.status_code == 422 and "'since'" in bad.json()["detail"]
    missing = client.get("/api/incidents/999", headers=headers["alice"])
    assert missing.status_code == 404


def test_link_errors_and_a_flap_from_the_stored_sweeps_and_events(pg_url, detecting):
    """tests/server/fabric_data.py's small fabric: leaf1[1] - host1[1] counts 3 symbol
    errors and 1 link error recovery in its second sweep (host1's PortRcvErrors reset:
    unknown, not counted); host2's link goes down and comes back (2 events: a flap)."""
    from tests.server import fabric_data as small

    write_small_fabric(pg_url)
    relink_host2(pg_url)
    detecting.now = small.T0 + 5 * S
    service = detecting.service()
    opened = {m["incident"]["kind"]: m["incident"] for m in service.tick()}
    assert sorted(opened) == ["link_errors", "link_flap"]
    errors, flap = opened["link_errors"], opened["link_flap"]
    assert errors["title"] == "Link errors on host1[1] – leaf1[1]"
    assert (errors["start_ns"], errors["severity"]) == (small.T0 + S, "minor")
    assert flap["title"] == "Link flapping on host2[1] – leaf1[2]"
    assert (flap["start_ns"], flap["end_ns"]) == (small.T0 + 3 * S, None)
    with Session(detecting.engine) as session:
        (link,) = session.get(Incident, errors["id"]).links
    assert link["peak"] == 4.0 and link["evidence"][-1]["errors"] == 4
    assert service.tick() == []  # nothing new
    # no sweep since T0 + 2 s: at T0 + 125 s the fabric is long stale, so both end
    # unobserved (the errors at their last sweep, the flap at its last event, T0 + 4 s)
    detecting.now = small.T0 + 125 * S
    closed = service.tick()
    assert sorted(
        (m["event"], m["incident"]["kind"], m["incident"]["end_ns"],
         m["incident"]["unobserved_ns"]) for m in closed
    ) == [
        ("closed", "link_errors", small.T0 + 2 * S, small.T0 + 2 * S),
        ("closed", "link_flap", small.T0 + 4 * S, small.T0 + 4 * S),
    ]  # fmt: skip


def test_the_jobs_are_named_as_of_the_pass_that_reports_the_incident(collector, detecting, fabric):
    """bob starts sending (40 MiB/s each way) when the link congests; alice, slowed then,
    has sent 20 MiB/s all along. At 5 s held (STACKLENS_INCIDENT_MIN_S) the incident is
    reported naming bob, who has the most bytes on the link by then, the likely aggressor
    and alice its victim, not as they stood when the signal opened silent 3 passes earlier
    (alice ahead: the aggressor, bob on the link), read again only 5 s later
    (bench/incidents.py's scripted hour saw the aggressor named 2 s past the bound)."""
    service = detecting.service(replace(TH, min_ns=5 * S))
    opened = []
    for i in range(16):
        fabric.sweep(i)
        bob = 40 << 20 if i >= 10 else 0
        send(collector, i, ("alice-inc", "bob-inc"),
             p2p_of={"alice-inc": 20 << 20, "bob-inc": bob})  # fmt: skip
        detecting.now = T0 + (i + 1) * S + 1_600_000_000
        opened += [(i, m["incident"]) for m in service.tick() if m["event"] == "opened"]
    ((i, incident),) = opened
    assert (i, incident["kind"]) == (14, "congestion")  # held 5 s: sweeps 10 to 14
    assert [(j["job"], j["role"], j["signals"]) for j in incident["jobs"]] == [
        ("bob-inc", "aggressor", []), ("alice-inc", "victim", ["mpi_slowdown"])]  # fmt: skip


def test_a_job_that_ends_while_slowed_closes_its_incident_unobserved(collector, detecting):
    """alice's job alone, slow from interval 10 on, sends its final frames with interval
    13 (its last ends at T0 + 14 s) while still slow: its incident of its own (no fabric)
    is closed "unobserved since" that end, not left to look cleared by the silence after."""
    service = detecting.service()
    events = []
    for i in range(20):
        if i < 14:
            send(collector, i, jobs=("alice-inc",), final=i == 13)
        detecting.now = T0 + (i + 1) * S + 1_600_000_000
        events += [(i, m["event"], m["incident"]) for m in service.tick()]
    assert [(i, event) for i, event, _ in events] == [(13, "opened"), (14, "closed")]
    closed = events[1][2]
    assert (closed["kind"], closed["title"], closed["id"]) == (
        "mpi_slowdown", "MPI slowdown", events[0][2]["id"])  # fmt: skip
    # its slow intervals 10-13 are the steps from T0 + 11 s; last observed at T0 + 14 s
    assert (closed["start_ns"], closed["end_ns"], closed["unobserved_ns"]) == (
        T0 + 11 * S, T0 + 14 * S, T0 + 14 * S)  # fmt: skip
    assert (closed["hit"], closed["lost_ns"], closed["severity"]) == (1, 16 * 10**8, "minor")
    assert service.stats.opened == 1 and service.stats.closed == 1


def test_an_incident_on_a_fabric_no_longer_swept_closes_unobserved(detecting, fabric):
    """The staged congestion (sweeps 10-15) opens at sweep 11; the sampler stops after sweep
    13 (its end: T0 + 14 s). While the last sweep is less than 3 sweep periods old the
    incident stays open; then (the fabric pages say STALE) it is closed "unobserved since"
    the last sweep, not left open beside the stale data."""
    service = detecting.service()
    events = []
    for i in range(20):
        if i < 14:
            fabric.sweep(i)
        detecting.now = T0 + (i + 1) * S + 600_000_000
        events += [(i, m["event"], m["incident"]) for m in service.tick()]
    # ticks at T0 + 15.6, 16.6 s: the last sweep is 1.6, 2.6 s old; at T0 + 17.6 s: 3.6 s
    assert [(i, event) for i, event, _ in events] == [(11, "opened"), (16, "closed")]
    opened, closed = events[0][2], events[1][2]
    assert (closed["id"], closed["kind"]) == (opened["id"], "congestion")
    assert (closed["start_ns"], closed["end_ns"], closed["unobserved_ns"]) == (
        T0 + 10 * S, T0 + 14 * S, T0 + 14 * S)  # fmt: skip
    assert service.tick() == [] and service.links.active() == []


def test_a_slowdown_too_small_to_report_is_never_stored_nor_sent(collector, detecting):
    """alice's job alone, slow for 6 s (her ranks lose 2.4 s): with 10 s to reach
    (STACKLENS_INCIDENT_MIN_S), it stays silent — no row, no message — and is counted."""
    service = detecting.service(replace(TH, min_ns=10 * S))
    messages = []
    for i in range(24):
        send(collector, i, jobs=("alice-inc",))
        detecting.now = T0 + (i + 1) * S + 1_600_000_000
        messages += service.tick()
    with Session(detecting.engine) as session:
        stored = session.scalar(text("SELECT count(*) FROM incidents"))
    assert (messages, stored) == ([], 0)
    assert (service.stats.opened, service.stats.silenced) == (0, 1)


def test_a_sampler_slower_than_its_setting_does_not_close_incidents_unobserved(detecting, fabric):
    """Sweeps every 4 s where the setting says 1 s (a large fabric's sweeps take longer):
    3 periods of the measured cadence, not of the setting, make the fabric unobserved, so
    the congestion (sweeps 11 and 15: 1.25 M ticks/s each) stays open between sweeps."""
    service = detecting.service()
    events = []
    for i in range(21):
        if i in (7, 11, 15, 19):
            fabric.sweep(i)
        detecting.now = T0 + (i + 1) * S + 600_000_000
        events += [(i, m["event"]) for m in service.tick()]
    assert events == [(15, "opened")]


def test_a_pass_writes_only_what_changed(collector, pg_url, detecting, fabric):
    """The staged incident with two passes a sweep, as `stacklens up` runs them (one after
    the sweep is stored, one after the jobs' step has settled): each pass writes the
    incident's row only when its content (all but updated_ns) changed, and a job's row
    only when that job's content changed; a pass that changes nothing writes nothing and
    leaves updated_ns as it was."""
    writes: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        head = " ".join(statement.split()[:3]).lower()
        for table in ("incidents", "incident_jobs"):
            if head in (f"insert into {table}", f"delete from {table}") or head.startswith(
                f"update {table} "
            ):
                writes.append(table)

    def stored() -> tuple[dict, dict]:
        """The incident's row less updated_ns, its updated_ns, and its jobs' rows by slot."""
        rows = query(pg_url, "SELECT * FROM incidents")
        jobs = query(pg_url, "SELECT * FROM incident_jobs ORDER BY incident_id, slot")
        return {r[0]: r for r in rows}, {(j[0], j[1]): j for j in jobs}

    event.listen(detecting.engine, "before_cursor_execute", count)
    service = detecting.service()
    columns = [c.name for c in Incident.__table__.columns]
    updated = columns.index("updated_ns")
    passes = []
    before = stored()
    for i in range(25):
        fabric.sweep(i)
        detecting.now = T0 + (i + 1) * S + 600_000_000  # the sweep is new, the step not settled
        for step in (0, 1):
            if step:
                send(collector, i)
                detecting.now += S  # the step of interval i has settled
            writes.clear()
            service.tick()
            after = stored()
            rows_changed = sum(
                r[:updated] + r[updated + 1:] != (before[0].get(k) or ())[:updated]
                + (before[0].get(k) or ())[updated + 1:]
                for k, r in after[0].items()
            )  # fmt: skip
            jobs_changed = sum(j != before[1].get(k) for k, j in after[1].items())
            jobs_changed += len(set(before[1]) - set(after[1]))
            stamps = {k: r[updated] for k, r in after[0].items()}
            kept = {k: r[updated] for k, r in before[0].items() if k in after[0]}
            passes.append((i, step, writes.count("incidents"), rows_changed,
                           writes.count("incident_jobs"), jobs_changed))  # fmt: skip
            if not rows_changed and not jobs_changed:
                assert stamps == kept, (i, step)  # updated_ns stays
            before = after
    # the row written (updated_ns moves) once when it or a job changed, else never; each
    # job's row that changed written once, the others not at all
    assert [p for p in passes if p[2] != (p[3] or p[5] > 0) or p[4] != p[5]] == []
    # from the congestion's report (sweep 11) to its close (sweep 18): 14 of its 16 passes
    # changed it (each sweep its link's evidence, each step alice's); before, all 16
    # rewrote the row and deleted and inserted both jobs' rows
    assert sum(p[2] for p in passes) == 14
