"""Series of the fabric: the values of a link, a port or a node (its ports summed) per step
of a window (GET /api/fabric/series), from the per-step sums of their ports'
samples (`history.step_sums`: raw samples, or the exact per-minute rollups for steps of
whole minutes). A link's step follows `repository.window_load` (the rules of the links
list over a window); a port's and a node's are their ports' sums.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.fabric import history, repository
from server.fabric.history import Sums
from server.jobs.series import Steps
from stacklens.constants import ERROR_COUNTERS, SATURATED_SHIFT, flagged_counters
from stacklens.schema import FabricNode, FabricPort

_RATES = ("utilisation", "xmit_wait", "xmit_wait_per_s")
#: The columns of a link's series, and of a port's or a node's, in order.
LINK_METRICS = ("samples", "a_to_b_bytes", "b_to_a_bytes", "a_to_b_bytes_per_s",
                "b_to_a_bytes_per_s", *_RATES, *ERROR_COUNTERS)  # fmt: skip
PORT_METRICS = ("samples", "xmit_bytes", "rcv_bytes", "xmit_bytes_per_s", "rcv_bytes_per_s",
                *_RATES, *ERROR_COUNTERS)  # fmt: skip


def link_series(session: Session, link: dict[str, Any], steps: Steps
                ) -> tuple[list[int], dict[str, list[Any]]]:  # fmt: skip
    """Step starts (steps with a sample of either end) and LINK_METRICS columns of `link`
    (a `repository.links` row)."""
    a_id, b_id = link["a_port_id"], link["b_port_id"]
    sums = history.step_sums(session, [i for i in (a_id, b_id) if i is not None], steps)
    times = sorted({t for _, t in sums})
    columns: dict[str, list[Any]] = {m: [] for m in LINK_METRICS}
    for t in times:
        load = repository.window_load(link, sums.get((a_id, t)), sums.get((b_id, t)), False)
        for m in LINK_METRICS:
            columns[m].append(load["errors"][m] if m in ERROR_COUNTERS else load[m])
    return times, columns


def ports_series(session: Session, ports: list[tuple[int, int | None]], steps: Steps
                 ) -> tuple[list[int], dict[str, list[Any]]]:  # fmt: skip
    """Step starts (steps with a sample) and PORT_METRICS columns of these ports summed
    ((port id, capacity bytes/s or None) each): bytes and error deltas summed over the ports
    that know them (an error counter saturated at one of them: unknown), rates summed over
    the ports, utilisation the busier direction over the ports' capacities summed."""
    sums = history.step_sums(session, [p for p, _ in ports], steps)
    capacity = sum(c for _, c in ports if c) or None
    by_step: dict[int, list[Sums]] = {}
    for (_, t), value in sums.items():
        by_step.setdefault(t, []).append(value)
    times = sorted(by_step)
    columns: dict[str, list[Any]] = {m: [] for m in PORT_METRICS}
    for t in times:
        for m, v in _ports_point(by_step[t], capacity).items():
            columns[m].append(v)
    return times, columns


def _ports_point(sums: list[Sums], capacity: int | None) -> dict[str, Any]:
    """One step of PORT_METRICS from its ports' sums."""

    def total(values: list[Any]) -> Any:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    saturated = {c for x in sums for c in flagged_counters(x.flags, SATURATED_SHIFT)}
    xmit, rcv = (
        total([x.rate("xmit_bytes") for x in sums]),
        total([x.rate("rcv_bytes") for x in sums]),
    )
    busier = [r for r in (xmit, rcv) if r is not None]
    point = {
        "samples": sum(x.samples for x in sums),
        "xmit_bytes": total([x.deltas["xmit_bytes"] for x in sums]),
        "rcv_bytes": total([x.deltas["rcv_bytes"] for x in sums]),
        "xmit_bytes_per_s": xmit,
        "rcv_bytes_per_s": rcv,
        "utilisation": max(busier) / capacity if busier and capacity else None,
        "xmit_wait": total([x.deltas["xmit_wait"] for x in sums]),
        "xmit_wait_per_s": total([x.rate("xmit_wait") for x in sums]),
    }
    for c in ERROR_COUNTERS:
        point[c] = None if c in saturated else total([x.deltas[c] for x in sums])
    return point


def port_of(session: Session, guid: int, port: int) -> dict[str, Any] | None:
    """The port (node GUID as stored, port number): id, capacity (None: unknown) and
    `name[port]`; None if unknown."""
    query = (
        select(FabricPort.id, FabricPort.capacity_bytes_per_s, FabricNode.description)
        .outerjoin(FabricNode, FabricNode.guid == FabricPort.guid)
        .where(FabricPort.guid == guid, FabricPort.port == port)
    )
    row = session.execute(query).first()
    if row is None:
        return None
    name = row[2] if row[2] is not None else repository.guid_text(guid)
    return {"id": row[0], "capacity": row[1] or None, "name": f"{name}[{port}]"}


def node_ports(session: Session, guid: int) -> tuple[str, list[tuple[int, int | None]]] | None:
    """A node's name and its cabled ports (ends of the current fabric's links) as (port id,
    capacity or None); None if the node is unknown."""
    name = session.scalar(select(FabricNode.description).where(FabricNode.guid == guid))
    if name is None:
        return None
    text = repository.guid_text(guid)
    ids = sorted({lk[f"{e}_port_id"] for lk in repository.links(session) for e in ("a", "b")
                  if lk[e]["guid"] == text and lk[f"{e}_port_id"] is not None})  # fmt: skip
    caps = dict(
        session.execute(
            select(FabricPort.id, FabricPort.capacity_bytes_per_s).where(FabricPort.id.in_(ids))
        ).all()
    )
    return name, [(i, caps.get(i) or None) for i in ids]
