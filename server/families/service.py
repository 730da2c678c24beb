"""The families domain's answers: a job's communicator families with their traffic, time and
reach (host, leaf, spine), and its bytes per link by family.

Reads the descriptions and traffic rows (server/families/repository.py), builds the
families (the pure server/families/model.py), models each collective's on-wire sends over
its communicator's members (server/traffic/collectives.py: members in rank order, from the
descriptions), and places every transfer on the fabric as the traffic domain does (the
hosts' HCAs, the forwarding tables' routes; server/traffic).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from sqlalchemy.orm import Session

from server import paging
from server.callsites import resolution, summary
from server.families import repository
from server.families.model import (
    NOT_DESCRIBED,
    WORLD,
    Family,
    Send,
    build,
    describe,
    labels,
    reach_of,
)
from server.families.model import totals as family_totals
from server.jobs.repository import Scope
from server.traffic import collectives
from server.traffic import repository as traffic
from server.traffic.attribution import Transfer, attribute
from server.traffic.routing import NoRoute
from server.traffic.service import AttributionCache
from stacklens import rails
from stacklens.api_models import PageInfo
from stacklens.mpi_ops import op_names, op_receives
from stacklens.rails import Binding

#: The communicator id of the hooks' overflow records.
OVERFLOW_COMM = 2**32 - 1


def _families(session: Session, scope: Scope) -> tuple[dict[str, Family], list[Send],
                                                        dict[str, int]]:  # fmt: skip
    """The scope's families with their ops, every modelled or routed send, and per family
    the collective bytes no model places."""
    families, of = build(repository.descriptions(session, scope))
    names, receives = op_names(), op_receives()
    sends: list[Send] = []
    unmodelled: dict[str, int] = defaultdict(int)
    ordered: dict[tuple[int, int], tuple[list[int], dict[int, int]]] = {}

    def family(run: int, comm: int) -> Family:
        key = of.get((run, comm), NOT_DESCRIBED) if comm != OVERFLOW_COMM else NOT_DESCRIBED
        if key not in families:
            families[key] = Family(key, key)
        return families[key]

    for run, rank, comm, size, op, root, calls, nbytes, ns in repository.collectives(
        session, scope
    ):
        fam = family(run, comm)
        name = names[op]
        fam.add_op(name, "collective", calls, nbytes, ns)
        if nbytes <= 0:
            continue
        if (run, comm) not in ordered:  # once per communicator: its members and positions
            group = fam.groups.get((run, comm), {})
            members = [group[r] for r in sorted(group)]
            ordered[(run, comm)] = members, collectives.positions(members)
        members, where = ordered[(run, comm)]
        if len(members) != size or not collectives.modelled(name) or fam.key == NOT_DESCRIBED:
            unmodelled[fam.key] += nbytes
            continue
        parts = collectives.rank_sends(name, members, rank, root, calls, nbytes, where)
        sends += [Send(run, a, b, fam.key, "modelled", part) for (a, b), part in parts.items()]

    sent_elsewhere: dict[tuple[int, int, int], int] = defaultdict(int)
    elsewhere: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for run, rank, comm, op, peer, received, msgs, nbytes, ns in repository.comm_messages(
        session, scope
    ):
        fam = family(run, comm)
        own = bool(received) == receives[op]  # the op's own direction: what it counts
        fam.add_op(names[op], "p2p", msgs if own else 0, nbytes if own else 0, ns)
        totals = elsewhere[op]
        totals[0] += msgs if own else 0
        totals[1] += nbytes if own else 0
        totals[2] += ns
        if not received and peer >= 0 and nbytes > 0:
            sends.append(Send(run, rank, peer, fam.key, "routed", nbytes))
            sent_elsewhere[(run, rank, peer)] += nbytes

    # MPI_COMM_WORLD's own point-to-point: everything minus the other communicators'
    world = families.setdefault(WORLD, Family(WORLD, "world"))
    for (run, rank, peer), nbytes in repository.pair_bytes(session, scope).items():
        rest = nbytes - sent_elsewhere.get((run, rank, peer), 0)
        if rest > 0:
            sends.append(Send(run, rank, peer, WORLD, "routed", rest))
    for op, (calls, nbytes, ns) in repository.p2p_ops(session, scope).items():
        other = elsewhere.get(op, [0, 0, 0])
        world.add_op(names[op], "p2p", calls - other[0], nbytes - other[1], ns - other[2])
    return families, sends, unmodelled


def _where(session: Session, scope: Scope, families: dict[str, Family]) -> dict[str, str]:
    """Each family's call site in short, as the call-site table labels a frame
    (server/callsites/summary.label: file:line, else function+offset, else module+offset),
    by family key; a family without a site is left out. A site is named by the stored
    answer of the same frame as the call sites' (server/callsites/resolution.stored: the
    collector's resolver or a node read the module, never this request): the module its run
    saw (the build-id of the same module path in the run's call-site frames; else of the one
    module of that file name) and the offset the hooks took from the module's load bias, as
    a call site's. A frame without a build-id or not answered yet is module+offset."""
    seen = repository.module_build_ids(session, scope)
    by_name: dict[tuple[int, str], set[tuple[str, str]]] = defaultdict(set)
    for (run, module), bid in seen.items():
        by_name[(run, os.path.basename(module))].add((module, bid))
    wanted: dict[tuple[str, str], list[Family]] = defaultdict(list)
    for fam in families.values():
        if not fam.module or not fam.offset:
            continue
        path, bid = fam.module, seen.get((fam.run, fam.module), "")
        same = by_name.get((fam.run, os.path.basename(fam.module)), set())
        if not bid and len(same) == 1:
            path, bid = next(iter(same))
        wanted[(path, bid)].append(fam)
    keys = [(path, bid, f.offset) for (path, bid), fams in wanted.items() for f in fams if bid]
    known = resolution.stored(session, scope.job_id, keys)
    out = {}
    for (path, bid), fams in wanted.items():
        for fam in fams:
            answer = known.get((path, bid, fam.offset), {})
            out[fam.key] = summary.label({"module": path, "offset": fam.offset, **answer})
    return out


