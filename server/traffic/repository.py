"""Queries of the traffic domain: the fabric's routes and measured link bytes, and every
job's transfers over a window, for the attribution core (server/traffic/attribution.py).
Routes call these; they never build SQL themselves.

A link's `other` is its measured bytes minus *every* job's attributed bytes, so the
transfers are read for all jobs, not only the viewer's: these reads go through the
session's connection, past the owner filter (server/access/owner.py), and
`mask_jobs` then shows every job the viewer may not read as "another job" (no id, no
user) before anything leaves the server. Nothing else is read this way.

Window: a rank's interval counts when its end lies in [from, to) (server/query_params.py);
a fabric sample counts when its sweep ended in it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, and_, func, literal, or_, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from collector.fabric.store import unsigned64
from server.fabric import repository as fabric
from server.jobs import placement
from server.jobs.repository import coll_sums, p2p_sums
from server.query_params import MAX_NS, Window
from server.traffic import collectives, monitored
from server.traffic.attribution import Rail, Transfer, rma_direction, storage_shares
from server.traffic.routing import Crossing, RouteLink, Router
from stacklens import rails
from stacklens.constants import MINUTE_NS
from stacklens.mpi_ops import op_names
from stacklens.rails import Binding
from stacklens.schema import (
    CollDelta,
    CollMinute,
    FabricLft,
    FabricNode,
    FabricPort,
    FabricPortSample,
    HcaDelta,
    IoDelta,
    Job,
    Rank,
    RmaDelta,
    RollupDirty,
)

#: The communicator id the hooks fold communicators beyond STACKLENS_MAX_KEYS into.
OVERFLOW_COMM = 2**32 - 1


@dataclass(frozen=True)
class TrafficConfig:
    """How the fabric forwards and where file systems' servers are (the settings
    STACKLENS_FABRIC_PATHS, STACKLENS_STORAGE_SERVERS, STACKLENS_STORAGE_PLACEMENT)."""

    paths: str = "fixed"
    storage: dict[str, list[str]] = field(default_factory=dict)
    placement: str = "stripe"


@dataclass
class Fabric:
    """The current fabric as the attribution needs it."""

    router: Router
    links: dict[int, dict[str, Any]]  # link id -> server.fabric.repository.links row
    nodes: list[dict[str, Any]]
    all_links: list[dict[str, Any]]


def load_fabric(session: Session, paths: str) -> Fabric:
    """The current fabric's up links, switches, HCA port LIDs and forwarding tables."""
    nodes = fabric.nodes(session)
    all_links = fabric.links(session)
    up = [lk for lk in all_links if lk["state"] == "up"]
    switches = {int(n["guid"], 16) for n in nodes if n["type"] == "switch"}
    hcas = {n["guid"] for n in nodes if n["type"] != "switch"}
    lids: dict[tuple[int, int], int] = {}
    rows = session.execute(
        select(FabricPort.guid, FabricPort.port, FabricPort.lid)
        .join(FabricNode, FabricNode.guid == FabricPort.guid)
        .where(FabricNode.type != 2)
    )
    for guid, port, lid in rows:
        if fabric.guid_text(guid) in hcas:
            lids[(unsigned64(guid), port)] = lid
    lfts = {
        unsigned64(guid): bytes(ports)
        for guid, ports in session.execute(select(FabricLft.guid, FabricLft.ports))
        if unsigned64(guid) in switches
    }
    links = [
        RouteLink(lk["id"], (int(lk["a"]["guid"], 16), lk["a"]["port"]),
                   (int(lk["b"]["guid"], 16), lk["b"]["port"]))
        for lk in up
    ]  # fmt: skip
    router = Router(switches, links, lids, lfts, paths)
    return Fabric(router, {lk["id"]: lk for lk in all_links}, nodes, all_links)


def measured(
    session: Session, fab: Fabric, window: Window, link_ids: set[int] | None = None
) -> dict[Crossing, dict[str, Any]]:
    """Per link direction (of every link, or of those in `link_ids`): the sending end's
    summed xmit byte deltas over the samples whose sweep ended in the window (`bytes`: None
    when none is known), the samples and those with an unknown delta (first sample, reset)."""
    ends: dict[int, Crossing] = {}
    for lk in fab.links.values():
        if link_ids is not None and lk["id"] not in link_ids:
            continue
        if lk["a_port_id"] is not None:
            ends[lk["a_port_id"]] = (lk["id"], "a_to_b")
        if lk["b_port_id"] is not None:
            ends[lk["b_port_id"]] = (lk["id"], "b_to_a")
    if not ends:
        return {}
    s = FabricPortSample.__table__.c
    ids = literal(sorted(ends), type_=ARRAY(Integer))
    query = select(
        s.port_id,
        func.count(),
        func.sum(s.d_xmit_bytes),
        func.count().filter(s.d_xmit_bytes.is_(None)),
    ).where(s.port_id == func.any(ids))
    if window.from_ns is not None:
        query = query.where(s.ts_ns >= window.from_ns)
    if window.to_ns is not None:
        query = query.where(s.ts_ns < window.to_ns)
    out = {}
    for port, n, total, unknown in session.execute(query.group_by(s.port_id)):
        out[ends[port]] = {
            "bytes": None if total is None else int(total),
            "samples": n,
            "unknown_samples": unknown,
        }
    return out


