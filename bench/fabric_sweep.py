"""Fabric sweep benchmark: stacklens' MAD sweep vs a serial `perfquery -x` loop, one run.

Starts ibsim on the largest fat tree the simulator allows (ibsim: 2048 nodes, 256
switches; default 1792 hosts on 112 leaves and 16 spines, 7168 connected ports), brings it
up with opensm, then times full sweeps of every connected port through stacklens'
MadSource, once per worker count in --workers (default: 1 and the default count,
min(4, CPU count)), and one serial loop of `perfquery -x <lid> <port>` processes over the
same ports. With --probes N, each worker count is also timed with the PortInfo state of N
switch ports probed in the same sweeps (what the sampler adds while N link ends are down).

    .venv/bin/python -m bench.fabric_sweep [--hosts 1792 --sweeps 5 --workers 1 2
                                            --perfquery-ports N --probes 0 64]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from collector.fabric.mad import MadSource, default_sweep_workers
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim


def perfquery_loop(sim: FabricSim, targets: list[tuple[int, int, int]]) -> float:
    """Seconds for one serial `perfquery -x` process per target."""
    env = {**os.environ, **sim.client_env()}
    t0 = time.perf_counter()
    for _, port, lid in targets:
        subprocess.run(
            ["timeout", "-s", "KILL", "10", "perfquery", "-x", str(lid), str(port)],
            env=env,
            cwd=sim.workdir,
            stdout=subprocess.DEVNULL,
            check=True,
        )
    return time.perf_counter() - t0


def main() -> None:
    """Run the benchmark and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=1792)
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument(
        "--perfquery-ports", type=int, default=0, help="0 = every port (the full serial loop)"
    )
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=sorted({1, default_sweep_workers()}),
        help="sweep worker counts to time, each with its own MadSource",
    )
    ap.add_argument(
        "--probes",
        type=int,
        nargs="+",
        default=[0],
        help="switch ports whose state each sweep also probes (one timing per count)",
    )
    args = ap.parse_args()
    tree = fat_tree(args.hosts)
    by_workers: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as tmp:
        t0 = time.perf_counter()
        with FabricSim(tree, Path(tmp)) as sim:
            up_s = time.perf_counter() - t0
            for k in args.workers:
                with MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=k) as src:
                    t0 = time.perf_counter()
                    topo = src.discover()
                    discover_s = time.perf_counter() - t0
                    targets = topo.sweep_targets()
                    switch_ports = [t for t in targets if t[0] in topo.lfts]
                    src.sweep(targets)  # warm-up (workers start, MAD ports open)
                    by_probes: dict[int, Any] = {}
                    for n in args.probes:
                        probes = switch_ports[:n]
                        times = []
                        for _ in range(args.sweeps):
                            t0 = time.perf_counter()
                            sweep = src.sweep(targets, probes)
                            times.append(time.perf_counter() - t0)
                            assert len(sweep) == len(targets), "some ports did not answer"
                            assert len(sweep.port_states) == n, "some probes did not answer"
                        by_probes[n] = {
                            "sweep_s_median": round(statistics.median(times), 4),
                            "sweep_s_all": [round(t, 4) for t in times],
                        }
                    by_workers[k] = {
                        "workers_used": len(set(src.last_sweep_pids)),
                        "discover_s": round(discover_s, 3),
                        **by_probes[args.probes[0]],
                        "by_probes": by_probes,
                    }
            loop_targets = targets[: args.perfquery_ports] if args.perfquery_ports else targets
            loop_s = perfquery_loop(sim, loop_targets)
            loop_full_s = loop_s * len(targets) / len(loop_targets)
    for figures in by_workers.values():
        figures["speedup_vs_perfquery"] = round(loop_full_s / figures["sweep_s_median"], 1)
    print(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d"),
                "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
                "hosts": len(tree.hcas),
                "switches": len(tree.switches),
                "nodes_discovered": len(topo.nodes),
                "links": len(topo.links),
                "ports": len(targets),
                "sim_up_s": round(up_s, 3),
                "stacklens_sweep_by_workers": by_workers,
                "perfquery_ports_timed": len(loop_targets),
                "perfquery_loop_s": round(loop_s, 2),
                "perfquery_full_loop_s": round(loop_full_s, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