def _hops(session: Session, cache: AttributionCache, paths: str, hosts: set[str]) -> Any:
    """A function (source host and binding, destination host and binding, bytes) -> [(links
    the route crosses, bytes)] over the rail pairs the ranks' bindings give
    (stacklens/rails.py); links None when either host is not placed on the current fabric or
    the tables give no route."""
    fab = cache.fabric(session, paths)
    placed = traffic.rails_of(session, fab, hosts)
    known: dict[tuple[int, int], int | None] = {}

    def crossed(a: int, b: int) -> int | None:
        if (a, b) not in known:
            try:
                known[(a, b)] = len(fab.router.path(a, b))
            except NoRoute:
                known[(a, b)] = None
        return known[(a, b)]

    def hops(src: tuple[str, Binding], dst: tuple[str, Binding], nbytes: int
             ) -> list[tuple[int | None, int]]:  # fmt: skip
        here, there = placed.get(src[0]), placed.get(dst[0])
        if not here or not there:
            return [(None, nbytes)]
        lanes = (rails.lanes([r.device for r in here], src[1]),
                 rails.lanes([r.device for r in there], dst[1]))  # fmt: skip
        pairs = rails.split(*lanes, nbytes)
        return [(crossed(here[a].guid, there[b].guid), n) for a, b, n in pairs]

    return hops