def _in_window(table: Any, window: Window) -> list[Any]:
    out = []
    if window.from_ns is not None:
        out.append(table.t_end_ns >= window.from_ns)
    if window.to_ns is not None:
        out.append(table.t_end_ns < window.to_ns)
    return out


@dataclass
class JobTraffic:
    """The jobs' transfers over a window, and what could not be modelled or placed."""

    transfers: list[Transfer]
    hosts: set[str]
    left_out: dict[str, int]
    collective_source: dict[int, str]  # job id -> measured | modelled
    ranks: dict[tuple[int, int], tuple[str, Binding]]  # (run, rank) -> host, binding to rails


def job_traffic(
    session: Session,
    window: Window,
    config: TrafficConfig,
    job_ids: list[int] | None = None,
    run_id: int | None = None,
) -> JobTraffic:
    """Every job's (or those of `job_ids`) transfers between hosts over the window, each end
    with its rank's binding to rails (stacklens/rails.py): p2p from p2p_deltas and their
    minute rollups (bytes sent to a peer: jobs.repository.p2p_sums), RMA from rma_deltas
    (by the op's direction), modelled collective on-wire bytes from coll_deltas and their
    minute rollups (server/traffic/collectives.py), file I/O from io_deltas to and from the
    mount's servers (`config.storage`); of one run if `run_id`.
    Read past the owner filter (see the module's doc)."""
    conn = session.connection()

    def only(t: Any) -> list[Any]:
        jobs = [] if job_ids is None else [t.job_id.in_(job_ids)]
        return jobs + ([] if run_id is None else [t.run_id == run_id])

    host: dict[tuple[int, int], str] = {}
    job_of_run: dict[int, int] = {}
    placed = conn.execute(
        select(Rank.job_id, Rank.run_id, Rank.world_rank, Rank.host, Rank.net_devices)
        .where(*only(Rank))
    ).all()  # fmt: skip
    for job, run, rank, name, _ in placed:
        host[(run, rank)] = name
        job_of_run[run] = job
    bound = rails.bindings((run, rank, name, net) for _, run, rank, name, net in placed)
    left: dict[str, int] = defaultdict(int)
    out: list[Transfer] = []

    def send(job: int, category: str, prov: str, run: int, a: int, b: int, nbytes: int) -> None:
        src, dst = host.get((run, a)), host.get((run, b))
        if src is None or dst is None:
            left["unknown_rank"] += nbytes
        else:
            out.append(Transfer(job, category, prov, src, dst, nbytes, bound[(run, a)],
                                bound[(run, b)]))  # fmt: skip

    # the minute rollups where the window holds whole clean minutes, the raw deltas elsewhere
    jobs = sorted(set(job_of_run.values()))
    sums = p2p_sums(jobs, "run_id", "world_rank", "peer", run_id=run_id, window=window)
    p2p = select(sums.c.job_id, sums.c.run_id, sums.c.world_rank, sums.c.peer, sums.c.bytes)
    sent: dict[int, dict[tuple[int, int], int]] = defaultdict(dict)  # run -> the app's p2p
    for job, run, rank, peer, nbytes in conn.execute(p2p.where(sums.c.bytes > 0)):
        send(job, "mpi_p2p", "routed", run, rank, peer, int(nbytes))
        sent[run][(rank, peer)] = int(nbytes)
    source = {j: "modelled" for j in job_of_run.values()}
    measured_runs = _measured_collectives(session, job_of_run, window, sent, send, left, source)
    names = op_names()
    r = RmaDelta
    rma = (
        select(r.job_id, r.run_id, r.world_rank, r.target, r.op_id, func.sum(r.bytes))
        .where(*only(r), *_in_window(r, window), r.bytes > 0)
        .group_by(r.job_id, r.run_id, r.world_rank, r.target, r.op_id)
    )
    for job, run, rank, target, op, nbytes in conn.execute(rma):
        way = rma_direction(names[op]) if op < len(names) else "to_target"
        if way in ("to_target", "both"):
            send(job, "mpi_rma", "routed", run, rank, target, int(nbytes))
        if way in ("from_target", "both"):
            send(job, "mpi_rma", "routed", run, target, rank, int(nbytes))
    _collectives(conn, jobs, run_id, window, names, send, left, measured_runs)
    hosts = set(host.values())
    io = IoDelta.__table__.c
    rows = conn.execute(
        select(io.job_id, io.run_id, io.world_rank, io.path, io.mount,
               func.sum(io.bytes_read), func.sum(io.bytes_written))
        .where(*only(io), *_in_window(io, window))
        .group_by(io.job_id, io.run_id, io.world_rank, io.path, io.mount)
    )  # fmt: skip
    for job, run, rank, path, mount, nread, nwritten in rows:
        me = host.get((run, rank))
        for way, nbytes in (("write", int(nwritten or 0)), ("read", int(nread or 0))):
            if nbytes <= 0:
                continue
            if me is None:
                left["unknown_rank"] += nbytes
                continue
            shares = storage_shares(path, mount, config.storage, config.placement, nbytes)
            if not shares:
                left["local_io"] += nbytes
            for server, part in shares:
                hosts.add(server)
                mine = bound[(run, rank)]
                if way == "write":
                    out.append(Transfer(job, "io", "routed", me, server, part, src_bind=mine))
                else:
                    out.append(Transfer(job, "io", "routed", server, me, part, dst_bind=mine))
    ranks = {key: (name, bound[key]) for key, name in host.items()}
    return JobTraffic(out, hosts, dict(left), source, ranks)


