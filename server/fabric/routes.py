"""HTTP routes of the fabric domain: topology, link load and errors, events."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from server.deps import SessionDep
from server.fabric import repository
from stacklens.api_models import FabricEvent, FabricLink, FabricNode, LinkLoad, Topology

router = APIRouter(prefix="/api/fabric", tags=["fabric"])


@router.get("/topology", response_model=Topology)
def fabric_topology(session: SessionDep) -> Topology:
    """Every node and link the fabric sampler has discovered, gone and down ones included
    (switches first, then by name; links by id)."""
    return Topology(
        nodes=[FabricNode(**n) for n in repository.nodes(session)],
        links=[FabricLink(**lk) for lk in repository.links(session)],
    )


@router.get("/links", response_model=list[LinkLoad], response_model_exclude_unset=True)
def fabric_links(
    session: SessionDep,
    sort: Annotated[
        Literal["utilisation", "errors"],
        Query(description="utilisation: busiest first; errors: most error deltas first"),
    ] = "utilisation",
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    samples: Annotated[
        bool, Query(description="include each end's raw sample (a_sample, b_sample)")
    ] = True,
) -> list[LinkLoad]:
    """Per link, from the latest sample of each of its two ports: bytes/s in each direction,
    utilisation of the capacity, error-counter deltas of the last sweep (null = unknown),
    PortXmitWait; unknown utilisation last, ties by link id. `samples=false` leaves out the
    per-end samples (a third of the body: what a live view polling every second wants)."""
    loads = repository.link_loads(session, sort=sort, limit=limit)
    if not samples:
        loads = [{k: v for k, v in x.items() if k not in ("a_sample", "b_sample")} for x in loads]
    return [LinkLoad(**x) for x in loads]


@router.get("/events", response_model=list[FabricEvent])
def fabric_events(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> list[FabricEvent]:
    """The newest fabric events (topology changes), newest first."""
    return [FabricEvent(**e) for e in repository.events(session, limit)]