def job_families(
    session: Session, cache: AttributionCache, paths: str, scope: Scope
) -> list[dict[str, Any]]:
    """Every family of the scope (stacklens.api_models.CommFamily), heaviest time first
    (then by key); families without traffic in the window are listed too."""
    families, sends, unmodelled = _families(session, scope)
    host = repository.hosts(session, scope)
    hops = _hops(session, cache, paths, {h for h, _ in host.values()})
    for s in sends:
        src, dst = host.get((s.run, s.src)), host.get((s.run, s.dst))
        if src is None or dst is None or src[0] == dst[0]:
            parts = [(None, s.nbytes)]
        else:
            parts = hops(src, dst, s.nbytes)
        fam = families[s.family]
        for between, nbytes in parts:
            where = reach_of(
                None if src is None else src[0], None if dst is None else dst[0], between
            )
            fam.reach[(where, s.provenance)] = fam.reach.get((where, s.provenance), 0) + nbytes
    text = labels(families, _where(session, scope, families))
    rows = [
        {
            **describe(f, text[f.key]),
            **family_totals(f),
            "unmodelled_bytes": unmodelled.get(f.key, 0),
        }  # fmt: skip
        for f in families.values()
        if f.key != NOT_DESCRIBED or f.ops
    ]
    rows.sort(key=lambda r: (-r["time_ns"], r["family"]))
    return rows


def families_page(
    session: Session,
    cache: AttributionCache,
    paths: str,
    scope: Scope,
    limit: int,
    cursor: str | None,
) -> tuple[list[dict[str, Any]], PageInfo]:
    """One page of `job_families` (heaviest time first, then by key) after `cursor`, and
    its page info: what GET /api/jobs/{job}/families and the job's "Communicator families"
    card answer, the families computed once for every viewer of the job while nothing they
    read changed (AttributionCache.per_job)."""
    rows = cache.per_job(session, ("families", paths, scope), scope.job_id,
                         lambda: job_families(session, cache, paths, scope))  # fmt: skip
    total = len(rows)
    after = paging.decode("family", cursor, (int, str))
    if after is not None:
        rows = [r for r in rows if (-r["time_ns"], r["family"]) > after]
    return paging.page("family", rows[: limit + 1], limit, total,
                       lambda r: (-r["time_ns"], r["family"]))  # fmt: skip


def job_family_links(
    session: Session, cache: AttributionCache, paths: str, scope: Scope, job_id: int
) -> dict[str, Any]:
    """The link directions the scope's inter-host family traffic crossed, with each family's
    bytes (routed over the forwarding tables, groups split by their measured bytes, as the
    traffic domain attributes a job), by link id then direction; and the bytes on no link."""
    families, sends, _ = _families(session, scope)
    host = repository.hosts(session, scope)
    fab = cache.fabric(session, paths)
    hcas = traffic.rails_of(session, fab, {h for h, _ in host.values()})
    transfers = []
    left: dict[str, int] = defaultdict(int)
    for s in sends:
        src, dst = host.get((s.run, s.src)), host.get((s.run, s.dst))
        if src is None or dst is None:
            left["unknown_rank"] += s.nbytes
            continue
        transfers.append(Transfer(job_id, s.family, s.provenance, src[0], dst[0], s.nbytes,
                                  src[1], dst[1]))  # fmt: skip
    meas = traffic.measured(session, fab, scope.window)
    result = attribute(fab.router, transfers, hcas, {c: m["bytes"] for c, m in meas.items()})
    for reason, nbytes in result.left_out.items():
        left[reason] += nbytes
    text = labels(families, _where(session, scope, families))
    links = []
    for crossing in sorted(result.shares):
        link = fab.links[crossing[0]]
        shares = [
            {"family": family, "label": text.get(family, family), "bytes": nbytes,
             "provenance": provenance, "path": path}
            for (_, family, provenance, path), nbytes in sorted(result.shares[crossing].items())
        ]  # fmt: skip
        links.append({
            "id": crossing[0], "a": link["a"], "b": link["b"], "direction": crossing[1],
            "bytes": sum(result.shares[crossing].values()),
            "measured_bytes": meas.get(crossing, {}).get("bytes"),
            "families": shares,
        })  # fmt: skip
    return {"links": links, "left_out": dict(left)}
