"""Queries of the incidents domain: the series the detectors read (fabric sweeps, link
events, jobs' steps), which jobs' traffic crosses a link and how many bytes, and the stored
incidents (written by the detector service, read by the routes through the owner filter).

Which jobs are on a link and with how many bytes is the traffic domain's attribution
(server/traffic: every job's point-to-point, collective, one-sided and file I/O bytes
routed over the stored forwarding tables); the service reads it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Integer, and_, delete, func, literal, or_, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import Session

from server.callsites import service as callsite_service
from server.callsites import summary as callsite_summary
from server.fabric import groups as fabric_groups
from server.fabric import repository as fabric
from server.incidents.detect import JobStep, LinkPoint
from server.jobs import series
from server.jobs.repository import Scope
from server.query_params import Window
from stacklens.constants import (
    ERROR_COUNTERS,
    IO_LAYERS,
    MOVING,
    PORT_COUNTERS,
    SATURATED_SHIFT,
)
from stacklens.mpi_ops import op_categories, op_names, op_waits, ops_waiting
from stacklens.schema import (
    FabricEvent,
    FabricPortLatest,
    FabricPortSample,
    Incident,
    IncidentJob,
    IoDelta,
    Job,
    OpDelta,
    Rank,
)

SECOND = 10**9
_MASK = 0xFFFF_FFFF_FFFF_FFFF
#: Bit of a sample's flags that says its PortXmitWait is saturated.
_WAIT_SATURATED = SATURATED_SHIFT + PORT_COUNTERS.index("xmit_wait")
#: What a blocking MPI call waits for (the spec's waits= key) whose time is the MPI
#: slowdown's (MPI-IO is the I/O stall's, from the file I/O records); the op categories
#: whose bytes are MPI traffic are stacklens.constants.MOVING.
WAITING = ("p2p", "coll", "completion", "rma")
#: What an I/O stall's time was spent in: reads and writes per I/O layer (MPI-IO's are its
#: MPI_File_* calls' own, the POSIX calls an MPI-IO layer makes inside them are not the
#: program's and are not counted again), the evidence of its kind of waiting.
IO_WAITING = tuple(f"{_layer}_{d}" for _layer in ("mpiio", "posix", "stdio")
                   for d in ("read", "write"))  # fmt: skip
#: The I/O layer codes (stacklens.constants.IO_LAYERS) as IO_WAITING names them.
_IO_LAYER_KEYS = {"POSIX": "posix", "stdio": "stdio", "MPI-IO": "mpiio"}


def io_class(layer: int, direction: str) -> str:
    """The IO_WAITING name of reads or writes (`direction`) through an I/O layer code."""
    return f"{_IO_LAYER_KEYS.get(IO_LAYERS.get(layer, ''), f'layer{layer}')}_{direction}"


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
    query = select(
        s.port_id, s.ts_ns, s.dt_ns, s.flags, s.d_xmit_bytes, s.d_xmit_wait, *errors
    ).where(s.ts_ns > after_ns, s.ts_ns <= upto_ns)
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
    """A link's point of one sweep from its ends' sample rows (port, ts, dt, flags, xmit
    bytes, xmit wait, error deltas...; None: not sampled). A saturated PortXmitWait has no
    delta (unknown) and sets the point's xmit_wait_saturated."""
    ends = [e for e in (a, b) if e is not None]
    dts = [e[2] for e in ends if e[2]]
    rates = [e[4] * 1e9 / e[2] for e in ends if e[2] and e[4] is not None]
    waits = [e[5] * 1e9 / e[2] for e in ends if e[2] and e[5] is not None]
    errs = [v for e in ends for v in e[6:] if v is not None]
    cap = lk["capacity_bytes_per_s"]
    return LinkPoint(
        t0_ns=ts - (max(dts) if dts else 0),
        t1_ns=ts,
        utilisation=max(rates) / cap if rates and cap else None,
        xmit_wait_per_s=sum(waits) if waits else None,
        errors=sum(errs) if errs else None,
        down=lk["state"] == "down",
        xmit_wait_saturated=any(e[3] >> _WAIT_SATURATED & 1 for e in ends),
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
    traffic or file I/O: time blocked in MPI calls that wait (by WAITING kind) and MPI
    bytes (op_deltas), file I/O read and write time (by IO_WAITING class: layer and
    direction) and bytes of the program's I/O (io_deltas, phase 0), summed over ranks, and
    how many ranks reported either; the MPI bytes per traffic category (the step's mix)."""
    moving = _ops(MOVING)
    by_category = [func.coalesce(func.sum(OpDelta.bytes).filter(
        OpDelta.op_id.in_(_ops((c,)))), 0) for c in MOVING]  # fmt: skip
    blocked = [func.coalesce(func.sum(OpDelta.time_ns).filter(
        OpDelta.op_id.in_(ops_waiting((kind,)))), 0) for kind in WAITING]  # fmt: skip
    ops = (
        select(
            OpDelta.job_id,
            func.floor(OpDelta.t_end_ns / SECOND).label("s"),
            func.coalesce(func.sum(OpDelta.bytes).filter(OpDelta.op_id.in_(moving)), 0),
            func.count(OpDelta.world_rank.distinct()),
            *blocked,
            *by_category,
        )
        .where(OpDelta.t_end_ns >= from_ns, OpDelta.t_end_ns < to_ns)
        .group_by(OpDelta.job_id, text("2"))
    )
    io = (
        select(
            IoDelta.job_id,
            func.floor(IoDelta.t_end_ns / SECOND).label("s"),
            IoDelta.layer,
            func.sum(IoDelta.read_time_ns),
            func.sum(IoDelta.write_time_ns),
            func.sum(IoDelta.bytes_read + IoDelta.bytes_written),
            func.array_agg(IoDelta.world_rank.distinct()),
        )
        .where(IoDelta.t_end_ns >= from_ns, IoDelta.t_end_ns < to_ns, IoDelta.phase == 0)
        .group_by(IoDelta.job_id, text("2"), IoDelta.layer)
    )
    sums: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    waits: dict[tuple[int, int], dict[str, int]] = {}
    io_waits: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    io_ranks: dict[tuple[int, int], set[int]] = defaultdict(set)
    mixes: dict[tuple[int, int], dict[str, int]] = {}
    for job, s, n, ranks, *sums_of in session.execute(ops):
        by_kind, by_cat = sums_of[: len(WAITING)], sums_of[len(WAITING) :]
        sums[(job, int(s))][0:2] = [sum(int(t) for t in by_kind), int(n)]
        sums[(job, int(s))][4] = int(ranks)
        waits[(job, int(s))] = {k: int(t) for k, t in zip(WAITING, by_kind, strict=True) if t}
        mixes[(job, int(s))] = {c: int(b) for c, b in zip(MOVING, by_cat, strict=True) if b}
    for job, s, layer, read_ns, write_ns, n, ranks in session.execute(io):
        key = (job, int(s))
        sums[key][2] += int(read_ns or 0) + int(write_ns or 0)
        sums[key][3] += int(n or 0)
        for direction, ns in (("read", read_ns), ("write", write_ns)):
            if ns:
                name = io_class(layer, direction)
                io_waits[key][name] = io_waits[key].get(name, 0) + int(ns)
        io_ranks[key].update(ranks)
    for key, ranks in io_ranks.items():
        sums[key][4] = max(sums[key][4], len(ranks))
    out: dict[int, list[JobStep]] = defaultdict(list)
    for (job, s), (mt, mb, it, ib, ranks) in sorted(sums.items()):
        out[job].append(JobStep(s * SECOND, (s + 1) * SECOND, mt, mb, it, ib, ranks,
                                waits.get((job, s), {}), mixes.get((job, s), {}),
                                io_waits.get((job, s), {})))  # fmt: skip
    return dict(out)


def ended_jobs(session: Session, job_ids: list[int]) -> dict[int, int]:
    """Of these jobs, those that ended (no run still running): job id -> the end of the
    last interval seen from it."""
    if not job_ids:
        return {}
    query = select(Job.id, Job.last_seen_ns).where(Job.id.in_(job_ids), Job.status != "running")
    return {job: int(last) for job, last in session.execute(query)}


def named_ranks(session: Session, job: int, from_ns: int, to_ns: int) -> list[dict[str, Any]]:
    """The late and waiting ranks of a job over [from_ns, to_ns), late first, by the job
    profile's own rule and words (server/jobs/profile.py; the job page and its report
    say the same of that window): each as rank, role, op and text."""
    span = max(to_ns - from_ns, 1)
    scope = Scope(job, window=Window(from_ns, from_ns + span))
    rows = series.profile_rows(session, scope, series.Steps(from_ns, from_ns + span, span))
    found = rows.slow_ranks(callsite_service.site_finder(session, scope))
    return [{k: o[k] for k in ("rank", "role", "op", "text")} for o in found["outliers"]]


def top_ranks(session: Session, job: int, kind: str, from_ns: int, to_ns: int,
              limit: int = 16) -> list[int]:  # fmt: skip
    """The ranks of a job with the most time blocked in MPI calls that wait (WAITING:
    mpi_slowdown) or in file I/O (io_stall) over [from_ns, to_ns), most first."""
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
            OpDelta.op_id.in_(ops_waiting(WAITING)),
        ).group_by(OpDelta.world_rank)  # fmt: skip
    rows = session.execute(query.order_by(t.desc(), text("1")).limit(limit)).all()
    return [r for r, v in rows if v]


def _site_of_kind(kind: str) -> Any:
    """Whether a call site (summarize's) is one of a job signal's kind of waiting: an MPI
    slowdown's, an MPI call that waits for a WAITING kind; an I/O stall's, a POSIX or
    stdio call or an MPI-IO call (one that waits for io)."""
    waits = dict(zip(op_names(), op_waits(), strict=True))
    if kind == "io_stall":
        return lambda s: s["layer"] != "mpi" or waits.get(s["op"]) == "io"
    return lambda s: s["layer"] == "mpi" and waits.get(s["op"]) in WAITING


def risen_sites(session: Session, job: int, kind: str, from_ns: int, to_ns: int,
                baseline_ns: int) -> list[dict[str, Any]]:  # fmt: skip
    """The call sites of a job signal's kind of waiting (_site_of_kind) whose time rose
    over [from_ns, to_ns) from the `baseline_ns` before it (from the job's first interval
    on, if later): server.callsites.summary.risen, resolved as the job's call-site card
    resolves them."""
    first = session.scalar(select(func.min(Rank.first_seen_ns)).where(Rank.job_id == job))
    since = max(from_ns - baseline_ns, int(first) if first is not None else from_ns)
    since = min(since, from_ns)
    ours = _site_of_kind(kind)
    windows = []
    for a, b in ((from_ns, to_ns), (since, from_ns)):
        sites = [] if b <= a else callsite_service.job_callsites(
            session, Scope(job, window=Window(a, b)))["sites"]  # fmt: skip
        windows.append([s for s in sites if ours(s)])
    return callsite_summary.risen(windows[0], windows[1], (to_ns - from_ns) / SECOND,
                                  (from_ns - since) / SECOND)  # fmt: skip


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


class FabricView:
    """The current fabric's links (server.fabric's rows) and its groups of parallel links
    (server/fabric/groups.py), read once per stored discovery (`version`)."""

    def __init__(self, session: Session):
        self.version = fabric.topology_version(session)
        self.links = fabric.links(session)
        self.groups = {g.id: g for g in fabric_groups.groups(fabric.nodes(session), self.links)}


# ---- stored incidents ----------------------------------------------------------------------


def save(
    session: Session,
    row: dict[str, Any],
    members: list[dict[str, Any]],
    before: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
) -> int:
    """Insert or update the incident with `row["key"]` and its jobs (`members`, by slot);
    its id. An id is drawn only for a new incident (one writer, the detector service: no
    race), so ids follow the order incidents were first stored, with no gap for an update.
    `before`: the row (less updated_ns) and jobs as this writer last saved them: only the
    columns and the jobs' rows that differ from them are written (without it, the row and
    every job's row are written again)."""
    incident_id = session.scalar(select(Incident.id).where(Incident.key == row["key"]))
    if incident_id is None:
        incident_id = session.execute(insert(Incident).values(**row).returning(Incident.id)
                                      ).scalar_one()  # fmt: skip
        before = None
    else:
        old_row = before[0] if before is not None else {}
        changed = {k: v for k, v in row.items() if k not in ("key", "detected_ns")
                   and (k == "updated_ns" or k not in old_row or old_row[k] != v)}  # fmt: skip
        session.execute(update(Incident).where(Incident.id == incident_id).values(**changed))
    if before is None:
        session.execute(delete(IncidentJob).where(IncidentJob.incident_id == incident_id))
        if members:
            session.execute(insert(IncidentJob),
                            [{**m, "incident_id": incident_id} for m in members])  # fmt: skip
        return incident_id
    old = {m["slot"]: m for m in before[1]}
    new = {m["slot"]: m for m in members}
    of_it = IncidentJob.incident_id == incident_id
    if set(old) - set(new):
        session.execute(delete(IncidentJob).where(of_it, IncidentJob.slot.in_(set(old) - set(new))))
    for slot, m in sorted(new.items()):
        if slot not in old:
            session.execute(insert(IncidentJob).values(**m, incident_id=incident_id))
        elif old[slot] != m:
            columns = {k: v for k, v in m.items() if old[slot].get(k) != v}
            session.execute(update(IncidentJob).where(of_it, IncidentJob.slot == slot)
                            .values(**columns))  # fmt: skip
    return incident_id


def remove(session: Session, key: str) -> None:
    """Delete the incident with this key (and its jobs)."""
    session.execute(delete(Incident).where(Incident.key == key))


def rekey(session: Session, key: str, new_key: str) -> None:
    """Give the incident with `key` another opening signal (`new_key`): it keeps its id
    (and its detection time), so its URL shows what it became."""
    session.execute(update(Incident).where(Incident.key == key).values(key=new_key))


def open_incidents(session: Session) -> list[dict[str, Any]]:
    """The incidents stored as open (e.g. by an earlier server), oldest first: id, key, the
    opening signal's kind and subject (from the key), start, detection time, the time of
    its newest evidence point, and its shape (severity, then each member's job, role and
    signals in slot order)."""
    opened = select(Incident).where(Incident.end_ns.is_(None))
    incidents = list(session.scalars(opened.order_by(Incident.start_ns, Incident.id)))
    members: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    if incidents:
        query = (
            select(IncidentJob.incident_id, IncidentJob.job_id, IncidentJob.role,
                   IncidentJob.signals)
            .where(IncidentJob.incident_id.in_([i.id for i in incidents]))
            .order_by(IncidentJob.incident_id, IncidentJob.slot)
        )  # fmt: skip
        for incident_id, job, role, signals in session.execute(query):
            members[incident_id].append((job, role, *signals))
    out = []
    for i in incidents:
        kind, subject, _ = i.key.split(":")
        out.append({"id": i.id, "key": i.key, "kind": kind, "subject": int(subject),
                    "start_ns": i.start_ns, "detected_ns": i.detected_ns,
                    "last_ns": _last_evidence(session, i),
                    "shape": (i.severity, tuple(members[i.id]))})  # fmt: skip
    return out


def close_stale(session: Session, keep: set[str]) -> list[dict[str, Any]]:
    """Close the open incidents not in `keep` (left open by an earlier server, their
    condition gone): each ends at its newest evidence point (its start if it has none).
    The closed incidents as `save`'s rows (with their ids)."""
    closed = []
    for incident in session.scalars(select(Incident).where(Incident.end_ns.is_(None))):
        if incident.key in keep:
            continue
        incident.end_ns = max(incident.start_ns, _last_evidence(session, incident))
        incident.updated_ns = incident.end_ns
        closed.append({c.key: getattr(incident, c.key) for c in Incident.__table__.columns})
    return closed


def _last_evidence(session: Session, incident: Incident) -> int:
    """The time of the newest point of an incident's evidence series (links' and jobs')."""
    times = [p["t_ns"] for lk in incident.links for p in lk.get("evidence") or []]
    query = select(IncidentJob.evidence).where(IncidentJob.incident_id == incident.id)
    for evidence in session.scalars(query):
        times += [p["t_ns"] for e in (evidence or {}).values() for p in e.get("series") or []]
    return max(times, default=incident.start_ns)


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
