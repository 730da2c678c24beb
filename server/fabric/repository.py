"""Queries of the fabric domain (routes call these; they never build SQL themselves).

GUIDs are stored as signed bigints (two's complement) and leave here as `0x%016x` strings.
Link load: per link, the latest sample of each of its two ports, from fabric_port_latest
(kept by the fabric store with every sweep; never a search of the day-partitioned history).
Only the current fabric is shown: the nodes and links of the fabric discovered last
(`fabrics`, by subnet prefix and subnet manager); an earlier fabric's, in a reused state
directory, are neither drawn nor ranked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import Integer, and_, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from server.fabric import history
from server.fabric.history import Sums
from stacklens.constants import (
    ERROR_COUNTERS,
    PORT_COUNTERS,
    RESET_SHIFT,
    SATURATED_SHIFT,
    flagged_counters,
)
from stacklens.schema import (
    Fabric,
    FabricLink,
    FabricNode,
    FabricPort,
    FabricPortLatest,
)

#: Keys of the `nodes` and `links` rows that are not in the API's answers.
INTERNAL_KEYS = ("a_port_id", "b_port_id", "first_seen_ns")
#: NodeInfo NodeType codes as the API names them.
NODE_TYPES = {1: "hca", 2: "switch", 3: "router"}
#: Orders of `link_loads`.
SORTS = ("utilisation", "errors")
#: The counters `link_columns` reads: the sending ends' and both ends' errors (no receive
#: counters: a direction's bytes are its sending end's).
LINK_COUNTERS = tuple(c for c in PORT_COUNTERS if c not in ("rcv_bytes", "rcv_pkts"))


def guid_text(stored: int) -> str:
    """The stored signed bigint GUID as the API writes it: `0x` + 16 hex digits."""
    return f"{stored & 0xFFFF_FFFF_FFFF_FFFF:#018x}"


def current_fabric(session: Session) -> int | None:
    """Id of the fabric discovered last (None: no fabric identity recorded yet)."""
    query = select(Fabric.id).order_by(Fabric.last_seen_ns.desc(), Fabric.id.desc()).limit(1)
    return session.scalar(query)


def nodes(session: Session) -> list[dict[str, Any]]:
    """Every node of the current fabric ever discovered, switches first, then by name."""
    node = FabricNode
    query = select(  # columns, not ORM objects (as links())
        node.guid, node.description, node.type, node.nports, node.lid, node.gone_ns,
        node.last_seen_ns, node.first_seen_ns,
    ).order_by(node.type.desc(), node.description)  # fmt: skip
    fabric = current_fabric(session)
    if fabric is not None:
        query = query.where(node.fabric_id == fabric)
    return [
        {
            "guid": guid_text(n.guid),
            "name": n.description,
            "type": NODE_TYPES.get(n.type, "router"),
            "nports": n.nports,
            "lid": n.lid,
            "gone": n.gone_ns is not None,
            "gone_ns": n.gone_ns,
            "last_seen_ns": n.last_seen_ns,
            "first_seen_ns": n.first_seen_ns,
        }
        for n in session.execute(query)
    ]


def links(session: Session) -> list[dict[str, Any]]:
    """Every link of the current fabric ever discovered (up and down), by id, with its ends'
    names, the port ids of its ends (None if a port is unknown) and its capacity."""
    pa, pb = aliased(FabricPort), aliased(FabricPort)
    na, nb = aliased(FabricNode), aliased(FabricNode)
    query = (
        select(  # columns, not ORM objects: building those was 80 % of GET /api/jobs/{job}/links
            FabricLink.id,
            FabricLink.a_guid,
            FabricLink.a_port,
            FabricLink.b_guid,
            FabricLink.b_port,
            FabricLink.down_ns,
            FabricLink.first_seen_ns,
            pa.id.label("a_port_id"),
            pb.id.label("b_port_id"),
            pa.capacity_bytes_per_s.label("a_cap"),
            pb.capacity_bytes_per_s.label("b_cap"),
            func.coalesce(na.description, literal("")).label("a_name"),
            func.coalesce(nb.description, literal("")).label("b_name"),
        )
        .outerjoin(pa, and_(pa.guid == FabricLink.a_guid, pa.port == FabricLink.a_port))
        .outerjoin(pb, and_(pb.guid == FabricLink.b_guid, pb.port == FabricLink.b_port))
        .outerjoin(na, na.guid == FabricLink.a_guid)
        .outerjoin(nb, nb.guid == FabricLink.b_guid)
        .order_by(FabricLink.id)
    )
    fabric = current_fabric(session)
    if fabric is not None:
        query = query.where(FabricLink.fabric_id == fabric)
    out = []
    for link in session.execute(query):
        caps = [c for c in (link.a_cap, link.b_cap) if c]  # 0 / no port row = unknown end
        out.append(
            {
                "id": link.id,
                "a": {"guid": guid_text(link.a_guid), "port": link.a_port, "name": link.a_name},
                "b": {"guid": guid_text(link.b_guid), "port": link.b_port, "name": link.b_name},
                "state": "up" if link.down_ns is None else "down",
                "down_ns": link.down_ns,
                "capacity_bytes_per_s": min(caps) if caps else None,
                "a_port_id": link.a_port_id,
                "b_port_id": link.b_port_id,
                "first_seen_ns": link.first_seen_ns,
            }
        )
    return out


def latest_samples(session: Session, port_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The newest stored sample of each of these ports, by port id (ports without a sample
    are absent): fabric_port_latest, which the fabric store keeps with every sweep."""
    if not port_ids:
        return {}
    latest = FabricPortLatest.__table__
    ids = literal(sorted(set(port_ids)), type_=ARRAY(Integer))  # one parameter, not 7,000
    query = select(latest).where(latest.c.port_id == func.any(ids))
    return {row.port_id: dict(row._mapping) for row in session.execute(query)}


