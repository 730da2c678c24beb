"""Groups of parallel links and their skew (issue #27 point 3): which links of the stored
topology are meant to share load, and how evenly they do.

A group is derived from the current fabric's up links (`repository.links` rows) and nodes:
- `parallel`: the links between the same two switches (two or more);
- `uplinks`: the links from one leaf (a switch with an HCA cabled to it) to other
  switches (two or more): the spine-ward links adaptive or hashed routing spreads over;
- `rails`: the HCA links of one multi-rail host: its HCA ports cabled to the fabric, when
  it has two or more (the HCAs whose node description's first word is the host name, as
  server/jobs/placement.py places hosts; real HCAs describe themselves "<host> <device>").
A link may be in several groups (a leaf's two links to one spine are a `parallel` group
and part of its `uplinks`). A group's id is stable across discoveries and restarts: CRC-32
of its kind and the GUIDs (or host name) that define it, so an incident can name it.

Load and skew. A member's load in a step is its busier direction's rate over its capacity
(utilisation: the links list's rule, `repository.link_columns`); its bytes each way are
the sending ends' PortXmitData deltas, exact. A group's skew in a step is max/mean and the
coefficient of variation (population standard deviation over the mean) of its members'
loads, over the members with a known load; undefined (None) while fewer than two are
known or their mean is 0. The window's skew is that of the members' loads over the whole
window; its peak the highest step's.

Everything here is pure (`groups`, `skew`, `summarise`); `read_loads` is the one query.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from server.fabric import history, repository
from server.jobs.series import Steps

#: Group kinds, in the order a listing shows them at equal skew.
KINDS = ("parallel", "uplinks", "rails")


@dataclass(frozen=True)
class Group:
    """A group of parallel links: a stable id, its kind, a name a person reads and the
    member link ids (ascending)."""

    id: int
    kind: str
    name: str
    members: tuple[int, ...]


def group_id(kind: str, key: str) -> int:
    """The stable id of a group: CRC-32 of `kind:key`, as a positive 31-bit integer."""
    return zlib.crc32(f"{kind}:{key}".encode()) & 0x7FFF_FFFF


def host_of(name: str) -> str:
    """The host an HCA belongs to: its node description's first word."""
    return name.split(" ", 1)[0]


