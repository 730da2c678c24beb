"""Fat-tree topology files for ibsim: a pure generator, and the link list it describes.

The file format is ibsim's (ibnetdiscover-like): one record per node, a header line
`Switch|Hca <ports> "<name>"` then one line per connected port `[p] "<peer>"[q] w= s= e=`,
records separated by blank lines, both ends of every link listed. Switches get an enhanced
port 0, so every switch has a PMA that answers PortCounters queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Simulator limits (ibsim's compile-time maxima).
MAX_NODES = 2048
MAX_SWITCHES = 256
#: Port attributes of every link per speed the tree's links run: 4x width, SDR|DDR|QDR
#: enabled, and the extended speeds enabled (the highest both ends enable is active).
#: FDR10 is the vendor ExtendedPortInfo's speed: ibsim takes it from the ibnetdiscover-style
#: comment `lid N 4xFDR10`, and serves ExtendedPortInfo for Mellanox device ids (DEVICE_ID).
LINK_ATTRS = {
    "QDR": "w=2 s=7 e=0",
    "FDR10": "w=2 s=7 e=0 # lid 0 4xFDR10",
    "FDR": "w=2 s=7 e=1",
    "EDR": "w=2 s=7 e=3",
    "HDR": "w=2 s=7 e=7",
}
#: Device id of every node: a Mellanox switch id for which libibnetdisc reads the vendor
#: ExtendedPortInfo, as it does on real hardware.
DEVICE_ID = "0xc738"


@dataclass(frozen=True)
class SimLink:
    """One cable: (node name, port) at each end."""

    a: tuple[str, int]
    b: tuple[str, int]

    def ends(self) -> frozenset[tuple[str, int]]:
        """The two ends, unordered."""
        return frozenset((self.a, self.b))


@dataclass
class FatTree:
    """A generated two-level fat tree: spines, leaves, hosts and storage nodes."""

    spines: list[str]
    leaves: list[str]
    hosts: list[str]
    storage: list[str]
    switch_ports: dict[str, int]
    links: list[SimLink] = field(default_factory=list)
    speed: str = "QDR"  # what every link runs: a key of LINK_ATTRS
    #: multi-rail: host -> its HCAs' node names, rail 0 first (empty: one HCA per host,
    #: named as the host)
    rails: dict[str, list[str]] = field(default_factory=dict)

    @property
    def switches(self) -> list[str]:
        """Every switch, spines first."""
        return self.spines + self.leaves

    @property
    def hcas(self) -> list[str]:
        """Every HCA node: compute hosts' (each rail of a multi-rail host) then storage
        nodes."""
        if self.rails:
            return [h for host in self.hosts for h in self.rails[host]] + self.storage
        return self.hosts + self.storage

    def rail(self, host: str, r: int) -> str:
        """The HCA node of rail `r` of `host` (the host itself without rails)."""
        return self.rails[host][r] if self.rails else host

    def to_ibsim(self) -> str:
        """The topology in ibsim's file format."""
        peers: dict[str, list[tuple[int, str, int]]] = {n: [] for n in self.switches + self.hcas}
        for link in self.links:
            (na, pa), (nb, pb) = link.a, link.b
            peers[na].append((pa, nb, pb))
            peers[nb].append((pb, na, pa))
        attrs = LINK_ATTRS[self.speed]
        records = [f"devid={DEVICE_ID}"]
        for name in self.switches:
            lines = [f'Switch {self.switch_ports[name]} "{name}"   # "{name}" enhanced port 0']
            lines += [f'[{p}] "{n}"[{q}] {attrs}' for p, n, q in sorted(peers[name])]
            records.append("\n".join(lines))
        for name in self.hcas:
            lines = [f'Hca 1 "{name}"']
            lines += [f'[{p}] "{n}"[{q}] {attrs}' for p, n, q in sorted(peers[name])]
            records.append("\n".join(lines))
        return "\n\n".join(records) + "\n"


