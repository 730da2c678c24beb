# tests/compare/test_regression.py — the regression check after each run, both ways.
"""The regression check (server/compare/regression.py, issue #28 point 3) inside the real
incident service over a real collector and database, its webhook posting to a local
receiver: three runs of one program (10, 11 and 12 s; the median 11 s), then a run of 25 s
whose MPI_Allreduce took 12 s more per rank, then a run of 12 s. With
STACKLENS_REGRESSION_FACTOR=1.5 the slow run (2.3× the median) opens one `regression`
incident — closed, its time the run's, its job the member, the title naming the
allreduce first — sent once to the webhook, never again on later passes or by a service
started afresh; the 12 s run opens none; another user's slower run of the same program
is judged against their own history only (none: no incident). Off (the default), the
same runs open no incident. `judge` on hand-made comparisons: the factor's edge, the
history's minimum, the severity."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.compare import regression
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService, incident_service
from server.incidents.webhook import Webhook
from stacklens.api_models import ComparedRun, Comparison, RunDifference
from stacklens.db import make_engine
from stacklens.schema import Incident, IncidentJob, Job
from stacklens.settings import Settings
from tests.collector.test_ingest import T0
from tests.collector.test_runs import send
from tests.server.test_compare import S, run_frames
from tests.server.test_incident_webhook import Receiver

#: (job, start after T0 in s, seconds, allreduce seconds per rank, user)
RUNS = [("reg-1", 0, 10, 2, b"bob"), ("reg-2", 100, 11, 2, b"bob"),
        ("reg-3", 200, 12, 3, b"bob"), ("reg-slow", 300, 25, 14, b"bob"),
        ("reg-fine", 400, 12, 2, b"bob"), ("reg-alice", 500, 40, 30, b"alice")]  # fmt: skip
#: After every run's end.
NOW = T0 + 600 * S


@pytest.fixture
def history(collector, pg_url) -> Iterator[dict]:
    """The runs stored; run(factor, passes): a service afresh ticked `passes` times with the
    webhook to a local receiver, what it got."""
    for job, start, seconds, allreduce, user in RUNS:
        send(collector, run_frames(job, T0 + start * S, seconds, allreduce, user=user))
    engine = make_engine(pg_url)
    receiver = Receiver(fail=0)

    async def serve(factor: float, passes: int) -> list[dict]:
        hook = Webhook(receiver.url, attempts=2, backoff_s=0.05)
        service = IncidentService(engine, Thresholds(), webhook=hook, clock=lambda: NOW,
                                  regression_factor=factor)  # fmt: skip
        await hook.start()
        first, posted = len(receiver.bodies), 0
        for _ in range(passes):
            posted += len(service.tick())
        for _ in range(500):
            if len(receiver.bodies) - first == posted:
                break
            await asyncio.sleep(0.02)
        await hook.stop()
        return receiver.bodies[first:]

    try:
        yield {"run": lambda factor, passes=1: asyncio.run(serve(factor, passes)),
               "engine": engine}  # fmt: skip
    finally:
        receiver.close()
        engine.dispose()


def _regressions(engine) -> list[tuple]:
    with Session(engine) as session:
        query = (select(Incident, IncidentJob, Job)
                 .join(IncidentJob, IncidentJob.incident_id == Incident.id)
                 .join(Job, Job.id == IncidentJob.job_id)
                 .where(Incident.kind == "regression").order_by(Incident.id))  # fmt: skip
        return list(session.execute(query).tuples())


def test_off_by_default_no_incident(history) -> None:
    assert Settings().regression_factor == 0
    assert history["run"](Settings().regression_factor, 2) == []
    assert _regressions(history["engine"]) == []
    # the one setting is what `stacklens up`'s incident service is made with
    default = incident_service(history["engine"], Settings())
    assert default is not None and default.regression is None
    on = incident_service(history["engine"], Settings(regression_factor=1.5))
    assert on is not None and on.regression is not None and on.regression.factor == 1.5


def test_a_slower_run_opens_one_regression_incident(history, api_client) -> None:
    got = history["run"](1.5, 3)
    found = _regressions(history["engine"])
    assert len(found) == 1
    incident, member, job = found[0]
    title = ("Regression of job reg-slow run 1: 2.3× the median of its program's last 3 runs "
             "(25.0 s against 11.0 s): MPI_Allreduce +12.0 s per rank, computation +2.0 s "
             "per rank")  # fmt: skip
    assert (incident.kind, incident.severity, incident.title) == ("regression", "minor", title)
    assert (incident.start_ns, incident.end_ns) == (T0 + 300 * S, T0 + 325 * S)
    assert (incident.lost_ns, incident.hit, incident.signals) == (14 * S, 1, ["regression"])
    assert (job.job_key, member.role, member.signals) == ("reg-slow", "victim", ["regression"])
    evidence = member.evidence["regression"]
    assert (evidence["elapsed_ns"], evidence["median_elapsed_ns"], evidence["runs"]) == (
        25 * S, 11 * S, 3)  # fmt: skip
    assert [d["name"] for d in evidence["differences"]] == ["MPI_Allreduce", "computation"]
    # the same webhook as every incident: one message, the incident opened
    assert [(m["event"], m["incident"]["kind"], m["incident"]["id"]) for m in got] == [
        ("opened", "regression", incident.id)]  # fmt: skip
    assert got[0]["text"].startswith(f"[minor] stacklens incident {incident.id} opened: {title}")
    assert got[0]["incident"]["jobs"][0]["job"] == "reg-slow"
    # listed and shown as every incident is
    listed = api_client.get("/api/incidents", params={"kind": "regression"}).json()
    assert [(i["id"], i["title"], i["open"]) for i in listed["incidents"]] == [
        (incident.id, title, False)]  # fmt: skip
    shown = api_client.get(f"/api/incidents/{incident.id}")
    assert shown.status_code == 200, shown.text
    assert [(m["job"], m["role"]) for m in shown.json()["members"]] == [("reg-slow", "victim")]
    # a service started afresh sends nothing again
    assert history["run"](1.5, 2) == []
    assert len(_regressions(history["engine"])) == 1


def comparison(runs: int, median_s: float, run_s: float) -> Comparison:
    def side(job: str | None, elapsed_s: float, n: int) -> ComparedRun:
        return ComparedRun(job=job, owner=None, run=None if job is None else 1, runs=n,
                           command="./x", world_size=2, status=None, started_ns=None,
                           elapsed_ns=int(elapsed_s * S), hosts=[], parts={})  # fmt: skip

    slower = RunDifference(name="MPI_Wait", kind="op", a_ns=0, b_ns=S, delta_ns=S, share=1.0,
                           a_bytes=0, b_bytes=0, a_calls=1, b_calls=1)  # fmt: skip
    return Comparison(finding="", a=side(None, median_s, runs), b=side("j", run_s, 1),
                      differences=[slower], sites=[], sites_total=0)  # fmt: skip


def test_judge_edges() -> None:
    assert regression.judge(comparison(3, 10, 15), 1.5) is None  # exactly the factor: not above
    found = regression.judge(comparison(3, 10, 15.1), 1.5)
    assert found is not None and found["severity"] == "minor"
    assert found["title"].endswith(": MPI_Wait +1.0 s per rank")
    assert regression.judge(comparison(2, 10, 100), 1.5) is None  # too short a history
    major = regression.judge(comparison(3, 10, 30), 1.5)
    assert major is not None and major["severity"] == "major"
