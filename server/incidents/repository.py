"""Queries of the incidents domain: the series the detectors read (fabric sweeps, link
events, jobs' steps), which jobs' traffic crosses a link and how many bytes, and the stored
incidents (written by the detector service, read by the routes through the owner filter).

Jobs on a link: a job's hosts are placed on the fabric as server/jobs/placement.py places
them; its inter-host point-to-point bytes (p2p_deltas, by host pair) are routed over the
switches' stored forwarding tables (fabric_lfts). File I/O is not placed on links here
(where the storage servers sit is the traffic domain's, server/traffic, to come). Without
forwarding tables a job is on a link when the link is one of its placement links (host
links and topological candidates), bytes unknown (null).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from sqlalchemy import Integer, and_, delete, func, literal, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import Session, aliased

from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from server.fabric import repository as fabric
from server.incidents.detect import JobStep, LinkPoint
from server.jobs import placement
from server.jobs.repository import Scope
from stacklens.constants import ERROR_COUNTERS, IO_LAYERS
from stacklens.mpi_ops import op_categories
from stacklens.schema import (
    FabricEvent,
    FabricLft,
    FabricLink,
    FabricNode,
    FabricPort,
    FabricPortLatest,
    FabricPortSample,
    Incident,
    IncidentJob,
    IoDelta,
    Job,
    OpDelta,
    P2PDelta,
    Rank,
)

SECOND = 10**9
_MASK = 0xFFFF_FFFF_FFFF_FFFF
#: Op categories whose time is the MPI slowdown's (waiting) and whose bytes are MPI traffic.
WAITING = ("mpi_coll", "mpi_completion")
MOVING = ("mpi_p2p", "mpi_coll", "mpi_rma")


def _ops(categories: tuple[str, ...]) -> list[int]:
    return [i for i, c in enumerate(op_categories()) if c in categories]


# ---- fabric series -------------------------------------------------------------------------


def newest_sweep(session: Session) -> int | None:
    """End time of the newest stored sweep (fabric_port_latest), None if none."""
    latest = FabricPortLatest.__table__
    value: int | None = session.scalar(select(func.max(latest.c.ts_ns)))
    return value


def sweeps_after(session: Session, after_ns: int, upto_ns: int, links: list[dict[str, Any]]
                 ) -> list[tuple[int, dict[int, LinkPoint]]]:  # fmt: skip
    """The sweeps that ended in (after_ns, upto_ns], oldest first, each as its end time and
    link id -> LinkPoint (links with neither end sampled in it are absent)."""
    s = FabricPortSample.__table__.c
    errors = [s[f"d_{c}"] for c in ERROR_COUNTERS]
    query = select(s.port_id, s.ts_ns, s.dt_ns, s.d_xmit_bytes, s.d_xmit_wait, *errors).where(
        s.ts_ns > after_ns, s.ts_ns <= upto_ns
    )
    by_sweep: dict[int, dict[int, tuple[Any, ...]]] = defaultdict(dict)
    for row in session.execute(query):
        by_sweep[row[1]][row[0]] = row
    out = []
    for ts in sorted(by_sweep):
        ports = by_sweep[ts]
        points = {}
        for lk in links:
            a, b = ports.get(lk["a_port_id"]), ports.get(lk["b_port_id"])
            if a is None and b is None:
                continue
            points[lk["id"]] = link_point(lk, a, b, ts)
        out.append((ts, points))
    return out


def link_point(
    lk: dict[str, Any], a: tuple[Any, ...] | None, b: tuple[Any, ...] | None, ts: int
) -> LinkPoint:
    """A link's point of one sweep from its ends' sample rows (port, ts, dt, xmit bytes,
    xmit wait, error deltas...; None: not sampled)."""
    ends = [e for e in (a, b) if e is not None]
    dts = [e[2] for e in ends if e[2]]
    rates = [e[3] * 1e9 / e[2] for e in ends if e[2] and e[3] is not None]
    waits = [e[4] * 1e9 / e[2] for e in ends if e[2] and e[4] is not None]
    errs = [v for e in ends for v in e[5:] if v is not None]
    cap = lk["capacity_bytes_per_s"]
    return LinkPoint(
        t0_ns=ts - (max(dts) if dts else 0),
        t1_ns=ts,
        utilisation=max(rates) / cap if rates and cap else None,
        xmit_wait_per_s=sum(waits) if waits else None,
        errors=sum(errs) if errs else None,
        down=lk["state"] == "down",
    )


def link_events_after(
    session: Session, after_ns: int, upto_ns: int
) -> dict[int, list[tuple[int, int]]]:
    """Link id -> (change id, time) of each time its state changed in (after_ns, upto_ns]:
    the start (down) and the end (back up) of its link_down events. A change id is unique
    per change: 2 x the event's id for its start, + 1 for its end."""
    start, end = FabricEvent.start_ns, FabricEvent.end_ns
    query = select(FabricEvent.id, FabricEvent.link_id, start, end).where(
        FabricEvent.kind == "link_down",
        FabricEvent.link_id.is_not(None),
        or_(and_(start > after_ns, start <= upto_ns), and_(end > after_ns, end <= upto_ns)),
    )
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for event_id, link, down_ns, up_ns in session.execute(query):
        changes = [(2 * event_id + i, t) for i, t in enumerate((down_ns, up_ns))
                   if t is not None and after_ns < t <= upto_ns]  # fmt: skip
        if link is not None:  # always: the query excludes it; this tells the type checker
            out[link] += changes
    return dict(out)