def fat_tree(
    hosts: int,
    storage: int = 0,
    hosts_per_leaf: int | None = None,
    spines: int | None = None,
    speed: str = "QDR",
    rails: int = 1,
) -> FatTree:
    """A non-blocking two-level fat tree with `hosts` compute HCAs and `storage` storage HCAs.

    Each leaf has `hosts_per_leaf` down ports (default 8 up to 64 end nodes, else 16) and as
    many up links, spread evenly over the spines (default 2 spines for 8-port leaves, 16
    otherwise). Names: spine01.., leaf01.., host01.. (zero-padded to the digits of `hosts`),
    stor01... Every link runs `speed` (4x; QDR, FDR10, FDR, EDR or HDR: LINK_ATTRS).

    `rails` > 1 makes a rail-optimised multi-rail fabric: every compute host has `rails`
    HCAs, "<host> mlx5_<r>" (the node description real HCAs give: host name, device), and
    rail r of every host is cabled to the leaves of plane r (the hosts' rail-r HCAs fill
    plane r's leaves in host order, as the single-rail tree fills its leaves); the planes
    share the spines, so the fabric is one subnet that one opensm brings up. Storage nodes
    (one HCA each) follow on plane 0's leaves.
    """
    if speed not in LINK_ATTRS:
        raise ValueError(f"speed {speed!r} is not one of {', '.join(LINK_ATTRS)}")
    if rails < 1:
        raise ValueError("need at least one rail")
    ends = hosts * rails + storage
    if hosts < 1 or storage < 0:
        raise ValueError("need at least one host and a non-negative storage count")
    d = hosts_per_leaf or (8 if ends <= 64 else 16)
    s = spines or (2 if d <= 8 else 16)
    if d % s:
        raise ValueError(f"hosts_per_leaf ({d}) must be a multiple of spines ({s})")
    per_pair = d // s
    planes = [hosts + storage] + [hosts] * (rails - 1)  # end nodes per plane
    plane_leaves = [math.ceil(n / d) for n in planes]
    n_leaves = sum(plane_leaves)
    if n_leaves + s > MAX_SWITCHES or n_leaves + s + ends > MAX_NODES:
        raise ValueError(
            f"{ends} end nodes need {n_leaves + s} switches and {n_leaves + s + ends} nodes; "
            f"ibsim allows {MAX_SWITCHES} switches and {MAX_NODES} nodes"
        )
    if n_leaves * per_pair > 254:
        raise ValueError("spines would need more than 254 ports: use more spines")
    width = max(2, len(str(hosts)))
    host_names = [f"host{i:0{width}d}" for i in range(1, hosts + 1)]
    stor_names = [f"stor{i:02d}" for i in range(1, storage + 1)]
    spine_names = [f"spine{i:02d}" for i in range(1, s + 1)]
    leaf_names = [f"leaf{i:02d}" for i in range(1, n_leaves + 1)]
    tree = FatTree(
        spines=spine_names,
        leaves=leaf_names,
        hosts=host_names,
        storage=stor_names,
        switch_ports={
            **{n: n_leaves * per_pair for n in spine_names},
            **{n: 2 * d for n in leaf_names},
        },
        speed=speed,
    )
    if rails > 1:
        tree.rails = {h: [f"{h} mlx5_{r}" for r in range(rails)] for h in host_names}
    first = 0  # the first leaf of the plane
    for r, n_plane in enumerate(plane_leaves):
        hcas = [tree.rail(h, r) for h in host_names] + (stor_names if r == 0 else [])
        for i, hca in enumerate(hcas):
            tree.links.append(SimLink((leaf_names[first + i // d], i % d + 1), (hca, 1)))
        first += n_plane
    for li, leaf in enumerate(leaf_names):
        for si, spine in enumerate(spine_names):
            for k in range(per_pair):
                leaf_port = d + 1 + si * per_pair + k
                spine_port = li * per_pair + k + 1
                tree.links.append(SimLink((leaf, leaf_port), (spine, spine_port)))
    return tree
