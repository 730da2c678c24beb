"""Incident detection benchmark: detection latency (in sweeps) and the detectors' cost per
sweep on a cluster-sized fat tree, one run.

Writes a fat tree (default 512 hosts: 48 switches, 1,024 links) with up-down forwarding
tables through the real FabricStore into an embedded PostgreSQL, and --jobs jobs of --ranks
ranks (one rank per host, point-to-point traffic to the next rank, an MPI_Allreduce every
interval) through the real collector. Then, sweep by sweep (every port moving bytes below
half its capacity), it writes the sweep and the jobs' interval and runs one detector pass
(`IncidentService.tick`, the clock 1.6 s past the sweep's end), timed. From sweep
--congest-at on, one spine link's PortXmitWait rises by 5 M ticks per second (congested)
while job 0's collective time per byte rises fivefold; job 1 (8x the bytes) crosses the
same link: it is the aggressor to name, job 0 the victim; at sweep --errors-at one host link
counts symbol errors. Prints, as JSON: at which sweep each signal was detected relative to
the sweep its condition started in (1 = in that sweep), what the incident named, and the
median / 95th percentile / largest pass time, over the quiet sweeps and those with an open
incident.

    .venv/bin/python -m bench.incidents [--hosts 512 --jobs 8 --ranks 16 --sweeps 40]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.fabric_api import CAPACITY, sweep, topology
from bench.jobs_page import send
from collector.fabric.counters import DeltaTracker
from collector.fabric.store import FabricStore
from collector.fabric.topology import Topology
from collector.service import BackgroundCollector
from emulator.fattree import FatTree, fat_tree
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens import wire
from stacklens.constants import PORT_COUNTERS
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.mpi_ops import op_names

S = 10**9
TOKEN = "bench"


def up_down(tree: FatTree, topo: Topology) -> dict[int, np.ndarray]:
    """Up-down forwarding tables: a leaf sends a host of its own down its port, any other
    up its (destination LID mod uplinks)-th uplink; a spine down to the host's leaf."""
    guid = {n.description: g for g, n in topo.nodes.items()}
    size = max(n.lid for n in topo.nodes.values()) + 1
    lfts = {guid[s]: np.zeros(size, dtype=np.uint8) for s in tree.switches}
    leaf_of: dict[Any, Any] = {}
    ups: dict[Any, Any] = {}
    downs: dict[Any, Any] = {}
    for link in tree.links:
        (na, pa), (nb, pb) = link.a, link.b
        if nb in tree.hcas:
            leaf_of[nb] = (na, pa)
        elif na in tree.leaves and nb in tree.spines:
            ups.setdefault(na, []).append(pa)
            downs.setdefault((nb, na), pb)
    for hca, (leaf, port) in leaf_of.items():
        lid = topo.nodes[guid[hca]].lid
        for other in tree.leaves:
            lfts[guid[other]][lid] = port if other == leaf else ups[other][lid % len(ups[other])]
        for spine in tree.spines:
            lfts[guid[spine]][lid] = downs[(spine, leaf)]
    return lfts


def frames(job: int, hosts: list[str], i: int, t0: int, slow: bool) -> list[bytes]:
    """Interval i of one job: each rank sends 1 MiB (job 1: 8 MiB) to the next and meets
    them in an MPI_Allreduce (100 ms, or 500 ms while slow)."""
    nbytes = 8 << 20 if job == 1 else 1 << 20
    op = op_names().index
    out = []
    for rank, host in enumerate(hosts):
        tables = {
            "p2p": wire.records("p2p", [{"peer": (rank + 1) % len(hosts), "bytes_sent": nbytes,
                                         "msgs_sent": 1}]),
            "op": wire.records("op", [
                {"op_id": op("MPI_Send"), "calls": 1, "bytes": nbytes, "time_ns": 10**6},
                {"op_id": op("MPI_Allreduce"), "calls": 1, "bytes": 1 << 16,
                 "time_ns": (500 if slow else 100) * 10**6}]),
        }  # fmt: skip
        if i == 0:
            tables["rank_info"] = wire.records("rank_info", [{"command": b"./app",
                                                              "user": b"bench"}])  # fmt: skip
        out.append(wire.encode_frame(
            job_id=f"bench-inc-{job}", world_rank=rank, world_size=len(hosts), seq=i,
            host=host, pid=100 + rank, interval_start_ns=t0 + i * S,
            interval_end_ns=t0 + (i + 1) * S, token=TOKEN, tables=tables))  # fmt: skip
    return out