# ---- job series ----------------------------------------------------------------------------


def job_steps(session: Session, from_ns: int, to_ns: int) -> dict[int, list[JobStep]]:
    """Per job, its whole-second steps (by interval end) in [from_ns, to_ns) with MPI
    traffic or file I/O: time in collectives and waits and MPI bytes (op_deltas), file
    I/O time and bytes of the program's I/O (io_deltas, phase 0), summed over ranks."""
    waiting, moving = _ops(WAITING), _ops(MOVING)
    ops = (
        select(
            OpDelta.job_id,
            func.floor(OpDelta.t_end_ns / SECOND).label("s"),
            func.coalesce(func.sum(OpDelta.time_ns).filter(OpDelta.op_id.in_(waiting)), 0),
            func.coalesce(func.sum(OpDelta.bytes).filter(OpDelta.op_id.in_(moving)), 0),
        )
        .where(OpDelta.t_end_ns >= from_ns, OpDelta.t_end_ns < to_ns)
        .group_by(OpDelta.job_id, text("2"))
    )
    io = (
        select(
            IoDelta.job_id,
            func.floor(IoDelta.t_end_ns / SECOND).label("s"),
            func.sum(IoDelta.read_time_ns + IoDelta.write_time_ns),
            func.sum(IoDelta.bytes_read + IoDelta.bytes_written),
        )
        .where(IoDelta.t_end_ns >= from_ns, IoDelta.t_end_ns < to_ns, IoDelta.phase == 0)
        .group_by(IoDelta.job_id, text("2"))
    )
    sums: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for job, s, t, n in session.execute(ops):
        sums[(job, int(s))][0:2] = [int(t), int(n)]
    for job, s, t, n in session.execute(io):
        sums[(job, int(s))][2:4] = [int(t or 0), int(n or 0)]
    out: dict[int, list[JobStep]] = defaultdict(list)
    for (job, s), (mt, mb, it, ib) in sorted(sums.items()):
        out[job].append(JobStep(s * SECOND, (s + 1) * SECOND, mt, mb, it, ib))
    return dict(out)


def top_ranks(session: Session, job: int, kind: str, from_ns: int, to_ns: int,
              limit: int = 16) -> list[int]:  # fmt: skip
    """The ranks of a job with the most time in waits and collectives (mpi_slowdown) or in
    file I/O (io_stall) over [from_ns, to_ns), most first."""
    if kind == "io_stall":
        t = func.sum(IoDelta.read_time_ns + IoDelta.write_time_ns)
        query = select(IoDelta.world_rank, t).where(
            IoDelta.job_id == job, IoDelta.t_end_ns >= from_ns, IoDelta.t_end_ns < to_ns,
            IoDelta.phase == 0,
        ).group_by(IoDelta.world_rank)  # fmt: skip
    else:
        t = func.sum(OpDelta.time_ns)
        query = select(OpDelta.world_rank, t).where(
            OpDelta.job_id == job, OpDelta.t_end_ns >= from_ns, OpDelta.t_end_ns < to_ns,
            OpDelta.op_id.in_(_ops(WAITING)),
        ).group_by(OpDelta.world_rank)  # fmt: skip
    rows = session.execute(query.order_by(t.desc(), text("1")).limit(limit)).all()
    return [r for r, v in rows if v]


