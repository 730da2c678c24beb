"""The traffic domain's answers: a link's bytes by job and category, a job's bytes per link.

Each answer reads the current fabric, its measured link bytes and the jobs' transfers over
the window (server/traffic/repository.py), attributes them (the pure
server/traffic/attribution.py) and shows every job the viewer may not read as "another
job": no id, no user, summed per category.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from server.fabric import repository as fabric
from server.jobs import repository as jobs
from server.query_params import Window
from server.shared import SharedAnswers
from server.traffic import repository
from server.traffic.attribution import (
    PROVENANCES,
    Attribution,
    Flows,
    Key,
    Rail,
    attribute,
    flows,
    grouped_with,
    other,
    split,
)
from server.traffic.repository import Fabric, TrafficConfig
from server.traffic.routing import Crossing
from stacklens import rails

DIRECTIONS = ("a_to_b", "b_to_a")
#: A node's fields as the API shows them (stacklens.api_models.FabricNode).
NODE_FIELDS = ("guid", "name", "type", "nports", "lid", "gone", "gone_ns", "last_seen_ns")

Computed = tuple[Fabric, dict[Crossing, dict[str, Any]], Attribution, repository.JobTraffic]
T = TypeVar("T")


class AttributionCache:
    """The whole fabric's attributions (every job, before masking) of the latest windows
    asked, reused while `repository.data_version` is unchanged and for at most
    `max_age_s` (a frame replayed late with an old interval end changes no version), so
    asking for the fabric's links one by one attributes the window once. The fabric read
    (links, forwarding tables, the routes found so far) is kept per stored discovery. And
    one job's answers (`per_job`: its links, its families and their links), shared by its
    viewers while nothing they read changed."""

    def __init__(self, max_age_s: float = 5.0, size: int = 8, job_answers: int = 64):
        self.max_age_s = max_age_s
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, float, Computed]] = OrderedDict()
        self._fabric: tuple[Any, str, Fabric] | None = None
        self._answers = SharedAnswers(job_answers, max_age_s)

    def per_job(self, session: Session, key: tuple[Any, ...], job_id: int,
                build: Callable[[], T]) -> T:  # fmt: skip
        """`build()`'s answer about job `job_id` for `key` (a route's name and everything
        else it depends on: the job's scope, the fabric's paths), computed once for every
        viewer while the job's stored data (`jobs.job_version`: every frame stored), the
        fabric and its samples (`fabric.topology_version`, `samples_version`) stay as they
        were, for at most `max_age_s` (as the attributions: what no version sees, such as
        retention dropping old samples); the `job_answers` latest kept. The caller checks
        that the viewer may read the job; the answer holds that job's figures only."""
        version = (fabric.topology_version(session), fabric.samples_version(session),
                   jobs.job_version(session, job_id))  # fmt: skip
        return self._answers.get((job_id, *key), version, build)

    def fabric(self, session: Session, paths: str) -> Fabric:
        """The current fabric, read again after each stored discovery (every time when no
        discovery is recorded)."""
        version = fabric.topology_version(session)
        with self._lock:
            kept = self._fabric
        if kept is not None and version is not None and kept[:2] == (version, paths):
            return kept[2]
        fab = repository.load_fabric(session, paths)
        with self._lock:
            self._fabric = (version, paths, fab)
        return fab

    def link(self, session: Session, config: TrafficConfig, link_id: int, window: Window
             ) -> Attribution:  # fmt: skip
        """Link `link_id`'s attribution over `window`, both directions: the figures the
        whole fabric's attribution gives them (every job), computed from the flows that
        cross the link and the measured bytes of the links they are split over."""
        fab = self.fabric(session, config.paths)
        traffic = repository.job_traffic(session, window, config)
        hcas = repository.rails_of(session, fab, traffic.hosts)
        only = {(link_id, d) for d in DIRECTIONS}
        result = Attribution()
        pairs = flows(traffic.transfers, hcas, result)
        grouped = {c[0] for c in grouped_with(fab.router, pairs, only)}  # its links' groups
        meas = repository.measured(session, fab, window, grouped) if grouped - {link_id} else {}
        split(fab.router, pairs, {c: m["bytes"] for c, m in meas.items()}, result, only)
        for reason, nbytes in traffic.left_out.items():
            result.left_out[reason] += nbytes
        return result

    def __len__(self) -> int:
        """Windows held."""
        return len(self._entries)

    def get(self, session: Session, config: TrafficConfig, window: Window) -> Computed:
        """The attribution of every job over `window`, computed or reused."""
        key = (config.paths, repr(config.storage), config.placement, window.astuple())
        version = repository.data_version(session)
        with self._lock:
            found = self._entries.get(key)
        if (
            found is not None
            and found[0] == version
            and time.monotonic() - found[1] < self.max_age_s
        ):
            return found[2]
        computed = _attribution(session, config, window, fab=self.fabric(session, config.paths))
        with self._lock:
            self._entries[key] = (version, time.monotonic(), computed)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return computed