def port_sample(row: dict[str, Any]) -> dict[str, Any]:
    """A stored sample row as the API's PortSample."""
    flags = row["flags"]
    return {
        "ts_ns": row["ts_ns"],
        "dt_ns": row["dt_ns"],
        "xmit_bytes": row["d_xmit_bytes"],
        "rcv_bytes": row["d_rcv_bytes"],
        "xmit_pkts": row["d_xmit_pkts"],
        "rcv_pkts": row["d_rcv_pkts"],
        "xmit_wait": row["d_xmit_wait"],
        "errors": {c: row[f"d_{c}"] for c in ERROR_COUNTERS},
        "saturated": flagged_counters(flags, SATURATED_SHIFT),
        "reset": flagged_counters(flags, RESET_SHIFT),
    }


def link_load(
    link: dict[str, Any],
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    current_from_ns: int | None = None,
) -> dict[str, Any]:
    """Load and errors of `link` (a `links` row) from its ends' PortSamples (None: none).

    Each direction's bytes/s (packets/s) comes from the sending end's xmit delta / its dt;
    utilisation is the busier direction over the capacity; an error counter is the sum of
    both ends' deltas, unknown (None) as soon as one end's is, or while it is saturated at
    either end (stuck at its maximum, it no longer counts: never read as 0). A down link
    has no current load: its ends' last samples are not used; nor is a sample older than
    `current_from_ns` (its port stopped answering: see snapshot.Freshness).
    """
    if link["state"] == "down":
        a = b = None
    if current_from_ns is not None:
        a, b = (x if x is not None and x["ts_ns"] >= current_from_ns else None for x in (a, b))

    def rate(sample: dict[str, Any] | None, counter: str = "xmit_bytes") -> float | None:
        if sample is None or sample[counter] is None or not sample["dt_ns"]:
            return None
        return float(sample[counter] * 1e9 / sample["dt_ns"])

    def both(get: Callable[[dict[str, Any]], Any]) -> Any:
        values = [get(x) if x is not None else None for x in (a, b)]
        return None if None in values else sum(v for v in values if v is not None)

    def error(counter: str) -> Callable[[dict[str, Any]], int | None]:
        return lambda x: x["errors"][counter]

    saturated = sorted({c for x in (a, b) if x is not None for c in x["saturated"]})
    times = [x["ts_ns"] for x in (a, b) if x is not None]
    return _load(
        link,
        ts_ns=max(times) if times else None,
        samples=len(times),
        sent=(a["xmit_bytes"] if a else None, b["xmit_bytes"] if b else None),
        rates=(rate(a), rate(b)),
        pkts=(rate(a, "xmit_pkts"), rate(b, "xmit_pkts")),
        errors={c: None if c in saturated else both(error(c)) for c in ERROR_COUNTERS},
        saturated=saturated,
        xmit_wait=both(lambda x: x["xmit_wait"]),
        xmit_wait_per_s=both(lambda x: rate(x, "xmit_wait")),
    ) | {"a_sample": a, "b_sample": b}


