"""Attribution accuracy benchmark (#15 point 3): a known mix of three jobs on a simulated
fat tree, its link bytes moved by the emulator, attributed by server/traffic, compared
link by link with the emulated truth.

On a running ibsim fat tree (32 hosts + 2 storage nodes, and 512 hosts + 4 storage
nodes), the real fabric sampler discovers and sweeps the fabric into an embedded
PostgreSQL; three jobs' frames (p2p, RMA, collectives, file I/O, ranks spread over the
leaves, two ranks sharing a host) go through the real collector. The truth is built here,
independently of server/traffic: the jobs' p2p and RMA transfers, each collective's exact
step-by-step schedule (ring, recursive doubling, binomial tree, scatter + ring allgather,
pairwise, with 8-byte elements), file I/O to the storage node the simulator's layout puts
each file on (emulator.jobtraffic.storage_node), and random background noise. The
emulator (emulator/ibsim.py TrafficEmulator) moves every port's counters by exactly those
flows over the switches' forwarding tables; one sweep later the attribution reads the
stored samples, tables and frames and answers per link direction.

`other` must equal the injected noise plus the management traffic of the cycle (the
sampler's and the emulator's own MADs move the simulated counters too): that part is
measured in a control cycle before, with the same flows at 4 bytes each (the same ports
read, so the same MADs), as control measured - control flows.

Prints, per tree, the accuracy table: link directions compared, per category the exact
matches (p2p, RMA, I/O) or the largest relative error (modelled collectives, tolerance
COLL_TOLERANCE of the truth per link direction), `other` against noise + management.

    .venv/bin/python -m bench.attribution_accuracy [--trees 32 512]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from bench.jobs_page import send
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.service import BackgroundCollector
from emulator.fattree import FatTree, fat_tree
from emulator.ibsim import FabricSim, Flow, TrafficEmulator, noise_flows
from emulator.jobtraffic import storage_node
from server.app import create_app
from server.query_params import Window
from server.traffic import repository
from server.traffic.attribution import attribute
from server.traffic.repository import TrafficConfig
from stacklens import wire
from stacklens.constants import ON_LINKS
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.mpi_ops import op_names

TOKEN = "bench"
#: Largest relative error of a modelled collective's bytes on one link direction.
COLL_TOLERANCE = 0.02
ELEM = 8  # bytes of one element (a double)
NO_ROOT = 0xFFFFFFFF


@dataclass
class JobMix:
    """One job of the mix: rank -> host, and what it does in the interval."""

    key: str
    user: str
    hosts: list[str]
    p2p: dict[tuple[int, int], int]  # (rank, peer) -> bytes sent
    rma: list[tuple[int, int, str, int]]  # (origin, target, op, bytes)
    coll: list[tuple[str, int, int]]  # (op, root rank or -1, elements per rank)
    io: list[tuple[int, str, str, int, int]]  # (rank, path, mount, read, written)


def spread(hosts: list[str], n: int, start: int, stride: int) -> list[str]:
    return [hosts[(start + i * stride) % len(hosts)] for i in range(n)]


def the_mix(tree: FatTree) -> list[JobMix]:
    """Three jobs over the tree's hosts (the same shape on every tree size)."""
    h = tree.hosts
    big = len(h) > 64
    na, nb, nc = (32, 64, 8) if big else (8, 8, 4)
    a_hosts = spread(h, na, 0, 3 if not big else 13)
    b_hosts = spread(h, nb, 1, 4 if not big else 7)
    c_hosts = spread(h, nc - 1, 2, 5 if not big else 61)
    c_hosts = c_hosts[:1] + c_hosts  # ranks 0 and 1 share a host: intra-host traffic
    rng = random.Random(7)
    jobs = []
    for key, user, hosts, colls in (
        ("job-a", "alice", a_hosts, [("MPI_Allreduce", -1, 100_003), ("MPI_Bcast", 0, 1_000)]),
        (
            "job-b",
            "bob",
            b_hosts,
            [("MPI_Bcast", 3, 50_001), ("MPI_Alltoall", -1, 2_000), ("MPI_Reduce", 5, 4_096)],
        ),
        ("job-c", "alice", c_hosts, [("MPI_Allreduce", -1, 100), ("MPI_Allgather", -1, 30_001)]),
    ):
        n = len(hosts)
        p2p = {(r, (r + 1) % n): 4 * rng.randint(1, 1 << 18) for r in range(n)}
        p2p |= {(r, (r + n // 2) % n): 4 * rng.randint(1, 1 << 16) for r in range(0, n, 2)}
        rma = [(r, (r + 3) % n, "MPI_Put", 4 * rng.randint(1, 1 << 15)) for r in range(0, n, 3)]
        rma += [(r, (r + 5) % n, "MPI_Get", 4 * rng.randint(1, 1 << 15)) for r in range(1, n, 4)]
        io = [(r, f"/scratch/{key}/out.{r}", "/scratch", 4 * rng.randint(0, 1 << 16),
               4 * rng.randint(1, 1 << 18)) for r in range(n)]  # fmt: skip
        io.append((0, f"/tmp/{key}.log", "/tmp", 0, 4096))  # local: not on the fabric
        jobs.append(JobMix(key, user, hosts, p2p, rma, colls, io))
    return jobs


# ---- the truth: each collective's exact schedule (independent of server/traffic) --------


def chunks(total: int, n: int) -> list[int]:
    """`total` elements split into n chunks, the first ones one larger."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def coll_truth(op: str, n: int, root: int, count: int) -> dict[tuple[int, int], int]:
    """(comm rank, comm rank) -> bytes of one call, step by step."""
    out: dict[tuple[int, int], int] = defaultdict(int)
    if op == "MPI_Allreduce" and count * ELEM < 8192:
        p = 1 << (n.bit_length() - 1)
        for r in range(p, n):
            out[(r, r - p)] += count * ELEM
            out[(r - p, r)] += count * ELEM
        dist = 1
        while dist < p:
            for r in range(p):
                out[(r, r ^ dist)] += count * ELEM
            dist *= 2
    elif op == "MPI_Allreduce":
        c = chunks(count, n)
        for step in range(n - 1):  # reduce-scatter, then allgather
            for r in range(n):
                out[(r, (r + 1) % n)] += c[(r - step) % n] * ELEM
        for step in range(n - 1):
            for r in range(n):
                out[(r, (r + 1) % n)] += c[(r + 1 - step) % n] * ELEM
    elif op == "MPI_Bcast" and (count * ELEM < 12288 or n < 8):
        for v in range(1, n):  # binomial tree: v gets the message from its parent
            out[(((v - (v & -v)) + root) % n, (v + root) % n)] += count * ELEM
    elif op == "MPI_Bcast":
        c = chunks(count, n)  # scatter chunk i to relative rank i, then a ring allgather
        for v in range(1, n):  # binomial scatter: v gets its subtree's chunks from its parent
            low = v & -v
            parent = v - low
            sub = range(v, min(v + low, n))
            out[((parent + root) % n, (v + root) % n)] += sum(c[i] for i in sub) * ELEM
        for step in range(n - 1):
            for v in range(n):
                out[((v + root) % n, (v + 1 + root) % n)] += c[(v - step) % n] * ELEM
    elif op == "MPI_Alltoall":
        for r in range(n):
            for q in range(n):
                out[(r, q)] += count * ELEM
    elif op == "MPI_Reduce":
        for v in range(1, n):
            out[((v + root) % n, (v - (v & -v) + root) % n)] += count * ELEM
    elif op == "MPI_Allgather":
        for _step in range(n - 1):
            for r in range(n):
                out[(r, (r + 1) % n)] += count * ELEM
    return {k: v for k, v in out.items() if k[0] != k[1]}


def coll_bytes(op: str, n: int, count: int) -> int:
    """What the hooks count for one call on one rank (spec bytes= modes)."""
    return count * ELEM * (n if op == "MPI_Alltoall" else 1)


def truth_flows(jobs: list[JobMix], storage: list[str]) -> dict[tuple[str, str], list[Flow]]:
    """(job, category) -> the flows between different hosts."""
    out: dict[tuple[str, str], list[Flow]] = defaultdict(list)
    for job in jobs:
        h = job.hosts

        def flow(category: str, a: str, b: str, nbytes: int, job: JobMix = job) -> None:
            if a != b and nbytes > 0:
                out[(job.key, category)].append(Flow(a, b, nbytes, category))

        for (r, p), nbytes in job.p2p.items():
            flow("mpi_p2p", h[r], h[p], nbytes)
        for origin, target, op, nbytes in job.rma:
            a, b = (h[origin], h[target]) if op == "MPI_Put" else (h[target], h[origin])
            flow("mpi_rma", a, b, nbytes)
        for op, root, count in job.coll:
            for (r, q), nbytes in coll_truth(op, len(h), max(root, 0), count).items():
                flow("mpi_coll", h[r], h[q], nbytes)
        for rank, path, mount, nread, nwritten in job.io:
            if mount != "/scratch":
                continue
            server = storage_node(path, storage)
            flow("io", h[rank], server, nwritten)
            flow("io", server, h[rank], nread)
    return out


def frames(job: JobMix, t_start: int, t_end: int) -> list[bytes]:
    """One frame per rank holding the job's interval."""
    op = op_names().index
    n = len(job.hosts)
    out = []
    for r in range(n):
        p2p = [{"peer": p, "bytes_sent": b, "msgs_sent": 1, "bytes_recv": 0, "msgs_recv": 0}
               for (s, p), b in job.p2p.items() if s == r]  # fmt: skip
        rma = [{"target": t, "op_id": op(name), "calls": 1, "bytes": b}
               for o, t, name, b in job.rma if o == r]  # fmt: skip
        coll = [{"op_id": op(name), "comm_id": 1, "comm_size": n,
                 "root": NO_ROOT if root < 0 else root, "calls": 1,
                 "bytes": coll_bytes(name, n, count), "time_ns": 1000}
                for name, root, count in job.coll]  # fmt: skip
        io = [{"layer": 1, "opens": 1, "reads": 1, "writes": 1, "bytes_read": rd,
               "bytes_written": wr, "path": path.encode(), "mount": mount.encode(),
               "fstype": b"lustre" if mount == "/scratch" else b"tmpfs"}
              for rank, path, mount, rd, wr in job.io if rank == r]  # fmt: skip
        tables = {"p2p": wire.records("p2p", p2p), "coll": wire.records("coll", coll),
                  "io": wire.records("io", io)}  # fmt: skip
        if rma:
            tables["rma"] = wire.records("rma", rma)
        tables["rank_info"] = wire.records(
            "rank_info", [{"command": b"./mix", "user": job.user.encode()}]
        )
        out.append(wire.encode_frame(
            job_id=job.key, world_rank=r, world_size=n, seq=0, host=job.hosts[r],
            pid=1000 + r, interval_start_ns=t_start, interval_end_ns=t_end, token=TOKEN,
            tables=tables,
        ))  # fmt: skip
    return out


# ---- one tree ---------------------------------------------------------------------------


def link_of_port(url: str) -> dict[tuple[int, int], tuple[int, str]]:
    """(GUID, port) of a sending end -> (link id, direction)."""

    out = {}
    with psycopg.connect(url) as conn:
        for lid, ag, ap, bg, bp in conn.execute(
            "SELECT id, a_guid, a_port, b_guid, b_port FROM fabric_links WHERE down_ns IS NULL"
        ):
            out[(ag & (2**64 - 1), ap)] = (lid, "a_to_b")
            out[(bg & (2**64 - 1), bp)] = (lid, "b_to_a")
    return out


def latest_ts(url: str) -> int:

    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT max(ts_ns) FROM fabric_port_samples").fetchone()[0])


def per_link(emu: TrafficEmulator, flows: list[Flow], ports: dict) -> dict[tuple[int, str], int]:
    """Bytes the emulator put on each link direction for these flows (the sending end)."""
    out: dict[tuple[int, str], int] = defaultdict(int)
    for end, move in emu.port_moves(flows).items():
        if move[0]:
            out[ports[end]] += move[0]
    return out


def run_tree(hosts: int, storage: int, scratch: Path, paths: str = "fixed") -> dict[str, Any]:
    """Build, emulate, attribute and compare on one tree; the accuracy figures."""
    tree = fat_tree(hosts, storage=storage)
    database = start_embedded(scratch / f"pg{hosts}")
    migrate(database.url)
    url = database.url
    sim = FabricSim(tree, scratch / f"ibsim{hosts}")
    sim.start()
    mad = MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1)
    try:
        return measure(tree, url, sim, mad, paths)
    finally:
        mad.close()
        sim.stop()
        database.stop()


def measure(tree: FatTree, url: str, sim: FabricSim, mad: MadSource, paths: str
            ) -> dict[str, Any]:  # fmt: skip
    """On a running simulator of `tree` and a migrated database: sample, run the control
    and the real cycle, attribute and compare; the accuracy figures, the window and the
    truth per link direction ((job, category) -> link direction -> bytes)."""
    sampler = FabricSampler(url, mad, interval_s=1.0, rediscover_s=3600)
    sampler.step()
    topo = sampler.topology
    assert topo is not None
    emu = TrafficEmulator(sim, mad, topo)
    ports = link_of_port(url)
    jobs = the_mix(tree)
    truth = truth_flows(jobs, tree.storage)
    noise = noise_flows(tree.hcas, 4 * len(tree.hcas), 1 << 20, random.Random(11))
    everything = [f for fl in truth.values() for f in fl] + noise
    sampler.step()
    # control cycle: the same flows at 4 bytes each (the same ports read, the same MADs)
    control = [Flow(f.src, f.dst, 4, f.kind) for f in everything]
    emu.apply(control)
    sampler.step()
    t_control = latest_ts(url)
    control_moved = per_link(emu, control, ports)

    def measured_in(lo: int, hi: int) -> dict[tuple[int, str], int]:
        out = {}
        with psycopg.connect(url) as conn:
            for g, p, b in conn.execute(
                "SELECT p.guid, p.port, s.d_xmit_bytes FROM fabric_port_samples s"
                " JOIN fabric_ports p ON p.id = s.port_id WHERE s.ts_ns >= %s AND s.ts_ns < %s",
                (lo, hi),
            ):
                end = (g & (2**64 - 1), p)
                if end in ports and b is not None:
                    out[ports[end]] = int(b)
        return out

    management = {
        c: m - control_moved.get(c, 0) for c, m in measured_in(t_control, t_control + 1).items()
    }
    # the real cycle: the jobs' frames (interval ending inside it) and their flows
    t0 = time.time_ns()
    with BackgroundCollector(url, token=TOKEN) as collector:
        send(collector.address, [f for job in jobs for f in frames(job, t0 - 10**9, t0)])
    emu.apply(everything)
    sampler.step()
    t_real = latest_ts(url)
    window = Window(t_control + 1, t_real + 1)
    config = TrafficConfig(paths, {"/scratch": list(tree.storage)}, "file-hash")
    engine = make_engine(url)
    started = time.perf_counter()
    with Session(engine) as session:
        fab = repository.load_fabric(session, config.paths)
        meas = repository.measured(session, fab, window)
        traffic = repository.job_traffic(session, window, config)
        hcas = repository.rails_of(session, fab, traffic.hosts)
        known = {c: m["bytes"] for c, m in meas.items()}
        result = attribute(fab.router, traffic.transfers, hcas, known)
        for reason, nbytes in traffic.left_out.items():
            result.left_out[reason] += nbytes
    with psycopg.connect(url) as conn:
        keys = {int(i): k for i, k in conn.execute("SELECT id, job_key FROM jobs")}
    took = time.perf_counter() - started
    api = _api_times(engine, config, window, sorted(known, key=lambda c: -(known[c] or 0)))
    engine.dispose()
    noise_on = per_link(emu, noise, ports)
    rows = _compare(truth, result, keys, emu, ports, known, noise_on, management, traffic,
                    took, tree, paths)  # fmt: skip
    rows["window"] = window
    rows["api"] = api
    rows["truth_on"] = {k: per_link(emu, fl, ports) for k, fl in truth.items()}
    rows["noise_on"], rows["management"] = noise_on, management
    return rows


def _api_times(engine: Any, config: TrafficConfig, window: Window, busiest: list
               ) -> tuple[float, float]:  # fmt: skip
    """Seconds of GET /api/fabric/links/{link}/attribution in-process: the busiest link
    first (the window attributed), then the median over the next ten (from the cache)."""
    app = create_app(engine, traffic=config)
    assert window.from_ns is not None and window.to_ns is not None
    params = {"from": f"{window.from_ns // 10**9}.{window.from_ns % 10**9:09d}",
              "to": f"{window.to_ns // 10**9}.{window.to_ns % 10**9:09d}"}  # fmt: skip
    times = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for link, _ in busiest[:11]:
            started = time.perf_counter()
            client.get(f"/api/fabric/links/{link}/attribution", params=params).raise_for_status()
            times.append(time.perf_counter() - started)
    return times[0], statistics.median(times[1:])


def _compare(truth, result, keys, emu, ports, known, noise_on, management, traffic, took,
             tree, paths) -> dict[str, Any]:  # fmt: skip
    truth_on = {k: per_link(emu, fl, ports) for k, fl in truth.items()}
    attributed: dict[tuple[str, str], dict[tuple[int, str], float]] = defaultdict(dict)
    for crossing, shares in result.shares.items():
        for (job, category, _prov, _path), nbytes in shares.items():
            d = attributed[(keys[job], category)]
            d[crossing] = d.get(crossing, 0) + nbytes
    rows: dict[str, Any] = {"links": len(known), "paths": paths, "seconds": took,
                            "left_out": dict(result.left_out)}  # fmt: skip
    groups = _groups(tree, ports, emu, paths) if paths != "fixed" else None
    for category in ON_LINKS:
        compared = exact = 0
        worst = 0.0
        truth_bytes = attr_bytes = 0.0
        for job in ("job-a", "job-b", "job-c"):
            t, a = truth_on.get((job, category), {}), attributed.get((job, category), {})
            if groups is not None:
                t, a = _by_group(t, groups), _by_group(a, groups)
            for c in set(t) | set(a):
                compared += 1
                tv, av = t.get(c, 0), a.get(c, 0)
                truth_bytes += tv
                attr_bytes += av
                exact += abs(tv - av) < 1e-6 * max(1, tv)
                err = abs(av - tv) / tv if tv else float(av != 0)
                worst = max(worst, err)
        rows[category] = {"compared": compared, "exact": exact, "worst": worst,
                       "truth": truth_bytes, "attributed": attr_bytes}  # fmt: skip
    compared = exact = explained = 0
    worst_abs = 0.0
    for c, m in known.items():
        if m is None or c not in management:
            continue
        o = m - result.attributed(c)
        want = noise_on.get(c, 0) + management[c]
        if groups is not None:
            continue
        compared += 1
        exact += abs(o - want) < 1e-6
        worst_abs = max(worst_abs, abs(o - want))
        # where not exact, the difference is the modelled collectives' error on the link
        model_error = sum(truth_on.get((j, "mpi_coll"), {}).get(c, 0)
                          - attributed.get((j, "mpi_coll"), {}).get(c, 0)
                          for j in ("job-a", "job-b", "job-c"))  # fmt: skip
        explained += abs(o - want - model_error) < 1e-6
    if groups is not None:  # per group: other summed over its links
        o_sum: dict[Any, float] = defaultdict(float)
        w_sum: dict[Any, float] = defaultdict(float)
        for c, m in known.items():
            if m is None or c not in management:
                continue
            g = groups.get(c, c)
            o_sum[g] += m - result.attributed(c)
            w_sum[g] += noise_on.get(c, 0) + management[c]
        for g in o_sum:
            compared += 1
            exact += abs(o_sum[g] - w_sum[g]) < 1e-3
            worst_abs = max(worst_abs, abs(o_sum[g] - w_sum[g]))
    rows["other"] = {"compared": compared, "exact": exact, "worst_abs": worst_abs,
                     "explained": explained,
                     "management_max": max(management.values(), default=0),
                     "noise": sum(noise_on.values())}  # fmt: skip
    return rows


def _groups(tree: FatTree, ports: dict, emu: TrafficEmulator, paths: str
            ) -> dict[tuple[int, str], Any]:  # fmt: skip
    """Link direction -> the group the attribution assigns flows to: `parallel`, the links
    from one node to another; `adaptive`, a leaf's up links, the down links into a leaf
    (the stages of a two-level tree's minimal paths); a host link is a group of its own."""
    leaves = {emu.topology.node(name).guid for name in tree.leaves}
    spines = {emu.topology.node(name).guid for name in tree.spines}
    out: dict[tuple[int, str], Any] = {}
    for (g, p), (lid, d) in ports.items():
        far = emu.topology.remote((g, p))
        there = far[0] if far else None
        if paths == "adaptive" and g in leaves and there in spines:
            out[(lid, d)] = ("up", g)
        elif paths == "adaptive" and g in spines and there in leaves:
            out[(lid, d)] = ("down", there)
        else:
            out[(lid, d)] = (g, there)
    return out


def _by_group(values: dict, groups: dict) -> dict:
    out: dict[Any, float] = defaultdict(float)
    for c, v in values.items():
        out[groups.get(c, c)] += v
    return dict(out)


def table(name: str, rows: dict[str, Any]) -> str:
    """The accuracy table of one tree, as Markdown."""
    unit = {"fixed": "link directions", "parallel": "parallel-link groups",
            "adaptive": "adaptive stage groups"}[rows["paths"]]  # fmt: skip
    lines = [f"**{name}** ({rows['links']} measured link directions; paths `{rows['paths']}`; "
             f"compared per {unit}; attribution {rows['seconds']:.2f} s)", "",
             "| category | compared | exact | largest error | truth bytes | attributed bytes |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for category in ON_LINKS:
        r = rows[category]
        lines.append(f"| {category} | {r['compared']} | {r['exact']} | {r['worst']:.2e} | "
                     f"{r['truth']:,.0f} | {r['attributed']:,.0f} |")  # fmt: skip
    o = rows["other"]
    lines.append(f"| other = noise + management | {o['compared']} | {o['exact']} | "
                 f"{o['worst_abs']:.0f} B | noise {o['noise']:,} | largest management "
                 f"{o['management_max']:,} B |")  # fmt: skip
    lines.append("")
    if rows["paths"] == "fixed":
        lines.append(
            f"`other` - (noise + management) = the modelled collectives' error on the "
            f"link (truth - attributed) on {o['explained']} of {o['compared']} link "
            "directions."
        )
    lines.append(f"left out (bytes): {rows['left_out']}")
    cold, warm = rows["api"]
    lines.append(
        f"GET /api/fabric/links/{{link}}/attribution: {cold * 1e3:.0f} ms for the "
        f"first link of the window, {warm * 1e3:.1f} ms (median) for the next ten"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--paths", choices=("fixed", "parallel", "adaptive"), default="fixed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        for hosts in args.trees:
            storage = 2 if hosts <= 64 else 4
            rows = run_tree(hosts, storage, Path(scratch), args.paths)
            print(table(f"{hosts} hosts + {storage} storage nodes", rows))
            print()


if __name__ == "__main__":
    main()