def _measured_collectives(
    session: Session,
    job_of_run: dict[int, int],
    window: Window,
    sent: dict[int, dict[tuple[int, int], int]],
    send: Any,
    left: dict[str, int],
    source: dict[int, str],
) -> set[int]:
    """The collective transfers of the runs whose MPI monitored its traffic
    (server/traffic/monitored.py): monitored - the application's own p2p to each peer, as
    `measured`; a pair monitored below its p2p is counted (`measured_below_p2p`). The runs
    monitored (their collectives are not modelled); `source` says per job: measured (every
    run), mixed (some) or modelled (none). Read past the owner filter: a session
    of its own on this session's connection, without the filter's hook."""
    lo = 0 if window.from_ns is None else window.from_ns
    hi = MAX_NS if window.to_ns is None else window.to_ns
    runs = set()
    with Session(bind=session.connection()) as everyone:
        for run, job in sorted(job_of_run.items()):
            counted = monitored.monitored_bytes(everyone, job, run, lo, hi)
            if counted is None:
                continue
            runs.add(run)
            for (a, b), nbytes in sorted(counted.items()):
                coll = nbytes - sent[run].get((a, b), 0)
                if coll > 0:
                    send(job, "mpi_coll", "measured", run, a, b, coll)
                elif coll < 0:
                    left["measured_below_p2p"] += -coll
    for job in set(job_of_run.values()):
        mine = {run for run, j in job_of_run.items() if j == job}
        source[job] = ("measured" if mine <= runs else "mixed") if mine & runs else "modelled"
    return runs


def _collectives(conn: Any, jobs: list[int], run_id: int | None, window: Window,
                 names: tuple[str, ...], send: Any, left: dict[str, int],
                 measured_runs: set[int]) -> None:  # fmt: skip
    """The modelled collective transfers of the window's collective sums of `jobs` (of run
    `run_id` if given; from the rollups where they hold the window: coll_sums), those of
    the runs whose collectives were not measured."""
    keys = ("run_id", "world_rank", "op_id", "comm_id", "comm_size", "root")
    sums = coll_sums(jobs, *keys, run_id=run_id, window=window)
    rows = conn.execute(
        select(sums.c.job_id, *(sums.c[k] for k in keys), sums.c.calls, sums.c.bytes)
        .where(sums.c.bytes > 0)
    ).all()  # fmt: skip
    if not rows:
        return
    members = _members(conn, sorted({row[1] for row in rows}))
    groups = {key: sorted(ranks) for key, ranks in members.items()}  # once per communicator
    where = {key: collectives.positions(group) for key, group in groups.items()}
    for job, run, rank, op, comm, size, root, calls, nbytes in rows:
        if run in measured_runs:
            continue
        name = names[op] if op < len(names) else ""
        group = groups.get((run, comm), [])
        if comm == OVERFLOW_COMM or len(group) != size or not collectives.modelled(name):
            left["unmodelled_collective"] += int(nbytes)
            continue
        sends = collectives.rank_sends(name, group, rank, root, int(calls), int(nbytes),
                                       where.get((run, comm)))  # fmt: skip
        for (a, b), part in sends.items():
            send(job, "mpi_coll", "modelled", run, a, b, part)