def _figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return {"passes": len(times), "median_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * p95, 1), "max_ms": round(1000 * ordered[-1], 1)}  # fmt: skip


def main() -> None:
    """Run the benchmark and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=512)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--sweeps", type=int, default=40)
    ap.add_argument("--congest-at", type=int, default=20)
    ap.add_argument("--congest-for", type=int, default=8)
    ap.add_argument("--errors-at", type=int, default=30)
    args = ap.parse_args()
    tree = fat_tree(args.hosts)
    topo = topology(tree)
    topo.lfts = up_down(tree, topo)
    t0 = (time.time_ns() - 3600 * S) // S * S
    # jobs: ranks spread over the leaves (rank r of job j on host (j + r * stride))
    stride = max(1, len(tree.hosts) // args.ranks)
    placed = [[tree.hosts[(j + r * stride) % len(tree.hosts)] for r in range(args.ranks)]
              for j in range(args.jobs)]  # fmt: skip
    # job 1 (8x the bytes) shares job 0's path from its rank 0's leaf to its rank 1's host
    placed[1][1] = placed[0][1]
    # the congested link: the spine -> leaf hop from job 0's rank 0 towards its rank 1
    guid = {n.description: g for g, n in topo.nodes.items()}
    hops = topo.route(guid[placed[0][0]], guid[placed[0][1]])
    spine_hop = next(h for h in hops if topo.nodes[h.tx[0]].description.startswith("spine"))
    error_end = (guid[tree.hosts[-1]], 1)
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            engine = make_engine(database.url)
            store = FabricStore(database.url)
            store.write_topology(topo, t0, [])
            tracker = DeltaTracker()
            ends = sorted(topo.ports)
            words = np.zeros((len(ends), len(PORT_COUNTERS)), dtype=np.uint64)
            rng = np.random.default_rng(11)
            data = [PORT_COUNTERS.index(c) for c in ("xmit_bytes", "rcv_bytes")]
            wait = PORT_COUNTERS.index("xmit_wait")
            symbol = PORT_COUNTERS.index("symbol_errors")
            now = [t0]
            service = IncidentService(engine, Thresholds(), clock=lambda: now[0])
            congested = range(args.congest_at, args.congest_at + args.congest_for)
            quiet: list[float] = []
            busy: list[float] = []
            events: list[Any] = []
            with BackgroundCollector(database.url, token=TOKEN) as collector:
                for i in range(args.sweeps):
                    words[:, data] += rng.integers(0, CAPACITY // 8, size=(len(ends), 2),
                                                   dtype=np.uint64)  # fmt: skip
                    if i in congested:
                        words[ends.index(spine_hop.tx), wait] += np.uint64(5_000_000)
                    if i == args.errors_at:
                        words[ends.index(error_end), symbol] += np.uint64(7)
                    store.write_samples(tracker.update(sweep(ends, words.copy(),
                                                             t0 + (i + 1) * S)))  # fmt: skip
                    batch = [
                        f
                        for j, hosts in enumerate(placed)
                        for f in frames(j, hosts, i, t0, j == 0 and i in congested)
                    ]
                    send(collector.address, batch)  # fmt: skip
                    now[0] = t0 + (i + 1) * S + 1_600_000_000
                    started = time.perf_counter()
                    messages = service.tick()
                    took = time.perf_counter() - started
                    (busy if service.stored else quiet).append(took)
                    events += [(i, m) for m in messages]
            store.close()
            engine.dispose()
        finally:
            database.stop()
    found = {}
    for i, m in events:
        incident = m["incident"]
        key = incident.get("kind")
        if m["event"] == "opened" and key not in found:
            start = args.congest_at if key == "congestion" else args.errors_at
            found[key] = {"sweep_after_start": i - start + 1,
                          "detected_after_start_s": round(
                              (incident["detected_ns"] - incident["start_ns"]) / S, 3)}  # fmt: skip
        if key == "congestion" and m["event"] in ("opened", "updated"):
            found["congestion"]["named"] = [(j["job"], j["role"], j["signals"])
                                            for j in incident["jobs"]][:4]  # fmt: skip
            if any(j["role"] == "victim" for j in incident["jobs"]):
                found["congestion"].setdefault("victim_at_sweep_after_start",
                                               i - args.congest_at + 1)  # fmt: skip
    print(json.dumps({
        "machine": platform.processor() or platform.machine(),
        "hosts": len(tree.hosts), "links": len(topo.links), "ports": len(ends),
        "jobs": args.jobs, "ranks_per_job": args.ranks, "sweeps": args.sweeps,
        "congested_link": [topo.describe(spine_hop.tx), topo.describe(spine_hop.rx)],
        "detected": found,
        "events": [(i, m["event"], m["incident"].get("kind")) for i, m in events],
        "pass_quiet": _figures(quiet), "pass_with_open_incident": _figures(busy),
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