def groups(nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> list[Group]:
    """The groups of parallel links of a fabric (`repository.nodes` and `repository.links`
    rows; only up links are members), by kind then name."""
    types = {n["guid"]: n["type"] for n in nodes}
    names = {n["guid"]: n["name"] or n["guid"] for n in nodes}
    up = [lk for lk in links if lk["state"] == "up"]
    between: dict[tuple[str, str], list[int]] = {}
    uplinks: dict[str, list[int]] = {}
    leaves: set[str] = set()
    rails: dict[str, list[int]] = {}
    for lk in up:
        a, b = lk["a"]["guid"], lk["b"]["guid"]
        ta, tb = types.get(a), types.get(b)
        if ta == "switch" and tb == "switch":
            between.setdefault((min(a, b), max(a, b)), []).append(lk["id"])
            uplinks.setdefault(a, []).append(lk["id"])
            uplinks.setdefault(b, []).append(lk["id"])
        elif "switch" in (ta, tb) and "hca" in (ta, tb):
            hca = a if ta == "hca" else b
            leaves.add(b if ta == "hca" else a)
            rails.setdefault(host_of(names[hca]), []).append(lk["id"])
    out = []
    for (a, b), ids in between.items():
        if len(ids) >= 2:
            name = " – ".join(sorted((names[a], names[b])))
            out.append(Group(group_id("parallel", f"{a}-{b}"), "parallel", name,
                             tuple(sorted(ids))))  # fmt: skip
    for leaf, ids in uplinks.items():
        if leaf in leaves and len(ids) >= 2:
            out.append(Group(group_id("uplinks", leaf), "uplinks", f"uplinks of {names[leaf]}",
                             tuple(sorted(ids))))  # fmt: skip
    for host, ids in rails.items():
        if len(ids) >= 2:
            out.append(Group(group_id("rails", host), "rails", f"rails of {host}",
                             tuple(sorted(ids))))  # fmt: skip
    return sorted(out, key=lambda g: (KINDS.index(g.kind), g.name, g.id))


def skew(loads: Sequence[float | None]) -> tuple[float | None, float | None]:
    """(max/mean, coefficient of variation) of the known loads; (None, None) with fewer
    than two known or a mean of 0."""
    known = [x for x in loads if x is not None and not math.isnan(x)]
    if len(known) < 2:
        return None, None
    mean = sum(known) / len(known)
    if mean <= 0:
        return None, None
    sd = math.sqrt(sum((x - mean) ** 2 for x in known) / len(known))
    return max(known) / mean, sd / mean


@dataclass
class Loads:
    """Per link id, its load over a window (`window`: link_columns' values) and per step
    (`steps`: step start -> utilisation, None unknown)."""

    window: dict[int, dict[str, Any]]
    steps: dict[int, dict[int, float | None]]
    t_ns: list[int]


def read_loads(session: Session, links: list[dict[str, Any]], steps: Steps) -> Loads:
    """The load of these links (`repository.links` rows) over the steps' window and per
    step, from the stored samples of their ends (`history.step_sums`: raw samples or the
    exact rollups)."""
    ports = sorted({lk[k] for lk in links for k in ("a_port_id", "b_port_id")
                    if lk[k] is not None})  # fmt: skip
    sums = history.step_sums(session, ports, steps, repository.LINK_COUNTERS)
    times = sorted(set(sums.key.tolist()))
    whole = repository.window_columns(session, links, steps.from_ns, steps.to_ns)
    window = {lk["id"]: {k: v[i] for k, v in whole.items()} for i, lk in enumerate(links)}
    # every link x step at once (row i * len(times) + j: link i, step j): one lookup per end
    m = len(times)
    a, b = (sums.lookup([-1 if lk[k] is None else lk[k] for lk in links for _ in times],
                        times * len(links)) for k in ("a_port_id", "b_port_id"))  # fmt: skip
    capacity = np.repeat(np.array([float(lk["capacity_bytes_per_s"] or 0) for lk in links]), m)
    cols = repository.link_columns(a, b, capacity)
    util, samples = cols["utilisation"], cols["samples"]
    per_step: dict[int, dict[int, float | None]] = {}
    for i, lk in enumerate(links):
        rows = range(i * m, (i + 1) * m)
        per_step[lk["id"]] = {t: util[r] for t, r in zip(times, rows, strict=True) if samples[r]}
    return Loads(window, per_step, times)


def member_name(lk: dict[str, Any]) -> str:
    """A link as `a[port] – b[port]`."""
    return f"{lk['a']['name']}[{lk['a']['port']}] – {lk['b']['name']}[{lk['b']['port']}]"


def summarise(group: Group, by_id: dict[int, dict[str, Any]], loads: Loads) -> dict[str, Any]:
    """A group's answer: its members with their load over the window (bytes each way,
    utilisation), the window's skew, the skew per step (max/mean, CV) and its peak, and
    the busiest member (highest utilisation over the window; ties: lowest link id)."""
    members = []
    for link_id in group.members:
        lk, w = by_id[link_id], loads.window.get(link_id, {})
        members.append({
            "link_id": link_id, "name": member_name(lk), "a": lk["a"], "b": lk["b"],
            "capacity_bytes_per_s": lk["capacity_bytes_per_s"],
            "a_to_b_bytes": w.get("a_to_b_bytes"), "b_to_a_bytes": w.get("b_to_a_bytes"),
            "a_to_b_bytes_per_s": w.get("a_to_b_bytes_per_s"),
            "b_to_a_bytes_per_s": w.get("b_to_a_bytes_per_s"),
            "utilisation": w.get("utilisation"),
        })  # fmt: skip
    max_mean, cv = skew([m["utilisation"] for m in members])
    series_t, series_mm, series_cv = [], [], []
    for t in loads.t_ns:
        s_mm, s_cv = skew([loads.steps.get(i, {}).get(t) for i in group.members])
        series_t.append(t)
        series_mm.append(s_mm)
        series_cv.append(s_cv)
    known = [m for m in members if m["utilisation"] is not None]
    busiest = (
        max(known, key=lambda m: (m["utilisation"], -m["link_id"]))["link_id"] if known else None
    )
    peaks = [(v, t) for v, t in zip(series_mm, series_t, strict=True) if v is not None]
    peak = max(peaks) if peaks else None
    return {
        "id": group.id, "kind": group.kind, "name": group.name, "members": members,
        "max_mean": max_mean, "cv": cv, "busiest_link_id": busiest,
        "peak_max_mean": peak[0] if peak else None, "peak_t_ns": peak[1] if peak else None,
        "series": {"t_ns": series_t, "max_mean": series_mm, "cv": series_cv},
    }  # fmt: skip


def sort_key(answer: dict[str, Any]) -> tuple[Any, ...]:
    """The listing's order: highest window skew (max/mean) first, unknown last, then kind,
    name and id."""
    mm = answer["max_mean"]
    return (mm is None, -(mm or 0.0), KINDS.index(answer["kind"]), answer["name"], answer["id"])


def jobs_on(attribution: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The jobs of a link's attribution (server/traffic/service.link_attribution's answer),
    both directions and every category summed per job (another user's jobs as one "another
    job"), most bytes first; those with no bytes left out."""
    if attribution is None:
        return []
    by_job: dict[tuple[str | None, str | None], float] = {}
    for direction in attribution["directions"]:
        for figure in direction["by_job"]:
            key = (figure["job"], figure["user"])
            by_job[key] = by_job.get(key, 0.0) + figure["bytes"]
    out = [{"job": job, "user": user, "label": f"job {job}" if job else "another job",
            "bytes": nbytes} for (job, user), nbytes in by_job.items() if nbytes > 0]  # fmt: skip
    return sorted(out, key=lambda j: (-j["bytes"], j["job"] is None, j["job"] or ""))
