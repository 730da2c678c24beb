"""The API contract: the frontend's client reads every answer of the server's routes into
the models the routes declare (`stacklens.api_models`), and back into exactly the JSON the
route sent. A field a route sends and the client's model lacks, or the other way round,
fails here."""

from __future__ import annotations

import typing
from typing import Any

import httpx
import pydantic
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from frontend.api import IncidentQuery, JobListQuery, RunRef, StacklensApi, WindowQuery
from presentation.cards import CARDS
from server.app import create_app
from server.incidents import repository as incidents
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from stacklens.schema import Job
from tests.collector.test_ingest import T0, exchange
from tests.conftest import serving
from tests.server.fabric_data import write_small_fabric

JOB = "job/K"  # a slash: the client quotes job keys
#: How long a request may take here: this test reads what each route says, not how fast
#: (bench/list_routes measures that); a loaded CI node once took over httpx's default 5 s.
READ_TIMEOUT_S = 60.0
#: A window around the small fabric's sweeps (tests/server/fabric_data.py).
FABRIC_THEN = WindowQuery(None, "1700000000", "1700000010")
THEN = "from=1700000000&to=1700000010"

#: Each client call, its arguments, the request it makes and the list fields of the answer
#: that must be non-empty here (so that nested models are compared too).
CALLS = (
    ("jobs", (), "/api/jobs", ("jobs",)),
    ("jobs", (JobListQuery(q="K", limit=5),), "/api/jobs?q=K&limit=5", ("jobs",)),
    ("overview", (JOB,), "/api/overview?limit=1&job=job%2FK", ("jobs",)),
    (
        "overview",
        (JOB, WindowQuery(1, "0", "2e9")),
        "/api/overview?limit=1&job=job%2FK&run=1&from=0&to=2e9",
        ("jobs",),
    ),
    ("profile", (JOB, WindowQuery(None, "0")), "/api/jobs/job%2FK/profile?from=0", ("shares",)),
    (
        "series",
        (JOB, "rank", WindowQuery(), 1.5),
        "/api/jobs/job%2FK/series?by=rank&step=1.5",
        ("points", "metrics"),
    ),
    (
        "placement",
        (JOB, WindowQuery(1, "0")),
        "/api/jobs/job%2FK/placement?run=1&from=0",
        ("hosts",),
    ),
    (
        "job_links",
        (JOB, WindowQuery(1, "0"), 10),
        "/api/jobs/job%2FK/links?run=1&from=0&limit=10",
        (),
    ),
    (
        "link_attribution_series",
        (1, str(T0 // 10**9), str(T0 // 10**9 + 2), 1.0),
        f"/api/fabric/links/1/attribution/series?from={T0 // 10**9}&to={T0 // 10**9 + 2}&step=1.0",
        ("points",),
    ),
    ("deployment", (), "/api/deployment", ()),
    ("fabric_topology", (), "/api/fabric/topology", ("nodes", "links")),
    ("fabric_state", (), "/api/fabric/state", ()),
    ("fabric_links", (), "/api/fabric/links?sort=utilisation&samples=false", ()),
    ("fabric_events", (20, FABRIC_THEN), f"/api/fabric/events?limit=20&{THEN}", ("events",)),
    ("fabric_state", (FABRIC_THEN,), f"/api/fabric/state?{THEN}", ()),
    (
        "fabric_links",
        ("errors", 2, FABRIC_THEN),
        f"/api/fabric/links?sort=errors&samples=false&limit=2&{THEN}",
        ("links",),
    ),
    (
        "fabric_events",
        (5, FABRIC_THEN, "link_down"),
        f"/api/fabric/events?limit=5&{THEN}&kind=link_down",
        ("events",),
    ),
    ("fabric_series", (FABRIC_THEN, 1), f"/api/fabric/series?link=1&{THEN}", ("t_ns",)),
    ("fabric_groups", (FABRIC_THEN,), f"/api/fabric/groups?{THEN}", ()),
    (
        "fabric_series",
        (FABRIC_THEN, None, "0xf452140300000002", 1, 0.5),
        f"/api/fabric/series?guid=0xf452140300000002&port=1&{THEN}&step=0.5",
        ("t_ns",),
    ),
    ("incidents", (), "/api/incidents", ("incidents",)),
    (
        "incidents",
        (IncidentQuery(start="0", severity="major", open=False, limit=5),),
        "/api/incidents?from=0&severity=major&open=false&limit=5",
        ("incidents",),
    ),
    ("incident", (1,), "/api/incidents/1", ("links", "members")),
    ("compare", (RunRef(JOB), RunRef(JOB)), "/api/compare?b=job%2FK&a=job%2FK", ()),
    ("run_history", (RunRef(JOB),), "/api/compare/history?job=job%2FK", ("runs",)),
    ("link_attribution", (1, FABRIC_THEN), f"/api/fabric/links/1/attribution?{THEN}", ()),
    (
        "node_jobs",
        ("0xf452140300000001", FABRIC_THEN),  # spine1 of the small fabric
        f"/api/fabric/nodes/0xf452140300000001/jobs?{THEN}",
        (),
    ),
)
#: The overview's details of a job (a section per job card), each the answer of a route of
#: its own.
DETAILS = tuple(card.key for card in CARDS)
#: GET routes of the API that the frontend does not read (machines and scripts do).
NOT_READ_BY_THE_FRONTEND = {
    "/api/health",
    "/metrics",
    # each job card's own route: the pages read every card of a job at once (/api/overview)
    *(f"/api/jobs/{{job}}/{card.key}" for card in CARDS),
    "/api/jobs/{job}",  # the job list's row of one job: `stacklens run`'s summary reads it
    # a job's bytes per link by communicator family: for scripts (the card reads /families)
    "/api/jobs/{job}/families/links",
    # files the browser downloads from the pages' report buttons (links, not the client)
    "/api/reports/jobs/{job}",
    "/api/reports/window",
    "/api/reports/incidents/{incident_id}",
    # a comparison's report: the Compare page's buttons and `stacklens report --compare`
    "/api/reports/compare",
    # one group of parallel links with the jobs on its busiest member: for scripts (the
    # Fabric page lists the groups from /api/fabric/groups)
    "/api/fabric/groups/{group}",
}


def _frame(rank: int) -> bytes:
    """One interval of a two-rank job with a record in every table."""
    op = op_names().index
    tables: dict[str, list[dict[str, Any]]] = {
        "rank_info": [{"command": b"./prog", "user": b"alice"}],
        "p2p": [{"peer": 1 - rank, "bytes_sent": 800, "msgs_sent": 2, "msgs_recv": 1}],
        "op": [{"op_id": op("MPI_Send"), "calls": 2, "bytes": 800, "time_ns": 90}],
        "hist": [{"op_id": op("MPI_Send"), "bucket": 9, "count": 2}],
        "coll": [{"op_id": op("MPI_Bcast"), "comm_id": 7, "comm_size": 2, "calls": 1}],
        "rma": [{"target": 1 - rank, "op_id": op("MPI_Put"), "calls": 1, "bytes": 64}],
        "io": [{"layer": 1, "opens": 1, "path": b"/tmp/x", "mount": b"/", "fstype": b"ext4"}],
        "health": [{"frames_spooled": 1}],
    }
    return wire.encode_frame(
        job_id=JOB,
        world_rank=rank,
        world_size=2,
        seq=0,
        interval_start_ns=T0,
        interval_end_ns=T0 + 10**9,
        token="secret",
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )


#: A stored incident (server/incidents/repository.py `save`): a congested link, the job.
INCIDENT = {
    "key": "congestion:1:1", "kind": "congestion", "severity": "major",
    "title": "Congestion on spine1[1] – leaf1[3]", "start_ns": T0, "end_ns": T0 + 10**9,
    "detected_ns": T0, "updated_ns": T0, "link_ids": [1], "signals": ["congestion"],
    "links": [{"id": 1, "a": {"guid": "0x0000000000000001", "port": 1, "name": "spine1"},
               "b": {"guid": "0x0000000000000002", "port": 3, "name": "leaf1"},
               "capacity_bytes_per_s": 4, "signals": ["congestion"], "peak": 1.5,
               "evidence": [{"t_ns": T0, "utilisation": 0.9}]}],
    "members": [{"role": "victim"}],
}  # fmt: skip


@pytest.fixture
def served(collector, pg_url):
    """The API (no dashboard) over a job with every table and the small fabric, on HTTP."""
    assert [s for s, _ in exchange(collector.address, _frame(0) + _frame(1), acks=2)] == [0, 0]
    write_small_fabric(pg_url)
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        job = session.scalars(select(Job.id)).one()
        member = {"slot": 0, "job_id": job, "role": "victim", "signals": ["mpi_slowdown"],
                  "ranks": [1], "files": [], "link_bytes": 800,
                  "evidence": {"mpi_slowdown": {"series": []}}}  # fmt: skip
        incidents.save(session, INCIDENT, [member])
    app = create_app(engine)
    with serving(app) as port:
        yield f"http://127.0.0.1:{port}"
    engine.dispose()


def test_the_client_reads_exactly_what_each_route_sends(served):
    client = StacklensApi(served, timeout_s=READ_TIMEOUT_S)
    for method, args, path, filled in CALLS:
        sent = httpx.get(served + path, timeout=READ_TIMEOUT_S).json()
        assert sent, path
        assert all(sent[field] for field in filled), path
        answer = getattr(client, method)(*args)
        kind = typing.get_type_hints(getattr(StacklensApi, method))["return"]
        # exclude_unset: a field the route left out (fabric links' samples) stays out.
        read = pydantic.TypeAdapter(kind).dump_python(answer, mode="json", exclude_unset=True)
        assert read == sent, path


def test_each_client_call_parses_into_the_model_its_route_declares():
    """By the OpenAPI document: the route serving each client request answers the model (or
    list of models) that the client method returns, and every GET route is read by it."""
    paths = create_app(None).openapi()["paths"]
    routes = {path: op["get"] for path, op in paths.items() if "get" in op}
    read = set()
    for method, _args, request, _filled in CALLS:
        route = next(t for t in routes if _matches(t, request.split("?")[0]))
        read.add(route)
        schema = routes[route]["responses"]["200"]["content"]["application/json"]["schema"]
        kind = typing.get_type_hints(getattr(StacklensApi, method))["return"]
        if typing.get_origin(kind) is list:
            assert schema["type"] == "array", route
            schema, kind = schema["items"], typing.get_args(kind)[0]
        assert schema == {"$ref": f"#/components/schemas/{kind.__name__}"}, route
    assert set(routes) - read == NOT_READ_BY_THE_FRONTEND


def _matches(template: str, path: str) -> bool:
    """Whether a route path template (`/api/jobs/{job}/ops`) serves `path`."""
    head, _, rest = template.partition("{")
    if not rest:
        return template == path
    tail = rest.partition("}")[2]
    if not tail and "/" in path[len(head) :]:  # `/api/jobs/{job}`: one segment (ids as %2F)
        return False
    return path.startswith(head) and path.endswith(tail) and len(path) > len(head) + len(tail)


def test_the_overview_details_a_job_as_its_own_routes_do(served):
    sent = httpx.get(f"{served}/api/overview", params={"job": JOB},
                     timeout=READ_TIMEOUT_S).json()["shown"]  # fmt: skip
    for part in DETAILS:
        own = httpx.get(f"{served}/api/jobs/job%2FK/{part}", timeout=READ_TIMEOUT_S)
        assert sent[part] == own.json(), part
