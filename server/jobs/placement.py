"""Placement of a job on the fabric: its ranks -> hosts -> HCA ports -> links, and the load
of those links during the job's window (GET /api/jobs/{job}/placement; routes call these,
they never build SQL themselves).

Hosts are the names the ranks reported (`STACKLENS_HOST`, else the host name). A host is
placed on the fabric's HCA nodes by, in this order:

1. `guid`: a node GUID the hooks read from the host's local HCAs (sysfs `node_guid`, sent
   by the lowest rank per host in the `hca` table) is an HCA node of the current fabric;
   its ports are the ones the hooks reported, else all its cabled ports;
2. `host name`: an HCA node whose node description's first word is the host name (or the
   host's short name, before its first dot); real HCAs describe themselves as
   "<host> <device>", the simulator's as "<host>";
3. `unmatched`: neither; the host is listed with its ranks and no ports, never dropped.

The links listed are the job hosts' own links (kind `host`: an HCA port of a job host to
its switch) and the **topological candidates** among switch-to-switch links (kind
`candidate`): every up switch-to-switch link on some shortest path (in hops) between the
switches of two job hosts. That is the set the job's inter-host traffic *can* cross given
the topology alone; which of them a given flow crosses depends on the forwarding tables
(and adaptive routing) and is not decided here.

Load during the window: from the stored fabric samples (`fabric_port_samples`) of the two
ends of each link whose sweep interval (ts_ns - dt_ns, ts_ns] overlaps the window. Per
direction, bytes are the sending end's summed xmit deltas and the rate is those bytes over
the summed intervals of the samples with a known delta; utilisation is the busier
direction's mean rate over the capacity, peak utilisation the highest one-sample rate of
either direction over it; PortXmitWait is both ends' ticks summed, and its rate is the sum
over the two ends of ticks / covered seconds. Unknown (no sample with a known delta):
null, never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final

from sqlalchemy import Integer, and_, func, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from server.fabric import repository as fabric
from server.jobs.repository import Scope
from server.traffic.routing import hop_counts
from stacklens.schema import FabricPortSample, HcaDelta, Rank

#: Match methods, in the order they are tried.
MATCHES = ("guid", "host name", "unmatched")
#: Kinds of the listed links.
LINK_KINDS = ("host", "candidate")
#: How the crossed links were found: the topology alone, not the forwarding tables.
CROSSED_BASIS: Final = "topological candidates"
#: Longest sweep interval looked for past the window's end (bounds the partitions read).
MAX_SWEEP_NS = 3600 * 10**9


# ---- the pure part: who sits where, and which links that makes ---------------------------


def _short(host: str) -> str:
    return host.split(".", 1)[0]


def _named(hcas: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    """The HCA nodes whose description's first word is `host` or its short name."""
    names = {host, _short(host)}
    return [n for n in hcas if n["name"].split(" ", 1)[0] in names and n["name"]]


def place(
    ranks: dict[str, list[int]],
    reported: dict[str, set[tuple[str, int]]],
    nodes: list[dict[str, Any]],
    links: list[dict[str, Any]],
) -> dict[str, Any]:
    """The placement of a job's hosts on a fabric.

    `ranks`: host -> its world ranks; `reported`: host -> the (node GUID, port) its hooks
    read from sysfs (GUIDs as `0x%016x`); `nodes` and `links`: the current fabric as
    server.fabric.repository's `nodes` and `links` return them. Returns `hosts` (by name:
    host, ranks, match, ports as LinkEnds) and `links` (the links rows, in id order, each
    with `kind` and the job `hosts` it serves directly).
    """
    hosts, host_links, switches_of = _hosts(ranks, reported, nodes, links)
    hca_guids = [n["guid"] for n in nodes if n["type"] == "hca"]
    candidates = _between(links, hca_guids, switches_of)
    chosen = []
    for lk in links:
        if lk["id"] in host_links:
            chosen.append({**lk, "kind": "host", "hosts": sorted(host_links[lk["id"]])})
        elif lk["id"] in candidates:
            chosen.append({**lk, "kind": "candidate", "hosts": []})
    return {"hosts": hosts, "links": chosen}


def host_ports(
    hosts: Iterable[str],
    reported: dict[str, set[tuple[str, int]]],
    nodes: list[dict[str, Any]],
    links: list[dict[str, Any]],
) -> dict[str, list[dict[str, Any]]]:
    """Host -> the ports `place` gives it (same arguments; no links are chosen)."""
    placed, _, _ = _hosts({h: [] for h in hosts}, reported, nodes, links)
    return {h["host"]: h["ports"] for h in placed}


