"""Fabric view benchmark: what the Fabric page costs on a cluster-sized fabric, one run.

Writes the largest fat tree of bench/fabric_sweep.py (default 1792 hosts: 128 switches,
1,920 nodes, 3,584 links, 7,168 ports) through the real FabricStore into an embedded
PostgreSQL: the topology, then --sweeps sweeps one second apart with random traffic and
a few error counts (so every port has a latest sample and deltas), then times what one
refresh of the Fabric page asks of the server: `GET /api/fabric/topology`,
`GET /api/fabric/links?samples=false` and `GET /api/fabric/events?limit=20` (and, for
comparison, the links with their per-end samples; the app in-process, over
HTTP through its ASGI test client, i.e. query + JSON encoding, no network), and the page's
own work on the answers (`frontend.cyto_style.elements`: the graph's elements with their
positions). Prints per request, plain and gzip-compressed, the median of --repeat runs,
the body size and the bytes sent.

    .venv/bin/python -m bench.fabric_api [--hosts 1792 --sweeps 3 --repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
from fastapi.testclient import TestClient

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from emulator.fattree import FatTree, fat_tree
from frontend import cyto_style
from frontend.api import StacklensApi
from server.app import create_app
from server.fabric.routes import LINK_LIMITS
from stacklens.constants import PORT_COUNTERS
from stacklens.db import make_engine, migrate, start_embedded

T = TypeVar("T")

CAPACITY = 25_000_000_000  # bytes/s of an HDR port (4x 50 Gb/s)
T0 = time.time_ns() - 3600 * 10**9


def topology(tree: FatTree) -> Topology:
    """The fat tree as the sampler stores it (GUIDs and LIDs by name order)."""
    names = tree.switches + tree.hcas
    guid = {name: 0x0002_C903_0000_0000 + i for i, name in enumerate(names, 1)}
    nodes = {
        guid[n]: Node(
            guid[n],
            NodeType.SWITCH if n in tree.switch_ports else NodeType.CA,
            n,
            tree.switch_ports.get(n, 1),
            i,
        )
        for i, n in enumerate(names, 1)
    }
    links, ports = [], {}
    for sim_link in tree.links:
        ends = [(guid[name], port) for name, port in (sim_link.a, sim_link.b)]
        links.append(Link.of(*ends))
        for g, p in ends:
            ports[(g, p)] = Port(g, p, g, nodes[g].lid, 4, 5, 2, 64, 0, CAPACITY)
    return Topology(nodes=nodes, ports=ports, links=links)


def sweep(ends: list[tuple[int, int]], words: np.ndarray, t_end_ns: int) -> RawSweep:
    """One sweep of every port with these cumulative counter values."""
    n = len(ends)
    return RawSweep.from_words(
        [g for g, _ in ends], [p for _, p in ends], words,
        np.ones(n, dtype=bool), np.ones(n, dtype=bool), t_end_ns - 10**8, t_end_ns,
    )  # fmt: skip


def fill(url: str, tree: FatTree, sweeps: int) -> tuple[int, int, int]:
    """Write the fabric and its sweeps; returns (nodes, links, ports)."""
    topo = topology(tree)
    ends = sorted(topo.ports)
    rng = np.random.default_rng(7)
    words = np.zeros((len(ends), len(PORT_COUNTERS)), dtype=np.uint64)
    data = [PORT_COUNTERS.index(c) for c in ("xmit_bytes", "rcv_bytes")]
    errors = PORT_COUNTERS.index("symbol_errors")
    store = FabricStore(url)
    try:
        store.write_topology(topo, T0, [])
        tracker = DeltaTracker()
        for s in range(1, sweeps + 1):
            words[:, data] += rng.integers(0, CAPACITY // 8, size=(len(ends), 2), dtype=np.uint64)
            words[rng.integers(0, len(ends), size=8), errors] += np.uint64(3)
            store.write_samples(tracker.update(sweep(ends, words.copy(), T0 + s * 10**9)))
    finally:
        store.close()
    return len(topo.nodes), len(topo.links), len(ends)


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """Median seconds of `repeat` calls of fn (at least one), and its last result."""
    times = []
    for _ in range(repeat - 1):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    result = fn()
    times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=1792)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            t0 = time.perf_counter()
            nodes, links, ports = fill(database.url, fat_tree(args.hosts), args.sweeps)
            print(
                f"fabric: {nodes} nodes, {links} links, {ports} ports, {args.sweeps} sweeps "
                f"written in {time.perf_counter() - t0:.1f} s"
            )
            engine = make_engine(database.url)
            app = create_app(engine)
            with TestClient(app, base_url="http://127.0.0.1") as client:
                for path in ("/api/fabric/topology", "/api/fabric/links",
                             f"/api/fabric/links?limit={LINK_LIMITS.maximum}",
                             "/api/fabric/links?samples=false",  # what the page asks
                             "/api/fabric/events?limit=20"):  # fmt: skip
                    for encoding in ("identity", "gzip"):
                        headers = {"Accept-Encoding": encoding}
                        seconds, response = timed(
                            functools.partial(client.get, path, headers=headers), args.repeat
                        )
                        assert response.status_code == 200, response.text
                        print(
                            f"GET {path} ({encoding}): {seconds * 1000:.0f} ms (median of "
                            f"{args.repeat}), {len(response.content) / 1e6:.2f} MB, "
                            f"{response.num_bytes_downloaded / 1e6:.3f} MB sent"
                        )
                api = StacklensApi("http://127.0.0.1")
                api._http = client  # type: ignore[assignment]  # the client's methods, in-process
                topo = api.fabric_topology()
                seconds, elements = timed(lambda: cyto_style.elements(topo), args.repeat)
                print(
                    f"page: graph elements for {len(elements)} nodes and links built in "
                    f"{seconds * 1000:.0f} ms (median of {args.repeat})"
                )
            engine.dispose()
        finally:
            database.stop()


if __name__ == "__main__":
    main()