def link_columns(a: Sums, b: Sums, capacity: np.ndarray) -> dict[str, list[Any]]:
    """Load and errors of links over a window or a step, in columns, from the sums of their
    two ends (`a` row i and `b` row i: the same link, or the same step), by the rules of
    `link_load`: bytes are the sending end's summed xmit deltas, rates those bytes over the
    sampled time that knows them, an error counter or xmit_wait the sum of both ends' (None
    when either end has no known delta, or the counter is saturated at either end);
    `capacity` per row (0: unknown). Also `flags`: the OR of both ends' sample flags.
    The sums need LINK_COUNTERS only."""

    def nullable(values: np.ndarray, known: np.ndarray) -> list[Any]:
        return [v if k else None for v, k in zip(values.tolist(), known.tolist(), strict=True)]

    def floats(values: np.ndarray) -> list[float | None]:
        return [None if v != v else v for v in values.tolist()]  # nan: unknown

    ra, rb = a.rate("xmit_bytes"), b.rate("xmit_bytes")
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(capacity > 0, np.fmax(ra, rb) / np.where(capacity > 0, capacity, 1),
                        np.nan)  # fmt: skip
    flags = np.where(a.samples > 0, a.flags, 0) | np.where(b.samples > 0, b.flags, 0)
    both = {c: a.known[c] & b.known[c] for c in ("xmit_wait", *ERROR_COUNTERS)}
    columns = {
        "samples": (a.samples + b.samples).tolist(),
        "ts_ns": nullable(np.maximum(a.last_ns, b.last_ns), (a.samples + b.samples) > 0),
        "a_to_b_bytes": nullable(a.deltas["xmit_bytes"], a.known["xmit_bytes"]),
        "b_to_a_bytes": nullable(b.deltas["xmit_bytes"], b.known["xmit_bytes"]),
        "a_to_b_bytes_per_s": floats(ra),
        "b_to_a_bytes_per_s": floats(rb),
        "a_to_b_pkts_per_s": floats(a.rate("xmit_pkts")),
        "b_to_a_pkts_per_s": floats(b.rate("xmit_pkts")),
        "utilisation": floats(util),
        "xmit_wait": nullable(a.deltas["xmit_wait"] + b.deltas["xmit_wait"], both["xmit_wait"]),
        "xmit_wait_per_s": floats(a.rate("xmit_wait") + b.rate("xmit_wait")),
        "flags": flags.tolist(),
    }
    for c in ERROR_COUNTERS:
        saturated = (flags >> (SATURATED_SHIFT + PORT_COUNTERS.index(c))) & 1
        columns[c] = nullable(a.deltas[c] + b.deltas[c], both[c] & (saturated == 0))
    return columns


