"""Fabric topology: nodes, ports, links, forwarding tables, routes, and changes between scans.

Identity follows the project's convention: a node is its GUID, a port is (node GUID, port
number), a link is the unordered pair of its two (GUID, port) ends. Routes are computed
from the switches' linear forwarding tables (LFTs), the same tables the switches use.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

#: Lanes of each PortInfo LinkWidthActive code.
_LANES = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
#: Data bits per second per lane of each LinkSpeedActive code (8b/10b encoding removed).
_LANE_BPS = {1: 2_000_000_000, 2: 4_000_000_000, 4: 8_000_000_000}
#: Data bits per second per lane of each LinkSpeedExtActive code (FDR, EDR, HDR, NDR;
#: 64b/66b encoding removed from FDR's and EDR's signalling rates).
_LANE_BPS_EXT = {
    1: 14_062_500_000 * 64 // 66,
    2: 25_781_250_000 * 64 // 66,
    4: 50_000_000_000,
    8: 100_000_000_000,
}
#: Data bits per second per lane of FDR10 (the vendor ExtendedPortInfo's LinkSpeedActive
#: bit 0: 10.3125 Gb/s signalling, 64b/66b).
_LANE_BPS_FDR10 = 10_312_500_000 * 64 // 66
#: ExtendedPortInfo LinkSpeedActive bit of FDR10.
MLNX_SPEED_FDR10 = 1
#: PortInfo PortState codes of a port whose link is down, and of an active one.
PORT_DOWN = 1
PORT_ACTIVE = 4
#: PortInfo PortPhysicalState code of a port an administrator disabled.
PHYS_DISABLED = 3


class NodeType(enum.IntEnum):
    """NodeInfo NodeType codes."""

    CA = 1
    SWITCH = 2
    ROUTER = 3


def capacity_bytes_per_s(width: int, speed: int, speed_ext: int = 0, mlnx_speed: int = 0) -> int:
    """Data capacity of a port in bytes/s from the width and speed it runs (0 = unknown).

    The lane rate is LinkSpeedExtActive's when set (FDR, EDR, HDR, NDR), else FDR10's when
    the vendor ExtendedPortInfo says so (`mlnx_speed`), else LinkSpeedActive's (SDR, DDR,
    QDR). None of them is gated on the port's CapabilityMask: switch ports report 0 there.
    """
    lanes = _LANES.get(width, 0)
    if speed_ext:
        lane = _LANE_BPS_EXT.get(speed_ext)
    elif mlnx_speed & MLNX_SPEED_FDR10:
        lane = _LANE_BPS_FDR10
    else:
        lane = _LANE_BPS.get(speed)
    return lanes * (lane or 0) // 8


@dataclass
class Node:
    """A switch, HCA or router."""

    guid: int
    type: NodeType
    description: str
    nports: int
    lid: int = 0


@dataclass
class Port:
    """One port of a node with its PortInfo attributes (codes as in PortInfo)."""

    guid: int
    port: int
    port_guid: int
    lid: int
    state: int
    phys_state: int
    width: int
    speed: int
    speed_ext: int
    capacity_bytes_per_s: int
    mlnx_speed: int = 0  # vendor ExtendedPortInfo LinkSpeedActive (1 = FDR10), 0 = none


End = tuple[int, int]


@dataclass(frozen=True, order=True)
class Link:
    """A cable between two (GUID, port) ends; `a` < `b` so equal links compare equal."""

    a: End
    b: End

    @classmethod
    def of(cls, x: End, y: End) -> Link:
        """The link between ends x and y, in canonical order."""
        return cls(min(x, y), max(x, y))


@dataclass(frozen=True)
class Hop:
    """One directed hop of a route: bytes leave `tx` and arrive at `rx`."""

    tx: End
    rx: End


@dataclass(frozen=True)
class Change:
    """A topology change between two scans (becomes a fabric event)."""

    kind: str  # node_new | node_gone | link_up | link_down | link_bounce
    subject: str
    details: dict

    @classmethod
    def of_link(cls, kind: str, topo: Topology, link: Link, **extra: object) -> Change:
        """A change of `link` (described as `topo` names its ends); `extra` joins details."""
        subject = f"{topo.describe(link.a)} - {topo.describe(link.b)}"
        details = {"a": [f"{link.a[0]:#018x}", link.a[1]], "b": [f"{link.b[0]:#018x}", link.b[1]]}
        return cls(kind, subject, details | extra)


@dataclass
class Topology:
    """A discovered (or generated) fabric."""

    nodes: dict[int, Node]
    ports: dict[End, Port]
    links: list[Link]
    lfts: dict[int, np.ndarray] = field(default_factory=dict)
    lft_errors: int = 0
    subnet_prefix: int = 0  # the local port's GID prefix (0 = unknown)
    sm_lid: int = 0  # LID of the subnet manager (0 = none known)

    def __post_init__(self) -> None:
        self._remote: dict[End, End] = {}
        for link in self.links:
            self._remote[link.a] = link.b
            self._remote[link.b] = link.a
        self._by_name = {n.description: n for n in self.nodes.values()}

    def identity(self) -> tuple[int, int]:
        """Which fabric this is: (subnet prefix, port GUID of its subnet manager; 0 if the
        SM's LID is none of the discovered ports')."""
        sm_guid = next(
            (p.port_guid for p in self.ports.values() if self.sm_lid and p.lid == self.sm_lid),
            0,
        )
        return self.subnet_prefix, sm_guid

    def node(self, name: str) -> Node:
        """The node with this description (node names are unique in stacklens fabrics)."""
        return self._by_name[name]

    def remote(self, end: End) -> End | None:
        """The other end of the link at `end`, if connected."""
        return self._remote.get(end)

    def port_lid(self, end: End) -> int:
        """The LID a PMA query for this port is addressed to (switch ports: the switch LID)."""
        node = self.nodes[end[0]]
        return node.lid if node.type == NodeType.SWITCH else self.ports[end].lid

    def sweep_targets(self) -> list[tuple[int, int, int]]:
        """Every connected port as (GUID, port, LID to query), sorted."""
        ends = sorted(self._remote)
        return [(g, p, self.port_lid((g, p))) for g, p in ends if self.port_lid((g, p))]

    def describe(self, end: End) -> str:
        """`name[port]` of an end, for events and messages."""
        return f"{self.nodes[end[0]].description}[{end[1]}]"

    def route(self, src: int, dst: int) -> list[Hop]:
        """Directed hops from HCA `src` to HCA `dst` (GUIDs), following the LFTs."""
        dst_lid = self.nodes[dst].lid
        src_ports = [p for (g, p) in self._remote if g == src]
        if not src_ports:
            raise ValueError(f"node {src:#x} has no connected port")
        here: End = (src, min(src_ports))
        hops: list[Hop] = []
        for _ in range(64):
            there = self._remote.get(here)
            if there is None:
                raise ValueError(f"route to LID {dst_lid} leaves through unconnected {here}")
            hops.append(Hop(here, there))
            if there[0] == dst:
                return hops
            lft = self.lfts.get(there[0])
            if lft is None or dst_lid >= len(lft) or lft[dst_lid] in (0, 255):
                raise ValueError(f"no forwarding entry for LID {dst_lid} on {there[0]:#x}")
            here = (there[0], int(lft[dst_lid]))
        raise ValueError(f"route from {src:#x} to {dst:#x} loops")

    def diff(self, newer: Topology) -> list[Change]:
        """Changes from this scan to `newer`: nodes new/gone, links up/down."""
        out: list[Change] = []
        for guid in sorted(newer.nodes.keys() - self.nodes.keys()):
            n = newer.nodes[guid]
            out.append(Change("node_new", n.description, {"guid": f"{guid:#018x}"}))
        for guid in sorted(self.nodes.keys() - newer.nodes.keys()):
            n = self.nodes[guid]
            out.append(Change("node_gone", n.description, {"guid": f"{guid:#018x}"}))
        old_links, new_links = set(self.links), set(newer.links)
        for kind, links, topo in (
            ("link_up", new_links - old_links, newer),
            ("link_down", old_links - new_links, self),
        ):
            out += [Change.of_link(kind, topo, link) for link in sorted(links)]
        return out

    def bounces(self, newer: Topology, downed: dict[End, int]) -> list[Change]:
        """The links up in this scan and in `newer` alike at an end whose LinkDowned counter
        moved (`downed`: end -> when it was last read before, ns): down and back between
        two sweeps, a link_bounce each (details: since_ns, the earliest of its ends)."""
        since: dict[Link, int] = {}
        for end, t in downed.items():
            there = self.remote(end)
            if there is not None and there == newer.remote(end):
                link = Link.of(end, there)
                since[link] = min(t, since.get(link, t))
        return [
            Change.of_link("link_bounce", newer, lk, since_ns=t) for lk, t in sorted(since.items())
        ]
