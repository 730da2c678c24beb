"""What the Fabric page needs, computed once per discovery and once per sweep, shared by
every viewer.

`FabricSnapshots` (one per app) keeps:
- the topology answer (nodes and links) as encoded bytes with its ETag, rebuilt only when a
  discovery was stored (`repository.topology_version`);
- the fabric state of the newest sweep (`stacklens.api_models.FabricState`: every link's
  utilisation, busier-direction rate, errors and flags in columns, and the summary line's
  counts), as encoded bytes with its ETag, rebuilt only when a sweep was stored or a
  sample retired (`repository.samples_version`), computed with numpy over every port's
  newest sample at once;
- the link ranking of that sweep (by utilisation and by errors), so `/api/fabric/links`
  with a `limit` builds full answers for those links only.
A request costs two small version queries (at most every `recheck_s` for all requests
together: the answers may lag a stored sweep by that much) and, between sweeps, no
computation at all.
The numbers are the ones `repository.link_load` gives for one link (tested equal).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from server.fabric import repository
from stacklens.api_models import FabricLink, FabricNode, Topology
from stacklens.constants import ERROR_COUNTERS, PORT_COUNTERS, SATURATED_SHIFT

#: Bits of FabricState.links.flags.
FLAG_DOWN = 1
FLAG_SATURATED = 2  # an error counter is stuck at its maximum at either end
FLAG_ERRORS_UNKNOWN = 4  # an error counter's delta is unknown at either end
_COL = {c: i for i, c in enumerate(repository.LATEST_COLUMNS)}
_FIRST_ERROR = _COL["d_" + ERROR_COUNTERS[0]]
#: Bit of each error counter's saturated flag in a sample's flags.
_ERROR_SHIFTS = np.array([SATURATED_SHIFT + PORT_COUNTERS.index(c) for c in ERROR_COUNTERS])


@dataclass(frozen=True)
class Encoded:
    """An answer encoded once: its JSON bytes and their ETag."""

    body: bytes
    etag: str

    @classmethod
    def of(cls, value: Any) -> Encoded:
        """`value` (JSON-able) encoded compactly, with a strong ETag of the bytes."""
        body = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
        return cls(body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"')


@dataclass
class _Shared:
    topology_key: object = None
    topology: Encoded | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    state_key: object = None
    state: Encoded | None = None
    ranking: dict[str, list[int]] = field(default_factory=dict)


class FabricSnapshots:
    """The shared, per-discovery and per-sweep answers of the fabric API (thread-safe: the
    first request after a sweep computes, concurrent ones wait for its result)."""

    def __init__(self, recheck_s: float = 0.25) -> None:
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._shared = _Shared()
        self._checked = -float("inf")  # time.monotonic() of the last version check

    def _refresh(self, session: Session) -> _Shared:
        """The shared answers, recomputed if a discovery or sweep was stored since (looked
        at most every `recheck_s`)."""
        now = time.monotonic()
        shared = self._shared
        if now - self._checked < self.recheck_s and shared.state is not None:
            return shared
        topo_key = repository.topology_version(session)
        state_key = (topo_key, repository.samples_version(session))
        with self._lock:
            shared = self._shared
            if topo_key is None or topo_key != shared.topology_key or shared.topology is None:
                nodes, links = repository.nodes(session), repository.links(session)
                public = [{k: v for k, v in lk.items() if k not in ("a_port_id", "b_port_id")}
                          for lk in links]  # fmt: skip
                topology = Topology(
                    nodes=[FabricNode(**n) for n in nodes],
                    links=[FabricLink(**lk) for lk in public],
                )
                shared = _Shared(topo_key, Encoded.of(topology.model_dump(mode="json")),
                                 links, nodes)  # fmt: skip
            if topo_key is None or state_key != shared.state_key or shared.state is None:
                state, ranking = fabric_state(
                    shared.links, shared.nodes, repository.latest_rows(session),
                    shared.topology.etag if shared.topology else "",
                )  # fmt: skip
                shared.state_key, shared.state, shared.ranking = state_key, state, ranking
            self._shared = shared
            self._checked = now
            return shared

    def recent(self, what: str) -> Encoded | None:
        """The shared `what` ("topology" or "state") if checked less than `recheck_s` ago
        (no database needed), else None."""
        shared = self._shared
        if time.monotonic() - self._checked < self.recheck_s and shared.state is not None:
            recent: Encoded | None = getattr(shared, what)
            return recent
        return None

    def checked(self, engine: Engine, what: str) -> Encoded:
        """The shared `what` ("topology" or "state") after a version check on `engine`."""
        with Session(engine) as session:
            return self.topology(session) if what == "topology" else self.state(session)

    def topology(self, session: Session) -> Encoded:
        """The topology answer of the newest discovery."""
        shared = self._refresh(session)
        assert shared.topology is not None
        return shared.topology

    def state(self, session: Session) -> Encoded:
        """The fabric state of the newest sweep."""
        shared = self._refresh(session)
        assert shared.state is not None
        return shared.state

    def link_loads(self, session: Session, sort: str, limit: int | None) -> list[dict[str, Any]]:
        """`repository.link_loads(session, sort, limit)`, built only for the links shown."""
        shared = self._refresh(session)
        ids = shared.ranking[sort]
        return repository.loads_of(session, shared.links, ids[:limit] if limit else ids)


def fabric_state(
    links: list[dict[str, Any]], nodes: list[dict[str, Any]], rows: list[tuple[Any, ...]], etag: str
) -> tuple[Encoded, dict[str, list[int]]]:
    """The FabricState of these links (`repository.links`) from every port's newest sample
    (`repository.latest_rows`), and the link ids in the API's two orders."""
    n = len(links)
    by_port = {r[_COL["port_id"]]: r for r in rows}

    def end(key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per link, of its `key` end: rate (nan unknown), sample present, error deltas (nan
        unknown), which error counters are saturated, sample time."""
        rate = np.full(n, np.nan)
        present = np.zeros(n, dtype=bool)
        errors = np.full((n, len(ERROR_COUNTERS)), np.nan)
        saturated = np.zeros((n, len(ERROR_COUNTERS)), dtype=bool)
        ts = np.zeros(n, dtype=np.int64)
        for i, lk in enumerate(links):
            row = by_port.get(lk[key]) if lk["state"] == "up" else None
            if row is None:
                continue
            present[i] = True
            ts[i] = row[_COL["ts_ns"]]
            dt, sent = row[_COL["dt_ns"]], row[_COL["d_xmit_bytes"]]
            if dt and sent is not None:
                rate[i] = sent * 1e9 / dt
            errors[i] = [np.nan if v is None else v for v in row[_FIRST_ERROR:]]
            saturated[i] = (row[_COL["flags"]] >> _ERROR_SHIFTS) & 1
        return rate, present, errors, saturated, ts

    ra, pa, ea, sa, ta = end("a_port_id")
    rb, pb, eb, sb, tb = end("b_port_id")
    cap = np.array([lk["capacity_bytes_per_s"] or 0 for lk in links], dtype=float)
    busier = np.fmax(ra, rb)  # nan only where both are unknown
    with np.errstate(invalid="ignore", divide="ignore"):
        util = np.where(cap > 0, busier / np.where(cap > 0, cap, 1), np.nan)
    saturated = sa | sb
    # Summed over both ends; unknown if either end's is, or while saturated at either end.
    errors = np.where((pa & pb)[:, None] & ~saturated, ea + eb, np.nan)
    total = np.nansum(np.where(errors > 0, errors, 0), axis=1).astype(np.int64)
    down = np.array([lk["state"] == "down" for lk in links], dtype=bool)
    flags = (down * FLAG_DOWN) | (saturated.any(axis=1) * FLAG_SATURATED)
    flags |= np.isnan(errors).any(axis=1) * FLAG_ERRORS_UNKNOWN
    ids = np.array([lk["id"] for lk in links], dtype=np.int64)
    known = ~np.isnan(util)
    u_key = np.where(known, -util, 0.0)
    by_util = np.lexsort((ids, -total, u_key, ~known))
    by_errors = np.lexsort((ids, u_key, ~known, -total))
    times = np.maximum(ta, tb)

    def col(values: np.ndarray) -> list[float | None]:
        return [None if np.isnan(v) else float(v) for v in values]

    switches = sum(nd["type"] == "switch" for nd in nodes)
    summary = {
        "nodes": len(nodes),
        "switches": switches,
        "hcas": sum(nd["type"] == "hca" for nd in nodes),
        "gone": sum(bool(nd["gone"]) for nd in nodes),
        "links": n,
        "down": int(down.sum()),
        "erroring": int((total > 0).sum()),
        "busiest": float(np.nanmax(util)) if known.any() else None,
    }
    state = {
        "topology_etag": etag,
        "ts_ns": int(times.max()) if n and times.max() else None,
        "links": {
            "id": ids.tolist(),
            "utilisation": col(util),
            "bytes_per_s": col(busier),
            "errors": total.tolist(),
            "flags": flags.astype(int).tolist(),
        },
        "summary": summary,
    }
    ranking = {"utilisation": ids[by_util].tolist(), "errors": ids[by_errors].tolist()}
    return Encoded.of(state), ranking