def top_files(session: Session, job: int, from_ns: int, to_ns: int, limit: int = 8) -> list[str]:
    """`layer:path` of a job's files with the most I/O time (then bytes) in the window."""
    t = func.sum(IoDelta.read_time_ns + IoDelta.write_time_ns)
    n = func.sum(IoDelta.bytes_read + IoDelta.bytes_written)
    query = (
        select(IoDelta.layer, IoDelta.path, t, n)
        .where(
            IoDelta.job_id == job,
            IoDelta.t_end_ns >= from_ns,
            IoDelta.t_end_ns < to_ns,
            IoDelta.phase == 0,
        )  # fmt: skip
        .group_by(IoDelta.layer, IoDelta.path)
        .order_by(t.desc(), n.desc(), IoDelta.path)
        .limit(limit)
    )
    return [f"{IO_LAYERS.get(layer, layer)}:{path}" for layer, path, tt, nn in
            session.execute(query) if tt or nn]  # fmt: skip


# ---- jobs on links -------------------------------------------------------------------------


def routing(session: Session) -> Topology | None:
    """The current fabric with its forwarding tables as a Topology (up links only); None
    without forwarding tables."""
    lfts = {int(g) & _MASK: np.frombuffer(p, dtype=np.uint8) for g, p in
            session.execute(select(FabricLft.guid, FabricLft.ports))}  # fmt: skip
    if not lfts:
        return None
    current = fabric.current_fabric(session)
    nodes_q = select(FabricNode).where(FabricNode.gone_ns.is_(None))
    links_q = select(FabricLink).where(FabricLink.down_ns.is_(None))
    if current is not None:
        nodes_q = nodes_q.where(FabricNode.fabric_id == current)
        links_q = links_q.where(FabricLink.fabric_id == current)
    nodes = {n.guid & _MASK: Node(n.guid & _MASK, NodeType(n.type) if n.type in (1, 2, 3)
                                  else NodeType.CA, n.description, n.nports, n.lid)
             for n in session.scalars(nodes_q)}  # fmt: skip
    ports = {}
    for p in session.scalars(select(FabricPort)):
        g = p.guid & _MASK
        if g in nodes:
            ports[(g, p.port)] = Port(g, p.port, p.port_guid & _MASK, p.lid, p.state,
                                      p.phys_state, p.width, p.speed, p.speed_ext,
                                      p.capacity_bytes_per_s)  # fmt: skip
    links = [Link.of((lk.a_guid & _MASK, lk.a_port), (lk.b_guid & _MASK, lk.b_port))
             for lk in session.scalars(links_q)
             if lk.a_guid & _MASK in nodes and lk.b_guid & _MASK in nodes]  # fmt: skip
    return Topology(nodes=nodes, ports=ports, links=links, lfts=lfts)


def active_jobs(session: Session, from_ns: int, to_ns: int) -> list[int]:
    """Ids of the jobs with intervals in [from_ns, to_ns)."""
    query = select(Job.id).where(Job.last_seen_ns >= from_ns, Job.started_ns < to_ns)
    return list(session.scalars(query.order_by(Job.id)))


def _host_pairs(session: Session, job: int, from_ns: int, to_ns: int) -> dict[tuple[str, str], int]:
    src, dst = aliased(Rank), aliased(Rank)
    query = (
        select(src.host, dst.host, func.sum(P2PDelta.bytes_sent))
        .join(src, and_(src.run_id == P2PDelta.run_id, src.world_rank == P2PDelta.world_rank))
        .join(dst, and_(dst.run_id == P2PDelta.run_id, dst.world_rank == P2PDelta.peer))
        .where(
            P2PDelta.job_id == job,
            P2PDelta.t_end_ns >= from_ns,
            P2PDelta.t_end_ns < to_ns,
            src.host != dst.host,
        )  # fmt: skip
        .group_by(src.host, dst.host)
    )
    return {(a, b): int(n) for a, b, n in session.execute(query) if n}