def _attribution(
    session: Session,
    config: TrafficConfig,
    window: Window,
    job_ids: list[int] | None = None,
    run_id: int | None = None,
    fab: Fabric | None = None,
    placed: dict[frozenset[str], dict[str, list[Rail]]] | None = None,
) -> Computed:
    """Attribute the window: read what it needs (the fabric unless given; hosts placed
    once per host set in `placed` if given) and run the pure core."""
    fab = fab or repository.load_fabric(session, config.paths)
    meas = repository.measured(session, fab, window)
    traffic = repository.job_traffic(session, window, config, job_ids, run_id)
    hosts = frozenset(traffic.hosts)
    if placed is None or hosts not in placed:
        hcas = repository.rails_of(session, fab, traffic.hosts)
        if placed is not None:
            placed[hosts] = hcas
    else:
        hcas = placed[hosts]
    known = {c: m["bytes"] for c, m in meas.items()}
    result = attribute(fab.router, traffic.transfers, hcas, known)
    for reason, nbytes in traffic.left_out.items():
        result.left_out[reason] += nbytes
    return fab, meas, result, traffic


def _figures(shares: dict[Key, float], visible: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of one link direction, other users' jobs folded into "another job"."""
    mine: list[dict[str, Any]] = []
    hidden: dict[tuple[str, str, str], float] = {}
    for (job, category, provenance, path), nbytes in shares.items():
        if job in visible:
            mine.append({**visible[job], "category": category, "bytes": nbytes,
                         "provenance": provenance, "path": path})  # fmt: skip
        else:
            hidden[(category, provenance, path)] = (
                hidden.get((category, provenance, path), 0) + nbytes
            )
    mine.sort(key=lambda f: (f["job"], f["category"], f["provenance"], f["path"]))
    mine += [
        {"job": None, "user": None, "category": category, "bytes": nbytes, "provenance": provenance,
         "path": path}
        for (category, provenance, path), nbytes in sorted(hidden.items())
    ]  # fmt: skip
    return mine


def _directions(
    link_id: int,
    meas: dict[Crossing, dict[str, Any]],
    result: Attribution,
    visible: dict[int, dict[str, Any]],
) -> list[dict[str, Any]]:
    """Both directions of a link: measured, attributed, other, the masked figures."""
    out = []
    for crossing in [(link_id, d) for d in DIRECTIONS]:
        m = meas.get(crossing, {"bytes": None, "samples": 0, "unknown_samples": 0})
        attributed = result.attributed(crossing)
        out.append({
            "direction": crossing[1],
            "measured_bytes": m["bytes"],
            "samples": m["samples"],
            "unknown_samples": m["unknown_samples"],
            "attributed_bytes": attributed,
            "other_bytes": other(m["bytes"], attributed),
            "by_job": _figures(result.shares.get(crossing, {}), visible),
        })  # fmt: skip
    return out


def _jobs_on(link_id: int, result: Attribution) -> set[int]:
    return {key[0] for d in DIRECTIONS for key in result.shares.get((link_id, d), {})}


def _link_row(link: dict[str, Any]) -> dict[str, Any]:
    return {k: link[k] for k in ("id", "a", "b", "state", "down_ns", "capacity_bytes_per_s")}


#: Most steps of a link's attribution series (each step attributes the whole fabric).
MAX_SERIES_STEPS = 120


def link_series(
    session: Session, config: TrafficConfig, link_id: int, window: Window, step_ns: int
) -> dict[str, Any] | None:
    """Link `link_id`'s attribution per step of `step_ns` over the closed window (steps
    [t, t + step), the last one cut at the window's end); None if there is no such link.
    The fabric is read once and hosts are placed once per set of hosts."""
    assert window.from_ns is not None and window.to_ns is not None
    fab = repository.load_fabric(session, config.paths)
    link = fab.links.get(link_id)
    if link is None:
        return None
    placed: dict[frozenset[str], dict[str, list[Rail]]] = {}
    steps = []
    for t in range(window.from_ns, window.to_ns, step_ns):
        part = Window(t, min(t + step_ns, window.to_ns))
        _, meas, result, _ = _attribution(session, config, part, fab=fab, placed=placed)
        steps.append((t, meas, result))
    jobs = set().union(*(_jobs_on(link_id, r) for _, _, r in steps))
    visible = repository.visible_jobs(session, jobs)
    return {
        "link": _link_row(link),
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "step_ns": step_ns,
        "paths": config.paths,
        "points": [
            {"t_ns": t, "directions": _directions(link_id, meas, result, visible)}
            for t, meas, result in steps
        ],
    }


def newest_sample(session: Session) -> int:
    """The newest sweep's time (0: none yet)."""
    newest, _ = fabric.samples_version(session)
    return int(newest or 0)


def link_attribution(
    session: Session, config: TrafficConfig, link_id: int, window: Window, cache: AttributionCache
) -> dict[str, Any] | None:
    """Link `link_id`'s measured bytes per direction over the window, split by job and
    category, with `other` (the whole fabric's attribution from `cache`); None if the current
    fabric has no such link."""
    fab, meas, result, _ = cache.get(session, config, window)
    link = fab.links.get(link_id)
    if link is None:
        return None
    visible = repository.visible_jobs(session, _jobs_on(link_id, result))
    return {
        "link": _link_row(link),
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "paths": config.paths,
        "directions": _directions(link_id, meas, result, visible),
        "left_out": dict(result.left_out),
    }


def node_jobs(
    session: Session, config: TrafficConfig, guid: str, window: Window, cache: AttributionCache
) -> dict[str, Any] | None:
    """The jobs on node `guid` over the window (the whole fabric's attribution from
    `cache`): per job, its bytes over the node's links leaving it and into it, and (an
    HCA) its hosts placed on the node (a job whose ranks there moved bytes in the window
    is listed even when none crossed a link); jobs the viewer may not read summed as
    "another job"; busiest first. None if the current fabric has no such node."""
    fab, _, result, traffic = cache.get(session, config, window)
    number = int(guid, 16)
    node = next((n for n in fab.nodes if int(n["guid"], 16) == number), None)
    if node is None:
        return None
    leaving = {}  # link id -> its direction away from the node
    for lk in fab.all_links:
        if int(lk["a"]["guid"], 16) == number:
            leaving[lk["id"]] = "a_to_b"
        elif int(lk["b"]["guid"], 16) == number:
            leaving[lk["id"]] = "b_to_a"
    per: dict[int, dict[str, Any]] = {}

    def row(job: int) -> dict[str, Any]:
        return per.setdefault(job, {"hosts": set(), "bytes_out": 0.0, "bytes_in": 0.0})

    for link_id, away in leaving.items():
        for direction in DIRECTIONS:
            for (job, _, _, _), nbytes in result.shares.get((link_id, direction), {}).items():
                row(job)["bytes_out" if direction == away else "bytes_in"] += nbytes
    if node["type"] != "switch":
        placed = repository.rails_of(session, fab, traffic.hosts)
        here = {host for host, on in placed.items() if any(r.guid == number for r in on)}
        for t in traffic.transfers:
            for host in {t.src, t.dst} & here:
                row(t.job)["hosts"].add(host)
    visible = repository.visible_jobs(session, set(per))
    jobs = [{**visible[j], "hosts": sorted(r["hosts"]), "bytes_out": r["bytes_out"],
             "bytes_in": r["bytes_in"]} for j, r in per.items() if j in visible]  # fmt: skip
    hidden = [r for j, r in per.items() if j not in visible]
    jobs.sort(key=lambda r: (-(r["bytes_out"] + r["bytes_in"]), r["job"]))
    if hidden:
        jobs.append({"job": None, "user": None, "hosts": [],
                     "bytes_out": sum(r["bytes_out"] for r in hidden),
                     "bytes_in": sum(r["bytes_in"] for r in hidden)})  # fmt: skip
    return {
        "node": {k: node[k] for k in NODE_FIELDS},
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "paths": config.paths,
        "jobs": jobs,
    }


def job_links(
    session: Session,
    config: TrafficConfig,
    job: dict[str, Any],
    window: Window,
    run_id: int | None = None,
    cache: AttributionCache | None = None,
) -> dict[str, Any]:
    """The bytes per link direction and category of one job (`job`: its id, key and user, a
    job the viewer may read), every link direction it crossed, by link id then direction;
    the `collectives` source and what stayed off the links. The fabric is `cache`'s (read
    once per stored discovery), else read now."""
    fab = None if cache is None else cache.fabric(session, config.paths)
    placed: dict[frozenset[str], dict[str, list[Rail]]] = {}
    fab, meas, result, traffic = _attribution(session, config, window, [job["id"]], run_id,
                                              fab=fab, placed=placed)  # fmt: skip
    on = placed[frozenset(traffic.hosts)]
    pairs = flows(traffic.transfers, on, Attribution())
    from_rail = _from_rail(fab, pairs, {c: m["bytes"] for c, m in meas.items()}, on)
    visible = {job["id"]: {"job": job["job"], "user": job["user"]}}
    rows = []
    for crossing in sorted(result.shares):
        link = fab.links[crossing[0]]
        figures = _figures(result.shares[crossing], visible)
        rows.append({
            "id": crossing[0],
            "a": link["a"],
            "b": link["b"],
            "direction": crossing[1],
            "bytes": sum(f["bytes"] for f in figures),
            "measured_bytes": meas.get(crossing, {}).get("bytes"),
            "categories": figures,
            "rails": from_rail.get(crossing, []),
        })  # fmt: skip
    return {
        "job": job["job"],
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "paths": config.paths,
        "collectives": traffic.collective_source.get(job["id"], "modelled"),
        "links": rows,
        "rails": job_rails(traffic, on, pairs),
        "left_out": dict(result.left_out),
    }


def _from_rail(fab: Fabric, pairs: Flows, measured: dict[Crossing, int | None],
               placed: dict[str, list[Rail]]) -> dict[Crossing, list[dict[str, Any]]]:  # fmt: skip
    """Per link direction, the flows' bytes by the rail they left from and provenance
    (the flows of each rail routed and split as the whole attribution splits them)."""
    where = {r.guid: (host, i, r.device) for host, rs in placed.items() for i, r in enumerate(rs)}
    out: dict[Crossing, list[dict[str, Any]]] = {}
    by_rail: dict[int, Flows] = {}  # the flows of each rail, gathered in one pass
    for key, flow in pairs.items():
        by_rail.setdefault(key[3], {})[key] = flow
    for guid in sorted(by_rail):
        part = Attribution()
        split(fab.router, by_rail[guid], measured, part)
        host, index, device = where[guid]
        for crossing, shares in part.shares.items():
            by: dict[str, float] = {}
            for (_, _, provenance, _), nbytes in shares.items():
                by[provenance] = by.get(provenance, 0.0) + nbytes
            out.setdefault(crossing, []).extend(
                {"host": host, "rail": index, "device": device, "provenance": p, "bytes": n}
                for p, n in sorted(by.items())
            )
    return out


def job_rails(traffic: repository.JobTraffic, placed: dict[str, list[Rail]], pairs: Flows
              ) -> list[dict[str, Any]]:  # fmt: skip
    """Every rail of the job's hosts (stacklens.api_models.JobRail): the ranks bound to it
    (stacklens/rails.py) and the flows' bytes that left and arrived on it, by provenance."""
    sent: dict[int, dict[str, int]] = {}
    got: dict[int, dict[str, int]] = {}
    for (_, _, provenance, src, dst), nbytes in pairs.items():
        sent.setdefault(src, {})[provenance] = sent.get(src, {}).get(provenance, 0) + nbytes
        got.setdefault(dst, {})[provenance] = got.get(dst, {}).get(provenance, 0) + nbytes
    bound: dict[tuple[str, int], set[int]] = {}
    pinned: dict[tuple[str, int], set[int]] = {}
    for (_, rank), (host, binding) in traffic.ranks.items():
        devices = [r.device for r in placed.get(host, [])]
        for i in rails.lanes(devices, binding):
            bound.setdefault((host, i), set()).add(rank)
            if any(d in devices for d in binding.devices):
                pinned.setdefault((host, i), set()).add(rank)
    hosts = sorted({host for host, _ in traffic.ranks.values()} & set(placed))
    out = []
    for host in hosts:
        for i, rail in enumerate(placed[host]):
            out_by, in_by = sent.get(rail.guid, {}), got.get(rail.guid, {})
            out.append({
                "host": host, "rail": i, "device": rail.device, "guid": f"{rail.guid:#018x}",
                "ranks": sorted(bound.get((host, i), ())),
                "pinned": sorted(pinned.get((host, i), ())),
                "sent_bytes": sum(out_by.values()), "received_bytes": sum(in_by.values()),
                "provenance": [
                    {"provenance": p, "sent_bytes": out_by.get(p, 0),
                     "received_bytes": in_by.get(p, 0)}
                    for p in PROVENANCES if p in out_by or p in in_by
                ],
            })  # fmt: skip
    return out
