# server/compare/context.py — where a compared run sat on the fabric, and what else was there.
"""A compared run's fabric context (issue #28 point 2): its placement over its own time
(server/jobs/placement.py, as GET /api/jobs/{job}/placement answers it for the run's
window): hosts, the leaf switches they are cabled to, the links listed (the hosts' own and
the switch-to-switch links on a shortest path between them) with the bytes and
PortXmitWait measured on them during the run; the whole fabric's attribution over the run's
time (server/traffic, the app's cache): the link directions the run's own traffic crossed
and the bytes other jobs put on them; and the incidents during the run on its links or
with its job among their members.

`summarise` is pure (tested on hand-made rows); `run_context` reads."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from server.incidents import repository as incidents
from server.jobs import placement
from server.jobs.repository import Scope
from server.query_params import Window
from server.traffic.repository import TrafficConfig
from server.traffic.service import AttributionCache
from stacklens.schema import Job, Run

#: Incidents listed per run at most (the oldest first).
MAX_INCIDENTS = 20


def summarise(placed: dict[str, Any], shares: dict[Any, dict[tuple[Any, ...], float]],
              job_id: int) -> dict[str, Any]:  # fmt: skip
    """The context's placement and load figures from the run's placement (`placed`:
    job_placement's answer) and the attribution's shares (link direction -> {(job,
    category, provenance, path): bytes}) for job `job_id`: hosts, placed hosts, leaves (the
    names of the switches at the far end of the hosts' own links), links listed and how
    many are switch-to-switch, bytes and PortXmitWait on them (None when no link has a
    sample), the link directions the job's traffic crossed, its bytes and other jobs' bytes
    on those, and how many other jobs."""
    ports = {(p["guid"], p["port"]) for h in placed["hosts"] for p in h["ports"]}
    leaves = set()
    for lk in placed["links"]:
        if lk["kind"] != "host":
            continue
        for end in (lk["a"], lk["b"]):
            if (end["guid"], end["port"]) not in ports:
                leaves.add(end["name"] or end["guid"])
    sent = [lk[k] for lk in placed["links"] for k in ("a_to_b_bytes", "b_to_a_bytes")
            if lk[k] is not None]  # fmt: skip
    waits = [lk["xmit_wait"] for lk in placed["links"] if lk["xmit_wait"] is not None]
    used, own, other = 0, 0.0, 0.0
    others: set[Any] = set()
    for crossing in sorted(shares):
        figures = shares[crossing]
        if not any(key[0] == job_id for key in figures):
            continue
        used += 1
        for key, nbytes in figures.items():
            if key[0] == job_id:
                own += nbytes
            else:
                other += nbytes
                others.add(key[0])
    return {
        "hosts": len(placed["hosts"]),
        "placed_hosts": sum(h["match"] != "unmatched" for h in placed["hosts"]),
        "leaves": sorted(leaves),
        "links": len(placed["links"]),
        "crossed_links": sum(lk["kind"] == "candidate" for lk in placed["links"]),
        "link_bytes": sum(sent) if sent else None,
        "xmit_wait": sum(waits) if waits else None,
        "used_links": used,
        "own_bytes": own,
        "other_job_bytes": other,
        "other_jobs": len(others),
    }


def run_context(session: Session, cache: AttributionCache, traffic: TrafficConfig, job: Job,
                run: Run, from_ns: int, to_ns: int) -> dict[str, Any]:  # fmt: skip
    """The run's fabric context over [`from_ns`, `to_ns`] (its start and end, or the part
    of its life a window holds; the API's RunContext)."""
    lo, hi = from_ns, to_ns + 1
    placed = placement.job_placement(session, Scope(job.id, run.id), lo, hi)
    _, _, result, _ = cache.get(session, traffic, Window(lo, hi))
    found = summarise(placed, result.shares, job.id)
    link_ids = {lk["id"] for lk in placed["links"]}
    listed, _ = incidents.list_incidents(
        session, 500, None, from_ns=lo, to_ns=hi, severity=None, kind=None, job_ids=None,
        link=None, is_open=None,
    )  # fmt: skip
    mine = {i.id for i in incidents.list_incidents(
        session, 500, None, from_ns=lo, to_ns=hi, severity=None, kind=None, job_ids=[job.id],
        link=None, is_open=None,
    )[0]}  # fmt: skip
    near = [i for i in listed if i.id in mine or link_ids & set(i.link_ids or [])]
    near.sort(key=lambda i: (i.start_ns, i.id))
    found["incidents"] = [
        {"id": i.id, "kind": i.kind, "severity": i.severity, "start_ns": i.start_ns,
         "end_ns": i.end_ns, "summary": i.title}
        for i in near[:MAX_INCIDENTS]
    ]  # fmt: skip
    return {"from_ns": lo, "to_ns": hi, **found}