class FabricView:
    """The current fabric as the join needs it: its nodes and links (server.fabric's rows),
    the routing Topology (None without forwarding tables) and link ids by their ends. Read
    once per stored discovery (`version`)."""

    def __init__(self, session: Session):
        self.version = fabric.topology_version(session)
        self.nodes = fabric.nodes(session)
        self.links = fabric.links(session)
        self.topology = routing(session)
        hcas = {n["guid"] for n in self.nodes if n["type"] == "hca"}
        self.host_links = [lk for lk in self.links
                           if lk["a"]["guid"] in hcas or lk["b"]["guid"] in hcas]  # fmt: skip
        self.link_of = {
            frozenset(((int(lk["a"]["guid"], 16), lk["a"]["port"]),
                       (int(lk["b"]["guid"], 16), lk["b"]["port"]))): lk["id"]
            for lk in self.links
        }  # fmt: skip
        self.routes: dict[tuple[int, int], list[int]] = {}

    def route(self, src: int, dst: int) -> list[int]:
        """Link ids a flow from HCA `src` to HCA `dst` crosses (GUIDs; [] if unroutable)."""
        key = (src, dst)
        if key not in self.routes:
            assert self.topology is not None
            try:
                hops = self.topology.route(src, dst)
            except (ValueError, KeyError):
                hops = []
            self.routes[key] = [self.link_of[frozenset((h.tx, h.rx))] for h in hops
                                if frozenset((h.tx, h.rx)) in self.link_of]  # fmt: skip
        return self.routes[key]


class LinkTraffic:
    """Which jobs' traffic crosses which links over a window, and how many bytes: routed
    over the forwarding tables (placement candidates, bytes unknown, without them)."""

    def __init__(self, session: Session, view: FabricView):
        self.session = session
        self.view = view
        self.topology = view.topology
        self._placed: dict[int, tuple[dict[str, int], list[int]]] = {}

    def _route(self, src: int, dst: int) -> list[int]:
        return self.view.route(src, dst)

    def _guids(self, job: int) -> tuple[dict[str, int], list[int]]:
        """A job's hosts -> their first HCA GUID (placed as the placement does), and the
        ids of its placement links (only its host links when the forwarding tables route
        its flows: the topological candidates are not needed then)."""
        if job not in self._placed:
            scope = Scope(job)
            links = self.view.links if self.topology is None else self.view.host_links
            placed = placement.place(placement.hosts_and_ranks(self.session, scope),
                                     placement.reported_ports(self.session, scope),
                                     self.view.nodes, links)  # fmt: skip
            guids = {h["host"]: int(h["ports"][0]["guid"], 16) for h in placed["hosts"]
                     if h["ports"]}  # fmt: skip
            self._placed[job] = guids, [lk["id"] for lk in placed["links"]]
        return self._placed[job]

    def on_links(self, job: int, link_ids: set[int], from_ns: int, to_ns: int
                 ) -> tuple[int | None, set[int]] | None:  # fmt: skip
        """(the job's bytes on these links during the window, None: unknown; which of them it
        crosses), or None when it crosses none of them."""
        guids, placed = self._guids(job)
        if self.topology is None:
            crossed = link_ids & set(placed)
            return (None, crossed) if crossed else None
        flows: dict[tuple[int, int], int] = defaultdict(int)
        for (a, b), n in _host_pairs(self.session, job, from_ns, to_ns).items():
            if a in guids and b in guids:
                flows[(guids[a], guids[b])] += n
        total, crossed = 0, set()
        for (src, dst), n in flows.items():
            hit = link_ids.intersection(self._route(src, dst))
            if hit:
                crossed |= hit
                total += n * len(hit)
        if not crossed:
            return None
        return total, crossed


def ranks_on_hosts(session: Session, job: int) -> dict[str, list[int]]:
    """Host -> the job's world ranks on it."""
    return placement.hosts_and_ranks(session, Scope(job))


# ---- stored incidents ----------------------------------------------------------------------


def save(session: Session, row: dict[str, Any], members: list[dict[str, Any]]) -> int:
    """Insert or update the incident with `row["key"]` and replace its jobs; its id."""
    values = insert(Incident).values(**row)
    upsert = values.on_conflict_do_update(
        index_elements=[Incident.key],
        set_={k: values.excluded[k] for k in row if k not in ("key", "detected_ns")},
    ).returning(Incident.id)
    incident_id: int = session.execute(upsert).scalar_one()
    session.execute(delete(IncidentJob).where(IncidentJob.incident_id == incident_id))
    if members:
        session.execute(insert(IncidentJob), [{**m, "incident_id": incident_id} for m in members])
    return incident_id


