"""Routes of flows over the stored fabric: from a source HCA, hop by hop over the switches'
linear forwarding tables (fabric_lfts: byte i = output port for destination LID i), to the
links and directions the flow crosses. Pure: plain data in, plain data out.

How sure a route is depends on how the fabric forwards (STACKLENS_FABRIC_PATHS):

- `fixed`: the tables fix every hop (static routing, opensm's default engines): each stage
  of a path is one (link, direction).
- `parallel`: the tables fix the next switch, but the hardware spreads a flow over the
  parallel links between two switches (link aggregation, hashing): a switch-to-switch
  stage is the group of every up link between those two switches.
- `adaptive`: adaptive routing picks any minimal path: a stage is the group of every up
  link one hop closer to the destination from the switches the stage before reached.

A group's share of a flow is split later by the group's measured counters
(server/traffic/attribution.py); a one-link stage carries the whole flow.

This module shares no code with the emulator (emulator/) that moves the simulated
counters: the accuracy benchmark compares the two.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

#: A node of a graph walked by hop_counts.
N = TypeVar("N", bound=Hashable)

#: How the fabric forwards (STACKLENS_FABRIC_PATHS).
PATH_MODES = ("fixed", "parallel", "adaptive")
#: Longest route followed, in hops (a longer one is a loop in the tables).
MAX_HOPS = 64
#: LFT entries that mean "no route" (port 255 = drop; port 0 is the switch itself).
NO_PORT = (0, 255)

End = tuple[int, int]
#: A directed crossing of one link: (link id, "a_to_b" | "b_to_a").
Crossing = tuple[int, str]
#: One stage of a path: the crossings the flow may take there (one: the route is fixed).
Stage = tuple[Crossing, ...]


class NoRoute(ValueError):
    """The tables give no complete route between two HCAs."""


@dataclass(frozen=True)
class RouteLink:
    """An up link of the current fabric as stored (fabric_links), ends (GUID, port)."""

    id: int
    a: End
    b: End


@dataclass
class Router:
    """Routes over one fabric: `switches` (GUIDs), `links` (the up links), `lids` (the LID
    of each HCA port), `lfts` (switch GUID -> its forwarding table), `mode` a PATH_MODES."""

    switches: set[int]
    links: list[RouteLink]
    lids: dict[End, int]
    lfts: dict[int, bytes]
    mode: str = "fixed"
    _at: dict[End, tuple[RouteLink, End]] = field(init=False, repr=False)
    _first_port: dict[int, int] = field(init=False, repr=False)
    _between: dict[tuple[int, int], list[Crossing]] = field(init=False, repr=False)
    _cache: dict[tuple[int, int], list[Stage]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.mode not in PATH_MODES:
            raise ValueError(f"path mode {self.mode!r} is not one of {', '.join(PATH_MODES)}")
        self._at = {}
        self._between = defaultdict(list)
        for link in self.links:
            self._at[link.a] = (link, link.b)
            self._at[link.b] = (link, link.a)
            self._between[(link.a[0], link.b[0])].append((link.id, "a_to_b"))
            self._between[(link.b[0], link.a[0])].append((link.id, "b_to_a"))
        self._first_port = {}
        for guid, port in self._at:
            self._first_port[guid] = min(port, self._first_port.get(guid, port))
        self._cache = {}

    def hca_port(self, guid: int) -> End:
        """The cabled port an HCA sends from (its lowest-numbered up port)."""
        port = self._first_port.get(guid)
        if port is None:
            raise NoRoute(f"HCA {guid:#018x} has no up link")
        return (guid, port)

    def _cross(self, here: End) -> tuple[Crossing, End]:
        """The crossing of the link at `here` leaving from `here`, and where it arrives."""
        found = self._at.get(here)
        if found is None:
            raise NoRoute(f"the route leaves through {here[0]:#018x}[{here[1]}], not cabled")
        link, there = found
        return (link.id, "a_to_b" if link.a == here else "b_to_a"), there

    def path(self, src: int, dst: int) -> list[Stage]:
        """The stages from HCA `src` to HCA `dst` (GUIDs), cached per pair."""
        key = (src, dst)
        if key not in self._cache:
            self._cache[key] = self._path(src, dst)
        return self._cache[key]

    def _path(self, src: int, dst: int) -> list[Stage]:
        dst_port = self.hca_port(dst)
        lid = self.lids.get(dst_port, 0)
        if not lid:
            raise NoRoute(f"HCA {dst:#018x} has no LID")
        crossing, there = self._cross(self.hca_port(src))
        hops: list[tuple[Crossing, End]] = [(crossing, there)]
        while there[0] != dst:
            if len(hops) > MAX_HOPS:
                raise NoRoute(f"the route from {src:#018x} to LID {lid} loops")
            table = self.lfts.get(there[0])
            port = table[lid] if table is not None and lid < len(table) else 0
            if port in NO_PORT:
                raise NoRoute(f"switch {there[0]:#018x} has no forwarding entry for LID {lid}")
            crossing, there = self._cross((there[0], port))
            hops.append((crossing, there))
        if self.mode == "adaptive" and len(hops) > 2:
            first, last = hops[0][1][0], hops[-2][1][0]  # the source's and the last switch
            return [(hops[0][0],), *self._minimal(first, last), (hops[-1][0],)]
        stages: list[Stage] = []
        previous = src
        for crossing, arrived in hops:
            node_from = previous
            previous = arrived[0]
            if self.mode == "parallel" and {node_from, arrived[0]} <= self.switches:
                stages.append(tuple(sorted(self._between[(node_from, arrived[0])])))
            else:
                stages.append((crossing,))
        return stages

    def _minimal(self, first: int, last: int) -> list[Stage]:
        """The stages of every minimal switch path from switch `first` to switch `last`:
        stage k holds each up link from a switch k hops from `first` to one a hop closer
        to `last`."""
        graph: dict[int, set[int]] = defaultdict(set)
        for a, b in self._between:
            if a in self.switches and b in self.switches:
                graph[a].add(b)
        to_last = hop_counts(graph, last)
        if first not in to_last:
            raise NoRoute(f"no switch path from {first:#018x} to {last:#018x}")
        stages: list[Stage] = []
        frontier = {first}
        while last not in frontier:
            crossings: list[Crossing] = []
            reached: set[int] = set()
            for u in sorted(frontier):
                for v in sorted(graph[u]):
                    if to_last.get(v) == to_last[u] - 1:
                        crossings += self._between[(u, v)]
                        reached.add(v)
            stages.append(tuple(sorted(crossings)))
            frontier = reached
        return stages


def hop_counts(graph: Mapping[N, set[N]], start: N) -> dict[N, int]:
    """Hops from `start` to every node of `graph` (node -> neighbours) it reaches, breadth
    first (the fabric's links are two-way)."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there in graph[here]:
            if there not in dist:
                dist[there] = dist[here] + 1
                queue.append(there)
    return dist
