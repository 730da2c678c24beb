"""Attribution of measured link bytes to job x category: the pure core.

Input is plain data: the jobs' transfers between hosts (each with a job, a category and its
provenance, and how each end's rank is bound to its host's rails), where each host sits on
the fabric (its rails: HCA node GUIDs with their devices), a Router over the stored
forwarding tables (server/traffic/routing.py) and each link direction's measured bytes.
Every inter-host transfer is routed to the stages it crosses; a one-link stage takes the
whole transfer, a group of links (parallel or adaptive paths) splits it by the group's
measured bytes in that direction (equally when none are measured), and the figure says
`group`. Per link direction, `other` = measured - attributed, as it is: negative when more
is attributed than measured, never clamped; None when the measured bytes are unknown.

Categories (the traffic category of a transfer): stacklens.constants.ON_LINKS.
Provenance of an attributed figure: `routed` (a flow the hooks measured, placed on links by
the forwarding tables), `measured` (collective bytes from the MPI's monitored traffic,
placed the same way), `modelled` (collective bytes from the algorithm model); link totals
and `other` are `measured`.
Transfers within a host, and those with an end off the fabric, are left out and counted.
A transfer between multi-rail hosts leaves and arrives on the rails its ranks are bound to
(stacklens/rails.py): the bytes of a flow are those of the HCA pair the binding gives.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from server.traffic.routing import Crossing, NoRoute, Router
from stacklens import rails
from stacklens.rails import UNBOUND, Binding

PROVENANCES = ("measured", "routed", "modelled")
#: How a file's bytes are placed on its mount's servers (STACKLENS_STORAGE_PLACEMENT).
STORAGE_PLACEMENTS = ("stripe", "file-hash")


@dataclass(frozen=True)
class Transfer:
    """`nbytes` sent from host `src` to host `dst` by job `job` (jobs.id) in `category` (one
    of stacklens.constants.ON_LINKS; server/families attributes a communicator family's
    bytes in its place)."""

    job: int
    category: str
    provenance: str
    src: str
    dst: str
    nbytes: int
    src_bind: Binding = UNBOUND  # how the sending rank is bound to its host's rails
    dst_bind: Binding = UNBOUND


class Rail(NamedTuple):
    """One rail of a host: its HCA's node GUID and device name ("" when its node
    description names none)."""

    guid: int
    device: str


#: Host -> its rails in rail order (stacklens.rails.order).
Placed = Mapping[str, Sequence[Rail]]


#: A figure's key on a link direction: (job, category, provenance, path "fixed" | "group").
Key = tuple[int, str, str, str]


@dataclass
class Attribution:
    """Bytes per link direction and key, and what was left out (bytes per reason)."""

    shares: dict[Crossing, dict[Key, float]] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def attributed(self, crossing: Crossing) -> float:
        """Everything attributed to one link direction."""
        return sum(self.shares.get(crossing, {}).values())


def attribute(
    router: Router,
    transfers: Iterable[Transfer],
    placed: Placed,
    measured: Mapping[Crossing, int | None],
) -> Attribution:
    """Route every transfer (hosts placed by `placed`: host -> its rails) and split it over
    the stages it crosses; `measured` is each link direction's measured bytes (split of
    groups). Left out, by reason: `intra_host`, `off_fabric` (a host not placed), `no_route`
    (the tables give no complete route)."""
    out = Attribution()
    split(router, flows(transfers, placed, out), measured, out)
    return out


#: Bytes between two HCAs of one job, category and provenance: (job, category, provenance, src
#: GUID, dst GUID) -> bytes.
Flows = dict[tuple[int, str, str, int, int], int]


def flows(transfers: Iterable[Transfer], placed: Placed, out: Attribution) -> Flows:
    """The transfers summed per HCA pair, each on the rails its ranks are bound to (see
    `attribute`); those left out counted in `out`."""
    pairs: Flows = defaultdict(int)
    for t in transfers:
        if t.nbytes <= 0:
            continue
        if t.src == t.dst:
            out.left_out["intra_host"] += t.nbytes
            continue
        src, dst = placed.get(t.src), placed.get(t.dst)
        if not src or not dst:
            out.left_out["off_fabric"] += t.nbytes
            continue
        here = rails.lanes([r.device for r in src], t.src_bind)
        there = rails.lanes([r.device for r in dst], t.dst_bind)
        for a, b, nbytes in rails.split(here, there, t.nbytes):
            if src[a].guid == dst[b].guid:
                out.left_out["intra_host"] += nbytes
                continue
            pairs[(t.job, t.category, t.provenance, src[a].guid, dst[b].guid)] += nbytes
    return pairs


def grouped_with(router: Router, pairs: Flows, only: set[Crossing]) -> set[Crossing]:
    """The crossings of every stage (of the flows' routes) that holds one of `only`: whose
    measured bytes `split` needs for the crossings of `only`."""
    out: set[Crossing] = set()
    for _, _, _, src, dst in pairs:
        try:
            stages = router.path(src, dst)
        except NoRoute:
            continue
        out.update(c for stage in stages if not only.isdisjoint(stage) for c in stage)
    return out


def split(router: Router, pairs: Flows, measured: Mapping[Crossing, int | None],
          out: Attribution, only: set[Crossing] | None = None) -> None:  # fmt: skip
    """Route each flow and add its share of every stage to `out` (of the crossings in
    `only` if given: the same figures as without it, for those crossings alone; flows
    without a route are counted either way)."""
    for (job, category, provenance, src, dst), nbytes in sorted(pairs.items()):
        try:
            stages = router.path(src, dst)
        except NoRoute:
            out.left_out["no_route"] += nbytes
            continue
        for stage in stages:
            if only is not None and only.isdisjoint(stage):
                continue
            if len(stage) == 1:
                _add(out, stage[0], (job, category, provenance, "fixed"), nbytes)
                continue
            known = [measured.get(c) or 0 for c in stage]
            total = sum(known)
            for crossing, m in zip(stage, known, strict=True):
                if only is not None and crossing not in only:
                    continue
                share = nbytes * m / total if total else nbytes / len(stage)
                _add(out, crossing, (job, category, provenance, "group"), share)


def _add(out: Attribution, crossing: Crossing, key: Key, nbytes: float) -> None:
    figures = out.shares.setdefault(crossing, {})
    figures[key] = figures.get(key, 0) + nbytes


def other(measured: int | None, attributed: float) -> float | None:
    """measured - attributed, as it is (None: measured unknown)."""
    return None if measured is None else measured - attributed


# ---- where transfers come from: the hooks' rows, turned into host-to-host transfers ----


#: RMA ops whose data moves from the target to the origin, and those whose moves both
#: ways (the origin's data there, the result of the same size back).
RMA_FROM_TARGET = ("get", "rget")
RMA_BOTH_WAYS = ("get_accumulate", "rget_accumulate", "fetch_and_op", "compare_and_swap")


def rma_direction(name: str) -> str:
    """`to_target`, `from_target` or `both` for an RMA op name (MPI_Rget_c -> from_target)."""
    base = name.removeprefix("MPI_").removesuffix("_c").lower()
    if base in RMA_FROM_TARGET:
        return "from_target"
    if base in RMA_BOTH_WAYS:
        return "both"
    return "to_target"


def storage_shares(path: str, mount: str, servers: Mapping[str, list[str]], placement: str,
                   nbytes: int) -> list[tuple[str, int]]:  # fmt: skip
    """Where `nbytes` of file `path` on `mount` go: (server, bytes) pairs; empty when the
    mount has no servers (a local file system: no fabric traffic). `stripe`: split evenly
    over the mount's servers (the first ones take the remainder's bytes); `file-hash`: the
    whole file on one server, the CRC-32 of its path modulo their number."""
    hosts = servers.get(mount) or servers.get("*") or []
    if not hosts or nbytes <= 0:
        return []
    if placement == "file-hash":
        return [(hosts[zlib.crc32(path.encode()) % len(hosts)], nbytes)]
    base, extra = divmod(nbytes, len(hosts))
    return [(h, base + (1 if i < extra else 0)) for i, h in enumerate(hosts)]