def remove(session: Session, key: str) -> None:
    """Delete the incident with this key (and its jobs)."""
    session.execute(delete(Incident).where(Incident.key == key))


def open_keys(session: Session) -> list[str]:
    """Keys of the incidents stored as open."""
    return list(session.scalars(select(Incident.key).where(Incident.end_ns.is_(None))))


def close_stale(session: Session, keep: set[str], end_ns: int) -> list[int]:
    """Close the open incidents not in `keep` (left open by an earlier server) at `end_ns`;
    their ids."""
    query = select(Incident).where(Incident.end_ns.is_(None))
    closed = []
    for incident in session.scalars(query):
        if incident.key not in keep:
            incident.end_ns = max(end_ns, incident.start_ns)
            incident.updated_ns = end_ns
            closed.append(incident.id)
    return closed


def _filters(
    from_ns: int | None, to_ns: int | None, severity: str | None, kind: str | None,
    job_ids: list[int] | None, link: int | None, is_open: bool | None,
) -> list[Any]:  # fmt: skip
    where: list[Any] = []
    if from_ns is not None:
        where.append(or_(Incident.end_ns.is_(None), Incident.end_ns >= from_ns))
    if to_ns is not None:
        where.append(Incident.start_ns < to_ns)
    if severity is not None:
        where.append(Incident.severity == severity)
    if kind is not None:
        where.append(or_(Incident.kind == kind, literal(kind) == func.any(Incident.signals)))
    if job_ids is not None:
        # incident_jobs is restricted by the owner filter: only the viewer's jobs match
        mine = select(IncidentJob.incident_id).where(IncidentJob.job_id.in_(job_ids))
        where.append(Incident.id.in_(mine))
    if link is not None:
        where.append(literal(link) == func.any(Incident.link_ids))
    if is_open is not None:
        where.append(Incident.end_ns.is_(None) if is_open else Incident.end_ns.is_not(None))
    return where


def jobs_by_key(session: Session, job_key: str) -> list[int]:
    """Ids of the jobs with this key the session may see."""
    return list(session.scalars(select(Job.id).where(Job.job_key == job_key)))


def list_incidents(session: Session, limit: int, after: tuple[int, int] | None,
                   **filters: Any) -> tuple[list[Incident], int]:  # fmt: skip
    """A page of incidents, newest start first (then id), after the keyset `after`; and how
    many match in all."""
    where = _filters(**filters)
    total = session.scalar(select(func.count()).select_from(Incident).where(*where)) or 0
    query = select(Incident).where(*where)
    if after is not None:
        query = query.where(
            or_(Incident.start_ns < after[0],
                and_(Incident.start_ns == after[0], Incident.id < after[1]))
        )  # fmt: skip
    query = query.order_by(Incident.start_ns.desc(), Incident.id.desc()).limit(limit + 1)
    return list(session.scalars(query)), int(total)


def get(session: Session, incident_id: int) -> Incident | None:
    """One incident by id."""
    return session.get(Incident, incident_id)


def visible_jobs(session: Session, incident_ids: list[int]) -> dict[int, dict[int, dict[str, Any]]]:
    """Incident id -> slot -> the member job the session may see (its key, user and
    incident_jobs row): other users' jobs are absent (the owner filter)."""
    if not incident_ids:
        return {}
    ids = literal(sorted(set(incident_ids)), type_=ARRAY(Integer))
    query = (
        select(IncidentJob, Job.job_key, Job.user)
        .join(Job, Job.id == IncidentJob.job_id)
        .where(IncidentJob.incident_id == func.any(ids))
    )
    out: dict[int, dict[int, dict[str, Any]]] = defaultdict(dict)
    for ij, key, user in session.execute(query):
        out[ij.incident_id][ij.slot] = {
            "job": key, "user": user, "role": ij.role, "signals": list(ij.signals),
            "ranks": list(ij.ranks), "files": list(ij.files), "link_bytes": ij.link_bytes,
            "evidence": ij.evidence,
        }  # fmt: skip
    return dict(out)