def _hosts(
    ranks: dict[str, list[int]],
    reported: dict[str, set[tuple[str, int]]],
    nodes: list[dict[str, Any]],
    links: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[int, set[str]], dict[str, set[str]]]:
    """`place`'s hosts, the hosts each host link serves, the switches each host is cabled
    to."""
    hcas = [n for n in nodes if n["type"] == "hca"]
    by_guid = {n["guid"]: n for n in hcas}
    cabled: dict[str, list[int]] = defaultdict(list)
    link_at: dict[tuple[str, int], dict[str, Any]] = {}
    for lk in links:
        for end in (lk["a"], lk["b"]):
            cabled[end["guid"]].append(end["port"])
            link_at[(end["guid"], end["port"])] = lk
    hosts = []
    host_links: dict[int, set[str]] = defaultdict(set)
    switches_of: dict[str, set[str]] = {}
    for host in sorted(ranks):
        known = sorted(e for e in reported.get(host, set()) if e[0] in by_guid)
        if known:
            match = "guid"
            guids = sorted({g for g, _ in known})
            ends = [(g, p) for g, p in known if (g, p) in link_at]
            ends = ends or [(g, p) for g in guids for p in sorted(cabled[g])]
        else:
            named = _named(hcas, host)
            match = "host name" if named else "unmatched"
            ends = [(n["guid"], p) for n in named for p in sorted(cabled[n["guid"]])]
        ports = [{"guid": g, "port": p, "name": by_guid[g]["name"]} for g, p in ends]
        hosts.append({"host": host, "ranks": sorted(set(ranks[host])), "match": match,
                      "ports": ports})  # fmt: skip
        switches_of[host] = set()
        for end in ends:
            cable = link_at.get(end)
            if cable is None:
                continue
            host_links[cable["id"]].add(host)
            far = cable["b"] if (cable["a"]["guid"], cable["a"]["port"]) == end else cable["a"]
            if far["guid"] not in by_guid:
                switches_of[host].add(far["guid"])
    return hosts, host_links, switches_of


def _between(
    links: list[dict[str, Any]], hca_guids: Iterable[str], switches_of: dict[str, set[str]]
) -> set[int]:
    """Ids of the up switch-to-switch links on a shortest path between the switches of two
    different hosts (a link u-v is on one between s and t when d(s,u) + 1 + d(v,t) =
    d(s,t), either way round)."""
    hca = set(hca_guids)
    trunks = [
        lk for lk in links
        if lk["state"] == "up" and lk["a"]["guid"] not in hca and lk["b"]["guid"] not in hca
    ]  # fmt: skip
    graph: dict[str, set[str]] = defaultdict(set)
    for lk in trunks:
        graph[lk["a"]["guid"]].add(lk["b"]["guid"])
        graph[lk["b"]["guid"]].add(lk["a"]["guid"])
    on: dict[str, set[str]] = defaultdict(set)  # switch -> the job hosts cabled to it
    for host, switches in switches_of.items():
        for switch in switches:
            on[switch].add(host)
    ends = sorted(on)
    pairs = {(s, t) for i, s in enumerate(ends) for t in ends[i + 1 :]
             if len(on[s] | on[t]) > 1}  # fmt: skip
    dist = {s: hop_counts(graph, s) for pair in pairs for s in pair}
    out = set()
    for s, t in pairs:
        ds, dt = dist[s], dist[t]
        if t not in ds:
            continue
        for lk in trunks:
            u, v = lk["a"]["guid"], lk["b"]["guid"]
            for x, y in ((u, v), (v, u)):
                if x in ds and y in dt and ds[x] + 1 + dt[y] == ds[t]:
                    out.add(lk["id"])
    return out


def link_window(link: dict[str, Any], a: dict[str, Any] | None, b: dict[str, Any] | None
                ) -> dict[str, Any]:  # fmt: skip
    """The window's load of `link` from its ends' sums (`window_sums`; None: no sample)."""

    def rate(end: dict[str, Any] | None, counter: str) -> float | None:
        if end is None or end[counter] is None or not end[f"{counter}_dt_ns"]:
            return None
        return float(end[counter] * 1e9 / end[f"{counter}_dt_ns"])

    cap = link["capacity_bytes_per_s"]
    a_to_b, b_to_a = rate(a, "xmit_bytes"), rate(b, "xmit_bytes")
    known = [r for r in (a_to_b, b_to_a) if r is not None]
    peaks = [e["peak_bytes_per_s"] for e in (a, b) if e and e["peak_bytes_per_s"] is not None]
    waits = [e["xmit_wait"] for e in (a, b) if e and e["xmit_wait"] is not None]
    wait_rates = [r for r in (rate(a, "xmit_wait"), rate(b, "xmit_wait")) if r is not None]
    return {
        "samples": sum(e["samples"] for e in (a, b) if e),
        "a_to_b_bytes": a["xmit_bytes"] if a else None,
        "b_to_a_bytes": b["xmit_bytes"] if b else None,
        "a_to_b_bytes_per_s": a_to_b,
        "b_to_a_bytes_per_s": b_to_a,
        "utilisation": max(known) / cap if known and cap else None,
        "peak_utilisation": max(peaks) / cap if peaks and cap else None,
        "xmit_wait": sum(waits) if waits else None,
        "xmit_wait_per_s": sum(wait_rates) if wait_rates else None,
    }


