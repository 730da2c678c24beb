"""What the Fabric page needs, computed once per discovery and once per sweep, shared by
every viewer.

`FabricSnapshots` (one per app) keeps:
- the topology answer (nodes and links) as encoded bytes with its ETag, rebuilt only when a
  discovery was stored (`repository.topology_version`);
- the fabric state of the newest sweep (`stacklens.api_models.FabricState`: every link's
  utilisation, busier-direction rate, errors, flags and PortXmitWait rate in columns, and
  the summary line's counts), as encoded bytes with its ETag, rebuilt only when a sweep
  was stored or a sample retired (`repository.samples_version`), computed with numpy over
  every port's newest sample at once;
- the link ranking of that sweep (by utilisation and by errors, with each link's sort
  key), so a page of `/api/fabric/links` builds full answers for its links only;
- the links' sums over the windows asked for lately (`repository.window_columns`), each
  kept while its samples stay as they are (`history.window_version`: a sample stored late
  into the window, or retired, sums it again), so the pages of both orders of a windowed
  /links and the state of a playback frame are summed once for every viewer; and their
  sums over those windows' whole minutes (`repository.window_minutes`, kept the same
  way), so a window with the same whole minutes (the next playback frame, a window
  moved by less than a minute) sums only its partial first and last minutes;
- the answers of the live routes that change only with the newest sweep (`per_sweep`:
  the pages of the live /api/fabric/links), each encoded once per sweep for every viewer;
- answers over a window (`per_window`: the groups of parallel links), each kept while the
  window's samples stay as they are (its `history.window_version`, and no sample stored
  between its start or end and a later request's: a live window ends at the request's
  time), so viewers polling the default window share one computation per sweep;
- the fabric's freshness (`Freshness`): the last sweep's end, the sweep interval the
  samples measured, and whether the data is stale (the last sweep ended more than
  STALE_SWEEPS intervals ago). A port whose newest sample is that much older than the last
  sweep stopped answering: its load is unknown (null), never its last one. The state's
  ETag changes when the data turns stale, not only with a sweep.
A request costs two small version queries (at most every `recheck_s` for all requests
together: the answers may lag a stored sweep by that much) and, between sweeps, no
computation at all. While the app's watcher runs (`watch`, a task of the app's lifespan),
it does those checks and the per-sweep computation itself, every `recheck_s`, as long as
a viewer asked in the last `WATCH_IDLE_S`: requests then answer from memory and none waits
for a sweep's computation (the first request after an idle spell checks, as without one).
The numbers are the ones `repository.link_load` gives for one link (tested equal).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
import pydantic_core
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from server import compression
from server.compression import Coding
from server.fabric import history, repository
from server.shared import Gates
from stacklens.api_models import FabricLink, FabricNode, Topology
from stacklens.constants import ERROR_COUNTERS, PORT_COUNTERS, SATURATED_SHIFT

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The data is stale after this many sweep intervals without a sweep; a port's newest
#: sample this much older than the last sweep is no longer current.
STALE_SWEEPS = 3
#: The sweep interval assumed before the samples measured one.
DEFAULT_INTERVAL_NS = 10**9
#: The watcher computes ahead while a viewer asked within this many seconds.
WATCH_IDLE_S = 60.0
#: While watched, requests answer from memory if the watcher checked within this many
#: seconds (else, the watcher being held up, they check themselves).
WATCH_TRUST_S = 2.0

#: Windows whose links' sums are kept, and their link rows in all (a bound on memory).
MAX_WINDOWS = 64
MAX_WINDOW_ROWS = 100_000
#: Answers kept per sweep (`per_sweep`: pages of the live links list).
MAX_SWEEP_ANSWERS = 64

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
        return cls.of_bytes(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())

    @classmethod
    def of_bytes(cls, body: bytes) -> Encoded:
        """A JSON body encoded already, with a strong ETag of its bytes."""
        return cls(body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"')

    @cached_property
    def gzipped(self) -> bytes:
        """The body gzip-compressed as the app compresses answers, once for every viewer
        that takes gzip."""
        return compression.compress(self.body, "gzip")

    @cached_property
    def brotli(self) -> bytes:
        """The body brotli-compressed as the app compresses answers, once for every viewer
        that takes br."""
        return compression.compress(self.body, "br")

    def coded(self, coding: Coding) -> bytes:
        """The body in `coding`."""
        if coding == "br":
            return self.brotli
        return self.gzipped if coding == "gzip" else self.body


@dataclass
class _Shared:
    topology_key: object = None
    topology: Encoded | None = None
    links: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    state_key: object = None
    state: Encoded | None = None
    ranking: dict[str, Ranking] = field(default_factory=dict)
    freshness: dict[str, Any] = field(default_factory=dict)
    #: per_sweep's answers: key -> (the state_key they were built at, the answer)
    answers: OrderedDict[tuple[Any, ...], tuple[object, Encoded]] = field(
        default_factory=OrderedDict
    )


@dataclass(frozen=True)
class Ranking:
    """The links' ids in one order of the links list (repository.rank_key's order)."""

    ids: list[int]

    def page(self, start: int, limit: int) -> tuple[list[int], bool]:
        """The ids of the `limit` links from position `start` of this order, and whether
        more follow."""
        return self.ids[start : start + limit], start + limit < len(self.ids)


def freshness(last_sweep_ns: int | None, interval_ns: int | None, now_ns: int) -> dict[str, Any]:
    """The Freshness of data whose last sweep ended at `last_sweep_ns`, swept every
    `interval_ns` (None: unknown), at `now_ns`."""
    bound = STALE_SWEEPS * (interval_ns or DEFAULT_INTERVAL_NS)
    return {
        "last_sweep_ns": last_sweep_ns,
        "sweep_interval_ns": interval_ns,
        "stale_after_ns": bound,
        "stale": last_sweep_ns is None or now_ns - last_sweep_ns > bound,
    }


class FabricSnapshots:
    """The shared, per-discovery and per-sweep answers of the fabric API (thread-safe: the
    watcher, or without one the first request after a sweep, computes; concurrent
    requests wait for its result)."""

    def __init__(self, recheck_s: float = 0.25) -> None:
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._shared = _Shared()
        self._checked = -float("inf")  # time.monotonic() of the last version check
        #: (topology version, from, to) -> (window_version, window_columns), and
        #: (topology version, first, last minute) -> (window_version, window_minutes): the
        #: least recently used first
        self._windows: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
        self._minutes: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
        #: (topology version, *route key) -> ((window_version, from, to), answer), per_window's
        self._answers: OrderedDict[tuple[Any, ...], tuple[Any, Any]] = OrderedDict()
        self._gates = Gates()  # per_sweep's and per_window's: one computation per key
        self._asked = time.monotonic()  # of the last request (the app's start counts)
        self._watched = False
        self._failing = False  # the watcher's last check failed

    async def watch(self, engine: Engine) -> None:
        """Until cancelled: every `recheck_s`, while a viewer asked within `WATCH_IDLE_S`,
        look for a new discovery or sweep on `engine` and compute its answers (in a worker
        thread). Nothing to do with `recheck_s` 0 (every request checks)."""
        if self.recheck_s <= 0:
            return
        self._watched = True
        try:
            while True:
                if time.monotonic() - self._asked < WATCH_IDLE_S:
                    await run_in_threadpool(self._watch_once, engine)
                await asyncio.sleep(self.recheck_s)
        finally:
            self._watched = False

    def _watch_once(self, engine: Engine) -> None:
        """One check of the watcher; a database error is logged (once until a check
        succeeds again; requests then check themselves and answer the error), the watcher
        goes on."""
        try:
            with Session(engine) as session:
                self._refresh(session, force=True)
            self._failing = False
        except SQLAlchemyError as exc:
            if not self._failing:
                log.warning("fabric view: the check for a new sweep failed: %s", exc)
            self._failing = True

    def _trusted_s(self) -> float:
        """How old a check may be for a request to answer from memory."""
        return WATCH_TRUST_S if self._watched else self.recheck_s

    def _refresh(self, session: Session, force: bool = False) -> _Shared:
        """The shared answers, recomputed if a discovery or sweep was stored since (looked
        at most every `recheck_s` for requests; every time if `force`)."""
        now = time.monotonic()
        shared = self._shared
        if not force:
            self._asked = now
            if now - self._checked < self._trusted_s() and shared.state is not None:
                return shared
        topo_key = repository.topology_version(session)
        version = repository.samples_version(session)
        # whether the data is stale changes the answer too (with the interval last measured)
        fresh = freshness(version[0], shared.freshness.get("sweep_interval_ns"), time.time_ns())
        state_key = (topo_key, version, fresh["stale"])
        with self._lock:
            shared = self._shared
            if topo_key is None or topo_key != shared.topology_key or shared.topology is None:
                nodes, links = repository.nodes(session), repository.links(session)
                shared = _Shared(topo_key, Encoded.of(topology_answer(nodes, links)), links,
                                 nodes)  # fmt: skip
            if topo_key is None or state_key != shared.state_key or shared.state is None:
                rows = repository.latest_rows(session)
                fresh = freshness(version[0], sweep_interval(rows), time.time_ns())
                state, ranking = fabric_state(
                    shared.links, shared.nodes, rows,
                    shared.topology.etag if shared.topology else "", fresh,
                )  # fmt: skip
                shared.state_key = (topo_key, version, fresh["stale"])
                shared.state, shared.ranking, shared.freshness = state, ranking, fresh
                shared.answers = OrderedDict()  # the last sweep's answers
            self._shared = shared
            self._checked = now
            return shared

    def recent(self, what: str) -> Encoded | None:
        """The shared `what` ("topology" or "state") if checked less than `recheck_s` ago
        (no database needed), else None."""
        shared = self._shared
        self._asked = now = time.monotonic()
        if now - self._checked < self._trusted_s() and shared.state is not None:
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

    def link_page(
        self, session: Session, sort: str, start: int, limit: int
    ) -> tuple[list[dict[str, Any]], int, bool]:
        """The newest sweep's loads of the `limit` links from position `start` of the order
        `sort` (built for those links only), how many links there are, whether more
        follow. A position, not a sort key: the order changes with every sweep, and the
        next page of a live list is the next links of the newest order."""
        shared = self._refresh(session)
        ids, more = shared.ranking[sort].page(start, limit)
        loads = repository.loads_of(session, shared.links, ids, current_from(shared.freshness))
        return loads, len(shared.links), more

    def per_sweep(self, session: Session, key: tuple[Any, ...],
                  build: Callable[[Session], dict[str, Any]]) -> Encoded:  # fmt: skip
        """The answer `build(session)` gives (plain data, encoded as the API encodes it:
        export.plain_json) for `key` (a route and its parameters), built once for every
        viewer between two sweeps: kept while the newest sweep, the topology and whether
        the data is stale stay as they were when it was built (the state's version, read
        before building: what it reads is at least that new); built every time while no
        discovery is recorded (no version to keep it by). At most MAX_SWEEP_ANSWERS kept,
        the least recently used forgotten first."""
        shared = self._refresh(session)
        version = shared.state_key
        if shared.topology_key is None:
            return Encoded.of_bytes(pydantic_core.to_json(build(session)))
        answers = shared.answers
        found = self._sweep_kept(answers, key, version)
        if found is not None:
            return found
        with self._gates.of(key):  # requests missing it together build it once
            found = self._sweep_kept(answers, key, version)
            if found is not None:
                return found
            encoded = Encoded.of_bytes(pydantic_core.to_json(build(session)))
            with self._lock:
                answers[key] = (version, encoded)
                answers.move_to_end(key)
                while len(answers) > MAX_SWEEP_ANSWERS:
                    answers.popitem(last=False)
            return encoded

    def _sweep_kept(self, answers: OrderedDict[tuple[Any, ...], tuple[object, Encoded]],
                    key: tuple[Any, ...], version: object) -> Encoded | None:  # fmt: skip
        """per_sweep's answer kept for `key` at `version`, else None."""
        with self._lock:
            found = answers.get(key)
            if found is None or found[0] != version:
                return None
            answers.move_to_end(key)
            return found[1]

    def per_window(self, session: Session, key: tuple[Any, ...], lo: int, hi: int,
                   build: Callable[[Session], T]) -> T:  # fmt: skip
        """The answer `build(session)` gives for `key` (a route and its parameters: whatever
        else the answer depends on) over [lo, hi) of the current fabric, built once for
        every viewer while the window's samples stay as they are: kept with its window and
        that window's `history.window_version` (read first: a sample stored meanwhile can
        only make the answer newer than its version), reused for the same key over a window
        with the same version and no raw sample between the kept window's start and this
        one's, nor between their ends (`history.samples_between`): the same samples (a live
        window ends now, and its start moves with it). The least recently used forgotten
        beyond MAX_WINDOWS and MAX_WINDOW_ROWS (windows x links). Built every time while no
        discovery is recorded."""
        shared = self._refresh(session)
        full_key = (shared.topology_key, *key)
        version = history.window_version(session, lo, hi)
        found = self._window_kept(session, full_key, version, lo, hi)
        if found is None:
            with self._gates.of(full_key):  # requests missing it together compute it once
                found = self._window_kept(session, full_key, version, lo, hi)
                if found is None:
                    found = (build(session),)
                    if shared.topology_key is not None:
                        self._keep(self._answers, full_key, ((version, lo, hi), found[0]),
                                   len(shared.links))  # fmt: skip
        answer: T = found[0]
        return answer

    def _window_kept(self, session: Session, key: tuple[Any, ...], version: Any, lo: int,
                     hi: int) -> tuple[Any] | None:  # fmt: skip
        """(per_window's answer kept for `key`,) if it holds the same samples as [lo, hi)
        of `version`, else None."""
        with self._lock:
            found = self._answers.get(key)
        if found is None or found[0][0] != version:
            return None
        _, kept_lo, kept_hi = found[0]
        if any(a != b and history.samples_between(session, min(a, b), max(a, b))
               for a, b in ((kept_lo, lo), (kept_hi, hi))):  # fmt: skip
            return None
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
        return (found[1],)

    def window_loads(
        self, session: Session, lo: int, hi: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The current links (`current`) and their loads over [lo, hi)
        (`repository.window_loads`, in their order), from their sums over it kept since the
        first request for that window while its samples stay as they are
        (`history.window_version`, read first: a sample stored meanwhile can only make the
        kept sums newer than their version, never older), else summed now."""
        shared = self._refresh(session)
        key = (shared.topology_key, lo, hi)
        version = history.window_version(session, lo, hi)
        columns = self._kept(self._windows, key, version)
        if columns is None:
            minutes = self._window_minutes(session, shared, lo, hi)
            columns = repository.window_columns(session, shared.links, lo, hi, minutes)
            if shared.topology_key is not None:  # else the links are read anew every time
                self._keep(self._windows, key, (version, columns), len(shared.links))
        return shared.links, repository.window_loads(session, shared.links, lo, hi, columns)

    def _window_minutes(self, session: Session, shared: _Shared, lo: int, hi: int) -> Any:
        """The links' sums over the whole minutes of [lo, hi) (`repository.window_minutes`),
        kept like the windows' (None: no whole minute, or no topology version)."""
        first, last = history.whole_minutes(lo, hi)
        if first >= last or shared.topology_key is None:
            return None
        key = (shared.topology_key, first, last)
        version = history.window_version(session, first, last)
        minutes = self._kept(self._minutes, key, version)
        if minutes is not None:
            return minutes
        minutes = repository.window_minutes(session, shared.links, first, last)
        self._keep(self._minutes, key, (version, minutes), len(shared.links))
        return minutes

    def _kept(self, kept: OrderedDict[tuple[Any, ...], tuple[Any, Any]],
              key: tuple[Any, ...], version: Any) -> Any:  # fmt: skip
        """The sums `kept` (the windows' or the minutes') holds for `key` if they are of
        `version` (then the most recently used), else None."""
        with self._lock:
            found = kept.get(key)
            if found is None or found[0] != version:
                return None
            kept.move_to_end(key)
            return found[1]

    def _keep(self, kept: OrderedDict[tuple[Any, ...], tuple[Any, Any]],
              key: tuple[Any, ...], value: tuple[Any, Any], rows: int) -> None:  # fmt: skip
        """Keep `value` in `kept` (the windows' or the minutes' sums, per_window's answers),
        forgetting the least recently used beyond MAX_WINDOWS and MAX_WINDOW_ROWS rows
        (windows x links)."""
        with self._lock:
            kept[key] = value
            kept.move_to_end(key)
            while len(kept) > 1 and (len(kept) > MAX_WINDOWS or len(kept) * rows > MAX_WINDOW_ROWS):
                kept.popitem(last=False)

    def current(self, session: Session) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
        """The current fabric's links (`repository.links`), its freshness (as of the last
        check) and the topology's ETag."""
        shared = self._refresh(session)
        etag = shared.topology.etag if shared.topology else ""
        return shared.links, shared.freshness, etag

    def nodes(self, session: Session) -> list[dict[str, Any]]:
        """The current fabric's nodes (`repository.nodes`)."""
        return self._refresh(session).nodes


def topology_answer(nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> dict[str, Any]:
    """The Topology answer (plain data) of these nodes and links (`repository.nodes`,
    `repository.links`)."""
    topology = Topology(
        nodes=[FabricNode(**_public(n)) for n in nodes],
        links=[FabricLink(**_public(lk)) for lk in links],
    )
    answer: dict[str, Any] = topology.model_dump(mode="json")
    return answer


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in repository.INTERNAL_KEYS}


def sweep_interval(rows: list[tuple[Any, ...]]) -> int | None:
    """The sweeps' interval: the median dt of the ports' newest samples (None: none known)."""
    dts = [r[_COL["dt_ns"]] for r in rows if r[_COL["dt_ns"]]]
    return int(np.median(dts)) if dts else None


def current_from(fresh: dict[str, Any]) -> int | None:
    """The oldest sample time still current: a port's newest sample older than this (the
    last sweep's end - the stale bound) means it stopped answering (None: no sweep yet)."""
    last = fresh.get("last_sweep_ns")
    return None if last is None else last - fresh["stale_after_ns"]


def fabric_state(
    links: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    rows: list[tuple[Any, ...]],
    etag: str,
    fresh: dict[str, Any],
) -> tuple[Encoded, dict[str, Ranking]]:
    """The live FabricState of these links (`repository.links`) from every port's newest
    sample (`repository.latest_rows`) still current (`current_from(fresh)`), and the links
    in the API's two orders."""
    n = len(links)
    oldest = current_from(fresh)
    by_port = {r[_COL["port_id"]]: r for r in rows if oldest is None or r[_COL["ts_ns"]] >= oldest}

    def end(key: str) -> tuple[np.ndarray, ...]:
        """Per link, of its `key` end: rate (nan unknown), sample present, error deltas (nan
        unknown), which error counters are saturated, sample time, PortXmitWait ticks per
        second (nan unknown)."""
        rate = np.full(n, np.nan)
        wait = np.full(n, np.nan)
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
            dt, sent, waited = (
                row[_COL["dt_ns"]],
                row[_COL["d_xmit_bytes"]],
                row[_COL["d_xmit_wait"]],
            )
            if dt and sent is not None:
                rate[i] = sent * 1e9 / dt
            if dt and waited is not None:
                wait[i] = waited * 1e9 / dt
            errors[i] = [np.nan if v is None else v for v in row[_FIRST_ERROR:]]
            saturated[i] = (row[_COL["flags"]] >> _ERROR_SHIFTS) & 1
        return rate, present, errors, saturated, ts, wait

    ra, pa, ea, sa, ta, wa = end("a_port_id")
    rb, pb, eb, sb, tb, wb = end("b_port_id")
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
    # the orders of repository.rank_key
    ranking = {
        "utilisation": Ranking(ids[by_util].tolist()),
        "errors": Ranking(ids[by_errors].tolist()),
    }
    # both ends' PortXmitWait rates summed (unknown if either is), as repository.link_load
    columns = (col(util), col(busier), total.tolist(), flags.astype(int).tolist(), col(wa + wb))
    state = state_answer(links, nodes, etag, fresh, None, columns,
                         int(times.max()) if n and times.max() else None)  # fmt: skip
    return Encoded.of(state), ranking


def col(values: np.ndarray) -> list[float | None]:
    """A float column with nan as None."""
    return [None if np.isnan(v) else float(v) for v in values]


def window_state(
    links: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    loads: list[dict[str, Any]],
    etag: str,
    fresh: dict[str, Any],
    window: tuple[int, int],
) -> dict[str, Any]:
    """The FabricState of these links over a window from their loads over it
    (`repository.window_loads`, in the links' order)."""
    busier = []
    for x in loads:
        rates = [r for r in (x["a_to_b_bytes_per_s"], x["b_to_a_bytes_per_s"]) if r is not None]
        busier.append(max(rates) if rates else None)
    flags = [
        (FLAG_DOWN if x["state"] == "down" else 0)
        | (FLAG_SATURATED if any(c in ERROR_COUNTERS for c in x["saturated"]) else 0)
        | (FLAG_ERRORS_UNKNOWN if any(x["errors"][c] is None for c in ERROR_COUNTERS) else 0)
        for x in loads
    ]
    times = [x["ts_ns"] for x in loads if x["ts_ns"] is not None]
    columns = ([x["utilisation"] for x in loads], busier, [x["errors_total"] for x in loads],
               flags, [x["xmit_wait_per_s"] for x in loads])  # fmt: skip
    return state_answer(links, nodes, etag, fresh, window, columns, max(times) if times else None)


def state_answer(
    links: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    etag: str,
    fresh: dict[str, Any],
    window: tuple[int, int] | None,
    columns: tuple[list[Any], list[Any], list[int], list[int], list[Any]],
    ts_ns: int | None,
) -> dict[str, Any]:
    """A FabricState (plain data) from its link columns (utilisation, busier-direction
    bytes/s, errors, flags, PortXmitWait ticks/s, in the links' order)."""
    util, busier, errors, flags, wait = columns
    known = [u for u in util if u is not None]
    switches = sum(nd["type"] == "switch" for nd in nodes)
    return {
        "topology_etag": etag,
        "ts_ns": ts_ns,
        "from_ns": window[0] if window else None,
        "to_ns": window[1] if window else None,
        "links": {
            "id": [lk["id"] for lk in links],
            "utilisation": util,
            "bytes_per_s": busier,
            "errors": errors,
            "flags": flags,
            "xmit_wait_per_s": wait,
        },
        "summary": {
            "nodes": len(nodes),
            "switches": switches,
            "hcas": sum(nd["type"] == "hca" for nd in nodes),
            "gone": sum(bool(nd["gone"]) for nd in nodes),
            "links": len(links),
            "down": sum(f & FLAG_DOWN for f in flags),
            "erroring": sum(e > 0 for e in errors),
            "busiest": max(known) if known else None,
        },
        "freshness": fresh,
    }
