"""Communicator families benchmark (issue #27 point 4): programs of known structure under
Open MPI and MPICH, their families as stacklens reports them against what the programs do,
on the simulated 32-host fat tree, and what the two families routes cost.

Programs (each rank on a simulated host, STACKLENS_HOST; MPMD):

- `mpi_pmpi_hooks/tests/families.c`, 8 ranks, two per host on host01, host02 (leaf01) and
  host09, host10 (leaf02): a 2×4 Cartesian grid, its rows (10 ring allreduces of 8 KiB)
  and columns (5 allreduces of 512 B), a node split (3 allreduces of 64 B), a cross split
  (2 broadcasts of 256 B), a pipeline "pp" (a named dup, 4 × 1000 B from stage to stage),
  one 8-byte world allreduce;
- `tests/hooks/data_parallel.py` (mpi4py), 4 ranks, two per host on host01 and host09:
  "tp" pairs in a host (6 allreduces of 8 KiB), "dp" pairs across the spine (6 of 16 KiB),
  the world (6 of 8 B).

The truth is built here from the programs' structure (`families_flows`, `dp_flows`):
per family the calls and bytes by op, the rank-to-rank bytes (collectives as the model's
algorithm moves them: ring for the rows, recursive doubling for the small allreduces, a
binomial tree for the broadcasts), placed on hosts and on the route the forwarding tables
give (collector/fabric/topology.Topology.route over the LFTs the real sampler read).
Compared: per family its calls and bytes by op, its bytes in a host / across a leaf /
across the spine (GET /api/jobs/{job}/families), and per link direction its bytes (GET
/api/jobs/{job}/families/links); timed: both routes in-process (TestClient, JSON
included), the median of ROUNDS requests after one.

    .venv/bin/python -m bench.families [--rounds 20]

The short form is tests/fabric/test_family_links.py (families.c, both MPIs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.fabric.topology import Topology
from collector.service import BackgroundCollector
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim
from server.app import create_app
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.paths import HOOKS_DIR, LIBRARIES, SOURCE_ROOT
from stacklens_cli.attach import OPENMPI_ROOT_ENV

TOKEN = "bench"
#: Rank-to-rank bytes per family: label -> (source world rank, destination) -> bytes.
Flows = dict[str, dict[tuple[int, int], int]]
#: Per family, its calls and bytes by op: label -> op -> (calls, bytes).
Ops = dict[str, dict[str, tuple[int, int]]]

FAMILIES_C = HOOKS_DIR / "tests" / "families.c"
DATA_PARALLEL = SOURCE_ROOT / "tests" / "hooks" / "data_parallel.py"
#: The simulated hosts of each program, two ranks per host in rank order.
FAMILIES_HOSTS = ("host01", "host02", "host09", "host10")
DP_HOSTS = ("host01", "host09")
#: The test programs' builds per MPI.
PROGRAMS = {"openmpi": HOOKS_DIR / "tests" / "build", "mpich": HOOKS_DIR / "tests" / "build-mpich"}


def _line(text: str) -> int:
    """The line of families.c holding `text` (a split's call: its label names the line)."""
    (line,) = [i + 1 for i, s in enumerate(FAMILIES_C.read_text().splitlines()) if text in s]
    return line


def split_labels() -> tuple[str, str]:
    """The labels of families.c's node and cross splits."""
    return (f"split at families.c:{_line('rank / 4, rank, &node')}, 2 groups of 4",
            f"split at families.c:{_line('rank % 4, -rank, &cross')}, 4 groups of 2")  # fmt: skip


def families_flows() -> Flows:
    """families.c's rank-to-rank bytes per family over the run (its header comment)."""
    node, cross = split_labels()
    out: dict[str, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
    for ring in ([0, 1, 2, 3], [4, 5, 6, 7]):  # the grid's rows; the node split's groups
        for i, rank in enumerate(ring):
            # rows: 10 ring allreduces of 8 KiB: 2 (n - 1) / n of it to the next rank
            out["cart 2×4 dim 1 kept"][(rank, ring[(i + 1) % 4])] += 10 * 2 * 3 * 8192 // 4
            for partner in (i ^ 1, i ^ 2):  # node: 3 recursive-doubling allreduces of 64 B
                out[node][(rank, ring[partner])] += 3 * 64
    for col in range(4):
        # columns: 5 recursive-doubling allreduces of 512 B between col and col + 4
        out["cart 2×4 dim 0 kept"][(col, col + 4)] += 5 * 512
        out["cart 2×4 dim 0 kept"][(col + 4, col)] += 5 * 512
        out[cross][(col + 4, col)] += 2 * 256  # cross: 2 broadcasts of 256 B from col + 4
    for rank in range(8):
        for partner in (rank ^ 1, rank ^ 2, rank ^ 4):  # world: 1 allreduce of 8 B
            out["world"][(rank, partner)] += 8
    for stage in range(7):  # pp: 4 messages of 1000 B to the next stage
        out["pp"][(stage, stage + 1)] += 4000
    return {label: dict(pairs) for label, pairs in out.items()}


def families_ops() -> Ops:
    """families.c's calls and bytes by op per family (every rank's calls summed)."""
    node, cross = split_labels()
    return {
        "cart 2×4 dim 1 kept": {"MPI_Allreduce": (80, 80 * 8192)},
        "cart 2×4 dim 0 kept": {"MPI_Allreduce": (40, 40 * 512)},
        "cart 2×4": {},
        node: {"MPI_Allreduce": (24, 24 * 64)},
        cross: {"MPI_Bcast": (16, 16 * 256)},
        "pp": {"MPI_Send": (28, 28_000), "MPI_Recv": (28, 28_000)},
        "world": {"MPI_Allreduce": (8, 64)},
    }


def dp_flows() -> Flows:
    """data_parallel.py's rank-to-rank bytes per family: pairs exchange whole buffers."""
    out: dict[str, dict[tuple[int, int], int]] = defaultdict(dict)
    for a, b in ((0, 1), (2, 3)):
        out["tp"] |= {(a, b): 6 * 8192, (b, a): 6 * 8192}
    for a, b in ((0, 2), (1, 3)):
        out["dp"] |= {(a, b): 6 * 16384, (b, a): 6 * 16384}
    out["world"] = {(r, r ^ p): 6 * 8 for r in range(4) for p in (1, 2)}
    return dict(out)


def dp_ops(mpi: str) -> Ops:
    """data_parallel.py's calls and bytes per family (mpi4py calls MPI_Allreduce_c under
    MPICH)."""
    op = "MPI_Allreduce_c" if mpi == "mpich" else "MPI_Allreduce"
    return {"tp": {op: (24, 24 * 8192)}, "dp": {op: (24, 24 * 16384)},
            "world": {op: (24, 24 * 8)}}  # fmt: skip


def provenance(label: str) -> str:
    """How a family's bytes are known: the pipeline's messages routed, collectives modelled."""
    return "routed" if label == "pp" else "modelled"


def expected_reach(flows: Flows, hosts: tuple[str, ...], topo: Topology
                   ) -> dict[str, dict[tuple[str, str], int]]:  # fmt: skip
    """Per family, its bytes by (reach, provenance): in a host, across a leaf (a route of
    two links), across the spine (four)."""
    out: dict[str, dict[tuple[str, str], int]] = {}
    for label, pairs in flows.items():
        by: dict[tuple[str, str], int] = defaultdict(int)
        for (src, dst), nbytes in pairs.items():
            a, b = hosts[src // 2], hosts[dst // 2]
            hops = 0 if a == b else len(topo.route(topo.node(a).guid, topo.node(b).guid))
            by[({0: "host", 2: "leaf", 4: "spine"}[hops], provenance(label))] += nbytes
        out[label] = dict(by)
    return out


def expected_links(flows: Flows, hosts: tuple[str, ...], topo: Topology
                   ) -> dict[tuple, dict[tuple[str, str], int]]:  # fmt: skip
    """Per link direction ((tx end), (rx end)), each family's bytes by provenance: its
    rank-to-rank bytes on every hop of the route between their hosts."""
    out: dict[tuple, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for label, pairs in flows.items():
        for (src, dst), nbytes in pairs.items():
            a, b = hosts[src // 2], hosts[dst // 2]
            if a != b:
                for hop in topo.route(topo.node(a).guid, topo.node(b).guid):
                    out[(hop.tx, hop.rx)][(label, provenance(label))] += nbytes
    return {k: dict(v) for k, v in out.items()}


def answered_links(answer: dict[str, Any]) -> dict[tuple, dict[tuple[str, str], float]]:
    """GET /families/links' link directions as expected_links keys them."""
    out = {}
    for lk in answer["links"]:
        a = (int(lk["a"]["guid"], 16), lk["a"]["port"])
        b = (int(lk["b"]["guid"], 16), lk["b"]["port"])
        tx, rx = (a, b) if lk["direction"] == "a_to_b" else (b, a)
        out[(tx, rx)] = {(f["label"], f["provenance"]): f["bytes"] for f in lk["families"]}
    return out


def launch(mpi: str, argv: list[str], hosts: tuple[str, ...], endpoint: str, job: str,
           abi_dir: Path) -> None:  # fmt: skip
    """argv on two ranks per host under the hooks and `mpi`; fails on a failed run."""
    env = {**os.environ, **OPENMPI_ROOT_ENV, "LD_PRELOAD": str(LIBRARIES[mpi]),
           "STACKLENS_SPOOL_DIR": "off", "STACKLENS_COLLECTOR": endpoint,
           "STACKLENS_COLLECTOR_SOCKET": "off",  # not a `stacklens up` running here
           "STACKLENS_INGEST_TOKEN": TOKEN, "STACKLENS_INGEST_AUTH": "trusted",
           "STACKLENS_INTERVAL_MS": "100", "STACKLENS_JOB_ID": job}  # fmt: skip
    cmd = ["mpirun"] if mpi == "openmpi" else ["mpirun.mpich", "-genvall"]
    if mpi == "mpich":
        env |= {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi_dir)}
    for i, host in enumerate(hosts):
        place = ["-x", f"STACKLENS_HOST={host}"] if mpi == "openmpi" else [
            "-env", "STACKLENS_HOST", host]  # fmt: skip
        cmd += ([":"] if i else []) + ["-np", "2", *place, *argv]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def compare(client: TestClient, job: str, ops: Ops, flows: Flows, hosts: tuple[str, ...],
            topo: Topology, rounds: int) -> dict[str, Any]:  # fmt: skip
    """One run's figures: families, ops, reach and link directions compared and exact;
    the routes' median time (ms)."""
    fams = client.get(f"/api/jobs/{job}/families").json()["families"]
    got_ops = {f["label"]: {o["op"]: (o["calls"], o["bytes"]) for o in f["ops"]} for f in fams}
    reach = {f["label"]: {(r["reach"], r["provenance"]): r["bytes"] for r in f["reach"]}
             for f in fams}  # fmt: skip
    want_reach: dict[str, dict[tuple[str, str], int]] = {label: {} for label in ops}
    want_reach |= expected_reach(flows, hosts, topo)
    links = answered_links(client.get(f"/api/jobs/{job}/families/links?limit=1000").json())
    want_links = expected_links(flows, hosts, topo)
    times = {}
    for route in ("families", "families/links"):
        client.get(f"/api/jobs/{job}/{route}")
        spent = []
        for _ in range(rounds):
            t = time.perf_counter()
            client.get(f"/api/jobs/{job}/{route}")
            spent.append((time.perf_counter() - t) * 1000)
        times[route] = statistics.median(spent)
    return {
        "families": (sum(got_ops.get(k) == v for k, v in ops.items()), len(ops), len(got_ops)),
        "reach": (sum(reach.get(k) == v for k, v in want_reach.items()), len(want_reach)),
        "links": (
            sum(links.get(k) == v for k, v in want_links.items()),
            len(want_links),
            len(links),
        ),  # fmt: skip
        "on_links": sum(sum(v.values()) for v in links.values()),
        "want_on_links": sum(sum(v.values()) for v in want_links.values()),
        "ms": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    tree = fat_tree(32, storage=2)
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        sim = FabricSim(tree, Path(scratch) / "ibsim")
        sim.start()
        mad = MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1)
        abi = Path(scratch) / "abi"
        abi.mkdir()
        (abi / "libmpi.so.12").symlink_to("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
        engine = make_engine(database.url)
        try:
            sampler = FabricSampler(database.url, mad, interval_s=1.0, rediscover_s=3600)
            sampler.step()
            sampler.store.close()
            topo = sampler.topology
            assert topo is not None
            print(
                "| program | MPI | families exact | reach exact | link directions exact "
                "| bytes on links / routes | /families ms | /families/links ms |"
            )
            print("|---|---|---|---|---|---|---|---|")
            with BackgroundCollector(database.url, token=TOKEN) as collector, TestClient(
                create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1"
            ) as client:  # fmt: skip
                for mpi in ("openmpi", "mpich"):
                    runs = [("families.c", [str(PROGRAMS[mpi] / "families")], FAMILIES_HOSTS,
                             families_ops(), families_flows()),
                            ("data_parallel.py", [sys.executable, str(DATA_PARALLEL)], DP_HOSTS,
                             dp_ops(mpi), dp_flows())]  # fmt: skip
                    for name, argv, hosts, ops, flows in runs:
                        job = f"bench-families-{mpi}-{uuid.uuid4().hex[:6]}"
                        launch(mpi, argv, hosts, collector.endpoint, job, abi)
                        r = compare(client, job, ops, flows, hosts, topo, args.rounds)
                        print(f"| {name} | {mpi} | {r['families'][0]}/{r['families'][1]} "
                              f"(of {r['families'][2]} reported) | {r['reach'][0]}/"
                              f"{r['reach'][1]} | {r['links'][0]}/{r['links'][1]} (of "
                              f"{r['links'][2]} answered) | {r['on_links']:,.0f} / "
                              f"{r['want_on_links']:,} | {r['ms']['families']:.1f} | "
                              f"{r['ms']['families/links']:.1f} |", flush=True)  # fmt: skip
        finally:
            engine.dispose()
            mad.close()
            sim.stop()
            database.stop()


if __name__ == "__main__":
    main()