def _members(conn: Any, runs: list[int]) -> dict[tuple[int, int], set[int]]:
    """The ranks of each (run, communicator) of `runs`: those with a collective row on it at
    any time. From `coll_minutes` for the minutes rolled up, from the raw deltas for the
    minutes not rolled up yet (`rollup_dirty`, read first: a commit marks its minutes dirty
    in its own transaction and a rollup pass writes a minute's rows in the one that clears
    it, so a minute is read from one or the other, or from both (a set): never missed)."""
    run_ids = literal(runs, type_=ARRAY(Integer))
    dirty: dict[int, list[int]] = defaultdict(list)
    for run, minute in conn.execute(
        select(RollupDirty.run_id, RollupDirty.minute_ns)
        .where(RollupDirty.run_id == func.any(run_ids))
        .order_by(RollupDirty.run_id, RollupDirty.minute_ns)
    ):
        dirty[run].append(minute)
    cm, c = CollMinute, CollDelta
    queries = [select(cm.run_id, cm.comm_id, cm.world_rank).where(cm.run_id == func.any(run_ids))]
    spans = []
    for run, minutes in dirty.items():
        for lo, hi in _spans(minutes):
            spans.append(and_(c.run_id == run, c.t_end_ns >= lo, c.t_end_ns < hi))
    if spans:
        queries.append(select(c.run_id, c.comm_id, c.world_rank).where(or_(*spans)))
    members: dict[tuple[int, int], set[int]] = defaultdict(set)
    for query in queries:
        for run, comm, rank in conn.execute(query.distinct()):
            members[(run, comm)].add(rank)
    return members


def _spans(minutes: list[int]) -> list[tuple[int, int]]:
    """Sorted minute starts as [start, end) spans of consecutive minutes."""
    spans: list[tuple[int, int]] = []
    for m in minutes:
        if spans and spans[-1][1] == m:
            spans[-1] = (spans[-1][0], m + MINUTE_NS)
        else:
            spans.append((m, m + MINUTE_NS))
    return spans


def rails_of(session: Session, fab: Fabric, hosts: set[str]) -> dict[str, list[Rail]]:
    """Host -> its rails (its HCAs, in rail order: stacklens.rails.order of their devices),
    placed as server/jobs/placement.py places a job's hosts (the node GUIDs its hooks read,
    else its name); unplaced hosts are absent."""
    conn = session.connection()
    reported: dict[str, set[tuple[str, int]]] = defaultdict(set)
    query = (
        select(Rank.host, HcaDelta.node_guid, HcaDelta.port)
        .join(Rank, and_(Rank.job_id == HcaDelta.job_id, Rank.run_id == HcaDelta.run_id,
                         Rank.world_rank == HcaDelta.world_rank))
        .where(HcaDelta.node_guid != 0)
        .distinct()
    )  # fmt: skip
    for name, guid, port in conn.execute(query):
        if name in hosts:
            reported[name].add((fabric.guid_text(guid), port))
    placed = placement.host_ports(hosts, reported, fab.nodes, fab.all_links)
    out = {}
    for host, ports in placed.items():
        devices = {int(p["guid"], 16): rails.device_of(p["name"]) for p in ports}
        ranked = sorted(devices.items(), key=lambda gd: (rails.rail_key(gd[1]), gd[0]))
        if ranked:
            out[host] = [Rail(guid, device) for guid, device in ranked]
    return out


def data_version(session: Session) -> tuple[Any, ...]:
    """Changes whenever what an attribution reads may have changed: a discovery (links,
    forwarding tables), a sweep, a frame of any job (the jobs' newest interval end and
    count, read past the owner filter)."""
    jobs = session.connection().execute(select(func.max(Job.last_seen_ns), func.count())).one()
    return (fabric.topology_version(session), fabric.samples_version(session), tuple(jobs))


def visible_jobs(session: Session, job_ids: set[int]) -> dict[int, dict[str, Any]]:
    """The jobs among `job_ids` the session's viewer may read (through the owner filter):
    id -> key and user."""
    if not job_ids:
        return {}
    query = select(Job.id, Job.job_key, Job.user).where(Job.id.in_(sorted(job_ids)))
    return {i: {"job": key, "user": user} for i, key, user in session.execute(query)}
