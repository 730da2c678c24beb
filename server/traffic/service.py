"""The traffic domain's answers: a link's bytes by job and layer, a job's bytes per link.

Each answer reads the current fabric, its measured link bytes and the jobs' transfers over
the window (server/traffic/repository.py), attributes them (the pure
server/traffic/attribution.py) and shows every job the viewer may not read as "another
job": no id, no user, summed per layer.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from server.query_params import Window
from server.traffic import repository
from server.traffic.attribution import Attribution, Key, attribute, other
from server.traffic.repository import Fabric, TrafficConfig
from server.traffic.routing import Crossing

DIRECTIONS = ("a_to_b", "b_to_a")


def _attribution(
    session: Session,
    config: TrafficConfig,
    window: Window,
    job_ids: list[int] | None = None,
    run_id: int | None = None,
) -> tuple[Fabric, dict[Crossing, dict[str, Any]], Attribution, repository.JobTraffic]:
    fab = repository.load_fabric(session, config.paths)
    meas = repository.measured(session, fab, window)
    traffic = repository.job_traffic(session, window, config, job_ids, run_id)
    hcas = repository.hca_of(session, fab, traffic.hosts)
    known = {c: m["bytes"] for c, m in meas.items()}
    result = attribute(fab.router, traffic.transfers, hcas, known)
    for reason, nbytes in traffic.left_out.items():
        result.left_out[reason] += nbytes
    return fab, meas, result, traffic


def _figures(shares: dict[Key, float], visible: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of one link direction, other users' jobs folded into "another job"."""
    mine: list[dict[str, Any]] = []
    hidden: dict[tuple[str, str, str], float] = {}
    for (job, layer, provenance, path), nbytes in shares.items():
        if job in visible:
            mine.append({**visible[job], "layer": layer, "bytes": nbytes,
                         "provenance": provenance, "path": path})  # fmt: skip
        else:
            hidden[(layer, provenance, path)] = hidden.get((layer, provenance, path), 0) + nbytes
    mine.sort(key=lambda f: (f["job"], f["layer"], f["provenance"], f["path"]))
    mine += [
        {"job": None, "user": None, "layer": layer, "bytes": nbytes, "provenance": provenance,
         "path": path}
        for (layer, provenance, path), nbytes in sorted(hidden.items())
    ]  # fmt: skip
    return mine


def link_attribution(
    session: Session, config: TrafficConfig, link_id: int, window: Window
) -> dict[str, Any] | None:
    """Link `link_id`'s measured bytes per direction over the window, split by job and
    layer, with `other`; None if the current fabric has no such link."""
    fab, meas, result, _ = _attribution(session, config, window)
    link = fab.links.get(link_id)
    if link is None:
        return None
    crossings = [(link_id, d) for d in DIRECTIONS]
    jobs = {key[0] for c in crossings for key in result.shares.get(c, {})}
    visible = repository.visible_jobs(session, jobs)
    directions = []
    for crossing in crossings:
        m = meas.get(crossing, {"bytes": None, "samples": 0, "unknown_samples": 0})
        attributed = result.attributed(crossing)
        directions.append({
            "direction": crossing[1],
            "measured_bytes": m["bytes"],
            "samples": m["samples"],
            "unknown_samples": m["unknown_samples"],
            "attributed_bytes": attributed,
            "other_bytes": other(m["bytes"], attributed),
            "by_job": _figures(result.shares.get(crossing, {}), visible),
        })  # fmt: skip
    return {
        "link": {k: link[k] for k in ("id", "a", "b", "state", "down_ns", "capacity_bytes_per_s")},
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "paths": config.paths,
        "directions": directions,
        "left_out": dict(result.left_out),
    }


def job_links(
    session: Session,
    config: TrafficConfig,
    job: dict[str, Any],
    window: Window,
    run_id: int | None = None,
) -> dict[str, Any]:
    """The bytes per link direction and layer of one job (`job`: its id, key and user, a
    job the viewer may read), every link direction it crossed, by link id then direction;
    the `collectives` source and what stayed off the links."""
    fab, meas, result, traffic = _attribution(session, config, window, [job["id"]], run_id)
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
            "layers": figures,
        })  # fmt: skip
    return {
        "job": job["job"],
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "paths": config.paths,
        "collectives": traffic.collective_source.get(job["id"], "modelled"),
        "links": rows,
        "left_out": dict(result.left_out),
    }
