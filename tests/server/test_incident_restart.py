"""Incidents across a restart of the server: two detector services, one after the other,
over the same database (the staged incident of tests/server/incident_data.py, through the
real fabric store and collector), each with the alert webhook to a local receiver. An
incident the first left open whose congestion still holds is taken over (same id and key,
no second "opened", "closed" when it ends); one whose condition is gone is closed at its
newest evidence point and "closed" goes to the webhook."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from server.incidents.webhook import Webhook
from stacklens.db import make_engine
from stacklens.schema import Incident
from tests.server.incident_data import T0, S, StagedFabric, send
from tests.server.test_incident_webhook import Receiver

TH = Thresholds(utilisation=0.8, xmit_wait_per_s=1e6, sweeps=2, clear=3, link_errors=1,
                flaps=2, slowdown=3.0, baseline_ns=60 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip


@pytest.fixture
def staged(collector, pg_url) -> Iterator[dict]:
    """run(ticks): a new service (a server started afresh) ticking after each sweep of
    `ticks` (sweeps before them not ticked yet are written first), its webhook messages as
    the receiver got them; the engine."""
    engine = make_engine(pg_url)
    fabric = StagedFabric(pg_url)
    receiver = Receiver(fail=0)
    written = [0]

    async def serve(ticks: range) -> list[dict]:
        hook = Webhook(receiver.url, attempts=2, backoff_s=0.05)
        now = [T0]
        service = IncidentService(engine, TH, sweep_interval_s=1.0, webhook=hook,
                                  clock=lambda: now[0])  # fmt: skip
        await hook.start()  # the service is ticked here, not on its own timer
        first = len(receiver.bodies)
        posted = 0
        for i in ticks:
            while written[0] <= i:
                fabric.sweep(written[0])
                send(collector, written[0])
                written[0] += 1
            now[0] = T0 + (i + 1) * S + 1_600_000_000
            posted += len(service.tick())
        for _ in range(500):
            if len(receiver.bodies) - first == posted:
                break
            await asyncio.sleep(0.02)
        await hook.stop()
        return receiver.bodies[first:]

    try:
        yield {"run": lambda ticks: asyncio.run(serve(ticks)), "engine": engine}
    finally:
        receiver.close()
        fabric.close()
        engine.dispose()


def _incidents(engine) -> list[tuple]:
    with Session(engine) as session:
        rows = session.scalars(select(Incident).order_by(Incident.id))
        return [(r.id, r.key, r.start_ns, r.end_ns) for r in rows]


def _events(messages: list[dict]) -> list[tuple]:
    return [(m["event"], m["incident"]["id"], m["incident"]["kind"], m["incident"]["end_ns"])
            for m in messages]  # fmt: skip


def test_an_incident_still_on_is_taken_over_and_closed_by_the_next_server(staged):
    first = staged["run"](range(0, 13))
    assert [m["event"] for m in first] == ["opened", "updated"]
    ((incident_id, key, start, _),) = _incidents(staged["engine"])
    assert (key, start) == (f"congestion:1:{T0 + 10 * S}", T0 + 10 * S)
    # down for sweeps 13-16; the next server replays sweeps 12-17: the congestion (sweeps
    # 10-15) is found again from sweep 12 on, and is the same incident
    second = staged["run"](range(17, 25))
    # alice's slowdown, found again over the replayed steps, has now cost her 2 s: major
    assert _events(second) == [("updated", incident_id, "congestion", None),
                               ("closed", incident_id, "congestion", T0 + 16 * S)]  # fmt: skip
    assert [m["incident"]["severity"] for m in first + second] == ["minor"] * 2 + ["major"] * 2
    assert second[1]["incident"]["start_ns"] == T0 + 10 * S
    assert [(j["job"], j["role"]) for j in second[1]["incident"]["jobs"]] == [
        ("bob-inc", "aggressor"), ("alice-inc", "victim")
    ]  # fmt: skip
    assert _incidents(staged["engine"]) == [(incident_id, key, T0 + 10 * S, T0 + 16 * S)]


def test_an_incident_whose_condition_is_gone_is_closed_at_its_last_evidence(staged):
    first = staged["run"](range(0, 13))
    assert [m["event"] for m in first] == ["opened", "updated"]
    ((incident_id, key, _, _),) = _incidents(staged["engine"])
    # down for sweeps 13-23: the congestion ended meanwhile; the first server's last pass
    # (after sweep 12) stored evidence up to the end of sweep 12
    second = staged["run"](range(24, 26))
    # (alice's slowdown, found again in the stored steps, stays joined to it: no incident
    # of its own)
    assert _events(second) == [("closed", incident_id, "congestion", T0 + 13 * S)]
    assert _incidents(staged["engine"]) == [(incident_id, key, T0 + 10 * S, T0 + 13 * S)]
