"""HTTP routes of the fabric domain: topology, the shared per-sweep state, link load and
errors, events.

Topology and state are answered from the app's `FabricSnapshots` (computed once per
discovery / sweep for every viewer) with ETags: a client sending `If-None-Match` with the
current one gets 304 and no body.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from server.deps import SessionDep
from server.fabric import repository
from server.fabric.snapshot import Encoded, FabricSnapshots
from stacklens.api_models import FabricEvent, FabricState, LinkLoad, Topology

router = APIRouter(prefix="/api/fabric", tags=["fabric"])


def snapshots(request: Request) -> FabricSnapshots:
    """The app's shared fabric answers (made with the app)."""
    shared: FabricSnapshots = request.app.state.fabric_snapshots
    return shared


def _answer(request: Request, encoded: Encoded) -> Response:
    """200 with the encoded body and its ETag, or 304 if the client has it already."""
    headers = {"ETag": encoded.etag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == encoded.etag:
        return Response(status_code=304, headers=headers)
    return Response(encoded.body, media_type="application/json", headers=headers)


async def _shared(request: Request, what: str) -> Response:
    """The shared answer from memory while recently checked (no thread, no database), else
    checked and refreshed in a worker thread."""
    shared = snapshots(request)
    encoded = shared.recent(what)
    if encoded is None:
        encoded = await run_in_threadpool(shared.checked, request.app.state.engine, what)
    return _answer(request, encoded)


@router.get("/topology", response_model=Topology, responses={304: {"description": "unchanged"}})
async def fabric_topology(request: Request) -> Response:
    """Every node and link of the current fabric the sampler has discovered, gone and down
    ones included (switches first, then by name; links by id). ETag: changes only when a
    discovery is stored."""
    return await _shared(request, "topology")


@router.get("/state", response_model=FabricState, responses={304: {"description": "unchanged"}})
async def fabric_state(request: Request) -> Response:
    """Every link's utilisation, busier-direction rate, errors and flags in the newest
    sweep, and the fabric's counts: computed once per sweep for every viewer. ETag: changes
    with every sweep."""
    return await _shared(request, "state")


@router.get("/links", response_model=list[LinkLoad], response_model_exclude_unset=True)
def fabric_links(
    session: SessionDep,
    request: Request,
    sort: Annotated[
        Literal["utilisation", "errors"],
        Query(description="utilisation: busiest first; errors: most error deltas first"),
    ] = "utilisation",
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    samples: Annotated[
        bool, Query(description="include each end's raw sample (a_sample, b_sample)")
    ] = True,
) -> list[LinkLoad]:
    """Per link, from the latest sample of each of its two ports: bytes/s and packets/s in
    each direction, utilisation of the capacity, error-counter deltas of the last sweep
    (null = unknown or saturated), PortXmitWait; unknown utilisation last, ties by link id.
    `samples=false` leaves out the per-end samples. The order is computed once per sweep;
    only the `limit` links shown are built."""
    loads = snapshots(request).link_loads(session, sort, limit)
    if not samples:
        loads = [{k: v for k, v in x.items() if k not in ("a_sample", "b_sample")} for x in loads]
    return [LinkLoad(**x) for x in loads]


@router.get("/events", response_model=list[FabricEvent])
def fabric_events(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> list[FabricEvent]:
    """The newest fabric events (topology changes), newest first."""
    return [FabricEvent(**e) for e in repository.events(session, limit)]