def _load(link: dict[str, Any], *, ts_ns: int | None, samples: int, sent: tuple[Any, ...],
          rates: tuple[Any, ...], pkts: tuple[Any, ...], errors: dict[str, int | None],
          saturated: list[str], xmit_wait: int | None, xmit_wait_per_s: float | None
          ) -> dict[str, Any]:  # fmt: skip
    """A LinkLoad row of `link` from its parts ((a, b) pairs: a -> b first)."""
    cap = link["capacity_bytes_per_s"]
    known = [r for r in rates if r is not None]
    unknown = [
        name for name, v in zip(("a_to_b_bytes_per_s", "b_to_a_bytes_per_s"), rates, strict=True)
        if v is None
    ]  # fmt: skip
    unknown += [c for c, v in errors.items() if v is None]
    unknown += ["xmit_wait"] if xmit_wait is None else []
    return {
        "id": link["id"],
        "a": link["a"],
        "b": link["b"],
        "state": link["state"],
        "capacity_bytes_per_s": cap,
        "ts_ns": ts_ns,
        "samples": samples,
        "a_to_b_bytes": sent[0],
        "b_to_a_bytes": sent[1],
        "a_to_b_bytes_per_s": rates[0],
        "b_to_a_bytes_per_s": rates[1],
        "a_to_b_pkts_per_s": pkts[0],
        "b_to_a_pkts_per_s": pkts[1],
        "utilisation": max(known) / cap if known and cap else None,
        "errors": errors,
        "errors_total": sum(v for v in errors.values() if v),
        "saturated": saturated,
        "unknown": unknown,
        "xmit_wait": xmit_wait,
        "xmit_wait_per_s": xmit_wait_per_s,
    }


#: Key of a link in each order of the links list: utilisation (busiest first, then most
#: errors), errors (most first, then busiest); unknown utilisation last; then by id.
RankKey = tuple[Any, ...]


def rank_key(load: dict[str, Any], sort: str) -> RankKey:
    """The sort key of a LinkLoad row in the order `sort` (one of SORTS)."""
    u = load["utilisation"]
    by_utilisation = (int(u is None), -u if u is not None else 0.0)
    by_errors = (-load["errors_total"],)
    first, second = (
        (by_utilisation, by_errors) if sort == "utilisation" else (by_errors, by_utilisation)
    )
    return (*first, *second, load["id"])


def link_loads(
    session: Session, sort: str = "utilisation", limit: int | None = None
) -> list[dict[str, Any]]:
    """Load and errors of every link in the newest sweep, in the order `sort`."""
    all_links = links(session)
    ids = [i for lk in all_links for i in (lk["a_port_id"], lk["b_port_id"]) if i is not None]
    samples = {i: port_sample(row) for i, row in latest_samples(session, ids).items()}
    loads = [
        link_load(lk, samples.get(lk["a_port_id"]), samples.get(lk["b_port_id"]))
        for lk in all_links
    ]
    loads.sort(key=lambda x: rank_key(x, sort))
    return loads[:limit] if limit is not None else loads


def topology_at(
    session: Session, nodes_now: list[dict[str, Any]], links_now: list[dict[str, Any]], hi: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The fabric's nodes and links (`nodes`, `links`) first seen before `hi`, each gone or
    down as it was just before `hi` (by the fabric events)."""
    gone, down = history.gone_at(session, hi - 1), history.down_at(session, hi - 1)
    nodes_then = []
    for n in nodes_now:
        if n["first_seen_ns"] < hi:
            since = gone.get(_stored(n["guid"]))
            nodes_then.append({**n, "gone": since is not None, "gone_ns": since})
    links_then = [
        {**lk, "state": "up" if down.get(lk["id"]) is None else "down",
         "down_ns": down.get(lk["id"])}
        for lk in links_now if lk["first_seen_ns"] < hi
    ]  # fmt: skip
    return nodes_then, links_then


def _stored(guid: str) -> int:
    """A GUID text (`0x...`) as the stored signed bigint."""
    value = int(guid, 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def topology_version(session: Session) -> int | None:
    """Changes with every stored discovery: the newest fabric's last discovery time (None:
    no fabric identity recorded; then the topology is read every time)."""
    return session.scalar(select(func.max(Fabric.last_seen_ns)))


def samples_version(session: Session) -> tuple[int | None, int]:
    """Changes with every stored sweep and every retired sample: (newest sample time,
    ports with a latest sample)."""
    latest = FabricPortLatest.__table__
    row = session.execute(select(func.max(latest.c.ts_ns), func.count())).one()
    return row[0], row[1]


#: Columns of `latest_rows`, in order.
LATEST_COLUMNS = ("port_id", "ts_ns", "dt_ns", "flags", "d_xmit_bytes", "d_xmit_pkts",
                  "d_xmit_wait", *(f"d_{c}" for c in ERROR_COUNTERS))  # fmt: skip


def latest_rows(session: Session) -> list[tuple[Any, ...]]:
    """Every port's newest sample as plain tuples of LATEST_COLUMNS (the shared per-sweep
    view reads them all at once)."""
    latest = FabricPortLatest.__table__
    return [tuple(r) for r in session.execute(select(*(latest.c[c] for c in LATEST_COLUMNS)))]


def loads_of(
    session: Session,
    all_links: list[dict[str, Any]],
    ids: list[int],
    current_from_ns: int | None = None,
) -> list[dict[str, Any]]:
    """`link_load` of the links with these ids (in this order), from `all_links` (`links`)."""
    by_id = {lk["id"]: lk for lk in all_links}
    chosen = [by_id[i] for i in ids if i in by_id]
    ports = [i for lk in chosen for i in (lk["a_port_id"], lk["b_port_id"]) if i is not None]
    samples = {i: port_sample(row) for i, row in latest_samples(session, ports).items()}
    return [
        link_load(lk, samples.get(lk["a_port_id"]), samples.get(lk["b_port_id"]), current_from_ns)
        for lk in chosen
    ]


def _ports(all_links: list[dict[str, Any]]) -> list[int]:
    """The known port ids of these links' ends."""
    return [i for lk in all_links for i in (lk["a_port_id"], lk["b_port_id"]) if i is not None]


