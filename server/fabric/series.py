"""Series of the fabric: the values of a link, a port or a node (its ports summed) per step
of a window (GET /api/fabric/series), from the per-step sums of their ports'
samples (`history.step_sums`: raw samples, or the exact per-minute rollups for steps of
whole minutes). A link's steps follow `repository.link_columns` (the rules of the links
list over a window); a port's and a node's are their ports' sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.fabric import history, repository
from server.jobs.series import Steps
from stacklens.constants import ERROR_COUNTERS, PORT_COUNTERS, SATURATED_SHIFT
from stacklens.schema import FabricNode, FabricPort

_RATES = ("utilisation", "xmit_wait", "xmit_wait_per_s")
#: The columns of a link's series, and of a port's or a node's, in order.
LINK_METRICS = ("samples", "a_to_b_bytes", "b_to_a_bytes", "a_to_b_bytes_per_s",
                "b_to_a_bytes_per_s", *_RATES, *ERROR_COUNTERS)  # fmt: skip
PORT_METRICS = ("samples", "xmit_bytes", "rcv_bytes", "xmit_bytes_per_s", "rcv_bytes_per_s",
                *_RATES, *ERROR_COUNTERS)  # fmt: skip
#: The counters PORT_METRICS are made of (no packet counters).
PORT_COUNTERS_READ = tuple(c for c in PORT_COUNTERS if c not in ("xmit_pkts", "rcv_pkts"))


def link_series(session: Session, link: dict[str, Any], steps: Steps
                ) -> tuple[list[int], dict[str, list[Any]]]:  # fmt: skip
    """Step starts (steps with a sample of either end) and LINK_METRICS columns of `link`
    (a `repository.links` row): `repository.link_columns` per step."""
    ends = [-1 if link[k] is None else link[k] for k in ("a_port_id", "b_port_id")]
    sums = history.step_sums(session, [e for e in ends if e >= 0], steps, repository.LINK_COUNTERS)
    times = sorted(set(sums.key.tolist()))
    a, b = (sums.lookup([end] * len(times), times) for end in ends)
    capacity = np.full(len(times), float(link["capacity_bytes_per_s"] or 0))
    columns = repository.link_columns(a, b, capacity)
    return times, {m: columns[m] for m in LINK_METRICS}


def ports_series(session: Session, ports: list[tuple[int, int | None]], steps: Steps
                 ) -> tuple[list[int], dict[str, list[Any]]]:  # fmt: skip
    """Step starts (steps with a sample) and PORT_METRICS columns of these ports summed
    ((port id, capacity bytes/s or None) each): bytes and error deltas summed over the ports
    that know them (None: none does; an error counter saturated at one of them: unknown),
    rates summed over the ports, utilisation the busier direction over the ports'
    capacities summed."""
    sums = history.step_sums(session, [p for p, _ in ports], steps, PORT_COUNTERS_READ)
    capacity = sum(c for _, c in ports if c)
    times, step = np.unique(sums.key, return_inverse=True)
    n = len(times)

    def total(values: np.ndarray) -> np.ndarray:
        out = np.zeros(n, dtype=values.dtype)
        np.add.at(out, step, values)
        return out

    def rate_sum(counter: str) -> np.ndarray:
        rate = sums.rate(counter)
        known = total((~np.isnan(rate)).astype(np.int64)) > 0
        return np.where(known, total(np.nan_to_num(rate)), np.nan)

    def floats(values: np.ndarray) -> list[float | None]:
        return [None if v != v else v for v in values.tolist()]  # nan: unknown

    def summed(counter: str, usable: np.ndarray | None = None) -> list[Any]:
        known = total(sums.known[counter].astype(np.int64)) > 0
        if usable is not None:
            known &= usable
        values = total(sums.deltas[counter]).tolist()
        return [v if k else None for v, k in zip(values, known.tolist(), strict=True)]

    flags = np.zeros(n, dtype=np.int64)
    np.bitwise_or.at(flags, step, sums.flags)
    xmit, rcv = rate_sum("xmit_bytes"), rate_sum("rcv_bytes")
    with np.errstate(invalid="ignore"):
        util = np.fmax(xmit, rcv) / capacity if capacity else np.full(n, np.nan)
    columns: dict[str, list[Any]] = {
        "samples": total(sums.samples).tolist(),
        "xmit_bytes": summed("xmit_bytes"),
        "rcv_bytes": summed("rcv_bytes"),
        "xmit_bytes_per_s": floats(xmit),
        "rcv_bytes_per_s": floats(rcv),
        "utilisation": floats(util),
        "xmit_wait": summed("xmit_wait"),
        "xmit_wait_per_s": floats(rate_sum("xmit_wait")),
    }
    for c in ERROR_COUNTERS:
        saturated = (flags >> (SATURATED_SHIFT + PORT_COUNTERS.index(c))) & 1
        columns[c] = summed(c, saturated == 0)
    return [int(t) for t in times.tolist()], columns


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