# ---- the queries ---------------------------------------------------------------------------


def hosts_and_ranks(session: Session, scope: Scope) -> dict[str, list[int]]:
    """Host -> the world ranks (of any run of the scope) that reported it, the ranks seen
    during the window."""
    query = select(Rank.host, Rank.world_rank).where(*scope.rows(Rank)).distinct()
    out: dict[str, list[int]] = defaultdict(list)
    for host, rank in session.execute(query):
        out[host].append(rank)
    return dict(out)


def reported_ports(session: Session, scope: Scope) -> dict[str, set[tuple[str, int]]]:
    """Host -> the (node GUID, port) of its local HCAs as the hooks read them from sysfs
    (any time in the job or run: identity does not depend on the window); unknown GUIDs (0)
    are left out."""
    query = (
        select(Rank.host, HcaDelta.node_guid, HcaDelta.port)
        .join(
            Rank,
            and_(
                Rank.job_id == HcaDelta.job_id,
                Rank.run_id == HcaDelta.run_id,
                Rank.world_rank == HcaDelta.world_rank,
            ),
        )
        .where(*Scope(scope.job_id, scope.run_id).rows(HcaDelta), HcaDelta.node_guid != 0)
        .distinct()
    )
    out: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for host, guid, port in session.execute(query):
        out[host].add((fabric.guid_text(guid), port))
    return dict(out)


def window_sums(session: Session, port_ids: list[int], from_ns: int, to_ns: int
                ) -> dict[int, dict[str, Any]]:  # fmt: skip
    """Per port id, its samples whose sweep interval overlaps [from_ns, to_ns): their count,
    summed xmit bytes and PortXmitWait deltas (None: no known delta) with the summed
    intervals of the samples that know each, and the highest one-sample xmit rate."""
    if not port_ids:
        return {}
    s = FabricPortSample.__table__.c
    ids = literal(sorted(set(port_ids)), type_=ARRAY(Integer))

    def known(counter: str) -> Any:
        return func.sum(s.dt_ns).filter(s[counter].is_not(None), s.dt_ns > 0)

    query = (
        select(
            s.port_id,
            func.count(),
            func.sum(s.d_xmit_bytes),
            known("d_xmit_bytes"),
            func.sum(s.d_xmit_wait),
            known("d_xmit_wait"),
            func.max(s.d_xmit_bytes * 1e9 / s.dt_ns).filter(s.dt_ns > 0),
        )
        .where(
            s.port_id == func.any(ids),
            s.ts_ns > from_ns,
            s.ts_ns < to_ns + MAX_SWEEP_NS,
            s.ts_ns - func.coalesce(s.dt_ns, 0) < to_ns,
        )
        .group_by(s.port_id)
    )
    return {
        port: {
            "samples": n,
            "xmit_bytes": None if xb is None else int(xb),
            "xmit_bytes_dt_ns": None if xb_dt is None else int(xb_dt),
            "xmit_wait": None if xw is None else int(xw),
            "xmit_wait_dt_ns": None if xw_dt is None else int(xw_dt),
            "peak_bytes_per_s": None if peak is None else float(peak),
        }
        for port, n, xb, xb_dt, xw, xw_dt, peak in session.execute(query)
    }


#: The keys of a placed link's row the API shows (besides its window's load).
_LINK_KEYS = ("id", "a", "b", "state", "capacity_bytes_per_s", "kind", "hosts")


def job_placement(session: Session, scope: Scope, from_ns: int, to_ns: int) -> dict[str, Any]:
    """The scope's hosts placed on the current fabric (`place`) and each listed link with
    its load over [from_ns, to_ns) (`link_window`)."""
    placed = place(
        hosts_and_ranks(session, scope),
        reported_ports(session, scope),
        fabric.nodes(session),
        fabric.links(session),
    )
    chosen = placed["links"]
    ports = [i for lk in chosen for i in (lk["a_port_id"], lk["b_port_id"]) if i is not None]
    sums = window_sums(session, ports, from_ns, to_ns)
    links = [
        {key: lk[key] for key in _LINK_KEYS}
        | link_window(lk, sums.get(lk["a_port_id"]), sums.get(lk["b_port_id"]))
        for lk in chosen
    ]
    return {"hosts": placed["hosts"], "links": links}