def window_minutes(
    session: Session, all_links: list[dict[str, Any]], first: int, last: int
) -> Sums:
    """The sums (LINK_COUNTERS) of these links' ends over the whole minutes [first, last):
    the part of `window_columns` that windows with the same whole minutes share."""
    return history.minute_sums(session, _ports(all_links), first, last, LINK_COUNTERS)


def window_columns(
    session: Session,
    all_links: list[dict[str, Any]],
    lo: int,
    hi: int,
    minutes: Sums | None = None,
) -> dict[str, list[Any]]:
    """`link_columns` of every link of `all_links` (`links`) over [lo, hi), in their order
    (`minutes`: their `window_minutes` over its whole minutes, when made before)."""
    ports = _ports(all_links)
    sums = history.window_sums(session, ports, lo, hi, LINK_COUNTERS, minutes)
    zeros = [0] * len(all_links)
    a = sums.lookup([-1 if lk["a_port_id"] is None else lk["a_port_id"] for lk in all_links], zeros)
    b = sums.lookup([-1 if lk["b_port_id"] is None else lk["b_port_id"] for lk in all_links], zeros)
    capacity = np.array([lk["capacity_bytes_per_s"] or 0 for lk in all_links], dtype=float)
    return link_columns(a, b, capacity)


def window_loads(
    session: Session,
    all_links: list[dict[str, Any]],
    lo: int,
    hi: int,
    columns: dict[str, list[Any]] | None = None,
) -> list[dict[str, Any]]:
    """Load and errors (LinkLoad rows, without per-end samples) of every link of `all_links`
    (`links`) over [lo, hi), in their order, from their `window_columns` over it (`columns`
    when given: kept by snapshot.FabricSnapshots); a link is down if it was down at the
    window's end."""
    if columns is None:
        columns = window_columns(session, all_links, lo, hi)
    down = history.down_at(session, hi - 1)
    loads = []
    for i, lk in enumerate(all_links):
        row = {name: values[i] for name, values in columns.items()}
        loads.append(
            _load(
                {**lk, "state": "down" if lk["id"] in down else "up"},
                ts_ns=row["ts_ns"],
                samples=row["samples"],
                sent=(row["a_to_b_bytes"], row["b_to_a_bytes"]),
                rates=(row["a_to_b_bytes_per_s"], row["b_to_a_bytes_per_s"]),
                pkts=(row["a_to_b_pkts_per_s"], row["b_to_a_pkts_per_s"]),
                errors={c: row[c] for c in ERROR_COUNTERS},
                saturated=flagged_counters(row["flags"], SATURATED_SHIFT),
                xmit_wait=row["xmit_wait"],
                xmit_wait_per_s=row["xmit_wait_per_s"],
            )
        )
    return loads
