"""A small known fabric written through the real FabricStore: two switches, two hosts, three
links, two sweeps with known deltas, then host2 unplugged (node gone, link down, events).

    spine1[1] ==== leaf1[3]        4 GB/s; 2 GB/s spine1 -> leaf1, 1 GB/s back
                   leaf1[1] ---- host1[1]   0.4 GB/s leaf1 -> host1; 3 symbol errors and
                                            1 link error recovery at leaf1, host1's
                                            PortRcvErrors reset (unknown); 77 xmit-wait ticks
                   leaf1[2] -x-- host2[1]   down; host2 did not answer the second sweep

Used by the fabric API tests and the Fabric page's browser test.
"""

from __future__ import annotations

import numpy as np

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from stacklens.constants import PORT_COUNTERS

T0 = 1_700_000_000_000_000_000
SECOND = 1_000_000_000
SPINE1, LEAF1 = 0xF452_1403_0000_0001, 0xF452_1403_0000_0002  # signed negative in storage
HOST1, HOST2 = 0x0002_C903_0000_0011, 0x0002_C903_0000_0012
#: (GUID, port) -> capacity in bytes/s; 0 = unknown (as a sysfs-only source registers it).
CAPACITY = {
    (SPINE1, 1): 4_000_000_000,
    (LEAF1, 3): 4_000_000_000,
    (LEAF1, 1): 4_000_000_000,
    (HOST1, 1): 4_000_000_000,
    (LEAF1, 2): 2_000_000_000,
    (HOST2, 1): 0,
}
#: Counter values of each sweep (data counters in 4-octet words), missing = 0.
SWEEP1 = {
    (LEAF1, 1): {"symbol_errors": 5},
    (HOST1, 1): {"rcv_errors": 10},
    (LEAF1, 2): {"xmit_discards": 2},
}
SWEEP2 = {
    (SPINE1, 1): {"xmit_bytes": 500_000_000, "rcv_bytes": 250_000_000},
    (LEAF1, 3): {"xmit_bytes": 250_000_000, "rcv_bytes": 500_000_000},
    (LEAF1, 1): {
        "xmit_bytes": 100_000_000,
        "xmit_wait": 77,
        "symbol_errors": 8,
        "link_error_recovery": 1,
    },
    (HOST1, 1): {"rcv_bytes": 100_000_000, "rcv_errors": 4},
    (LEAF1, 2): {"xmit_discards": 2},
}


def topology(with_host2: bool = True) -> Topology:
    """The fabric as discovered: everything, or without host2 and its link."""
    nodes = {
        SPINE1: Node(SPINE1, NodeType.SWITCH, "spine1", 36, 1),
        LEAF1: Node(LEAF1, NodeType.SWITCH, "leaf1", 36, 2),
        HOST1: Node(HOST1, NodeType.CA, "host1", 1, 3),
    }
    links = [Link.of((SPINE1, 1), (LEAF1, 3)), Link.of((HOST1, 1), (LEAF1, 1))]
    if with_host2:
        nodes[HOST2] = Node(HOST2, NodeType.CA, "host2", 1, 4)
        links.append(Link.of((HOST2, 1), (LEAF1, 2)))
    ports = {
        end: Port(end[0], end[1], end[0], nodes[end[0]].lid, 4, 5, 2, 4, 0, cap)
        for end, cap in CAPACITY.items()
        if end[0] in nodes
    }
    return Topology(nodes=nodes, ports=ports, links=links)


def _sweep(values: dict, t_end_ns: int, silent: tuple = ()) -> RawSweep:
    """A sweep of every port with these values; the `silent` ends did not answer."""
    ends = sorted(CAPACITY)
    rows = np.zeros((len(ends), len(PORT_COUNTERS)), dtype=np.uint64)
    for i, end in enumerate(ends):
        for name, v in values.get(end, {}).items():
            rows[i, PORT_COUNTERS.index(name)] = v
    answered = np.array([end not in silent for end in ends])
    return RawSweep.from_words(
        [g for g, _ in ends],
        [p for _, p in ends],
        rows,
        np.ones(len(ends), dtype=bool),
        answered,
        t_end_ns - SECOND // 10,
        t_end_ns,
    )


def write_small_fabric(url: str) -> None:
    """Write the fabric above: topology at T0, sweeps at T0 + 1 s and T0 + 2 s (host2 does
    not answer the second), and the topology without host2 at T0 + 3 s."""
    store = FabricStore(url)
    try:
        first = topology()
        store.write_topology(first, T0, [])
        tracker = DeltaTracker()
        store.write_samples(tracker.update(_sweep(SWEEP1, T0 + SECOND)))
        store.write_samples(tracker.update(_sweep(SWEEP2, T0 + 2 * SECOND, silent=((HOST2, 1),))))
        later = topology(with_host2=False)
        store.write_topology(later, T0 + 3 * SECOND, first.diff(later))
    finally:
        store.close()


def relink_host2(url: str) -> None:
    """host2 is back at T0 + 4 s: node new, link up (same nodes and links as at T0)."""
    store = FabricStore(url)
    try:
        full = topology()
        store.write_topology(full, T0 + 4 * SECOND, topology(with_host2=False).diff(full))
    finally:
        store.close()


#: A later second of traffic (counter words added to SWEEP2's values): leaf1 -> host1 at
#: 3.6 GB/s (0.9 of 4 GB/s), spine1 -> leaf1 at 0.4 GB/s (0.1).
LATER = {
    (SPINE1, 1): {"xmit_bytes": 100_000_000},
    (LEAF1, 3): {"rcv_bytes": 100_000_000},
    (LEAF1, 1): {"xmit_bytes": 900_000_000},
    (HOST1, 1): {"rcv_bytes": 900_000_000},
}


#: A later second of traffic where spine1[1]'s senders waited 5 M ticks while spine1 ->
#: leaf1 carried 0.16 GB/s (0.04 of 4 GB/s): congested at low utilisation; leaf1 -> host1
#: idle.
CONGESTED = {
    (SPINE1, 1): {"xmit_bytes": 40_000_000, "xmit_wait": 5_000_000},
    (LEAF1, 3): {"rcv_bytes": 40_000_000},
}


def turn_order_round(url: str) -> None:
    """After write_small_fabric: sweeps at T0 + 5 s (SWEEP2's values again: the new
    tracker's base) and T0 + 6 s (LATER added), so that leaf1 -> host1 is now the busier
    link and spine1 -> leaf1 the quieter one (the topology rediscovered unchanged at T0 +
    4 s first: a new store learns its port ids from it)."""
    later_round(url, LATER)


def later_round(url: str, added: dict) -> None:
    """After write_small_fabric: the topology rediscovered unchanged at T0 + 4 s (a new
    store learns its port ids from it), sweeps at T0 + 5 s (SWEEP2's values again: the new
    tracker's base) and T0 + 6 s (`added` to them: LATER, CONGESTED)."""
    store = FabricStore(url)
    try:
        store.write_topology(topology(with_host2=False), T0 + 4 * SECOND, [])
        tracker = DeltaTracker()
        later = {end: dict(values) for end, values in SWEEP2.items()}
        for end, more in added.items():
            for name, words in more.items():
                later.setdefault(end, {})[name] = later.get(end, {}).get(name, 0) + words
        for t, values in ((T0 + 5 * SECOND, SWEEP2), (T0 + 6 * SECOND, later)):
            store.write_samples(tracker.update(_sweep(values, t, silent=((HOST2, 1),))))
    finally:
        store.close()
