"""List routes benchmark: every list answer's size and p95 with 10 clients at once, one run.

Writes the largest fat tree of bench/fabric_api.py (default 1,792 hosts: 3,584 links,
7,168 ports) with --sweeps sweeps through the real FabricStore, and --jobs jobs of --ranks
ranks through the real collector (bench/jobs_page.py: point-to-point traffic to every
other rank, operations, a collective, sizes, a file), then serves the app in a child
process (uvicorn, as `stacklens up` does). Then, for each --accept-encoding in turn (br,
gzip, identity: the three compared in one run over the same data and server), has
--clients clients (threads, one HTTP connection each, sending that Accept-Encoding) ask
every list route's default page in turn, --rounds times each, all at once. Before that,
one client alone asks each route --cpu-requests times: the CPU time of each process over
those requests (`cpu_by_pid`: the server's, less what the idle server spends in as long,
its sweep watcher; and PostgreSQL's, its processes added up), per request: a cost that
other load on the machine does not inflate as it does the latencies. Prints per encoding
and route: rows in the page, bytes of the JSON body, bytes on the wire and the coding the
server chose, server and database CPU ms per request, p50 and p95 over every client's
requests (with the load average); then whether every answer over 1 KiB was compressed and
the worst p95; last, per route, the bytes on the wire and the p95 of each encoding side by
side.

    .venv/bin/python -m bench.list_routes [--hosts 1792 --jobs 200 --clients 10 --rounds 10
                                           --accept-encoding br gzip identity]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.fabric_api import fill
from bench.fabric_viewers import cpu_by_pid, cpu_used, postgres_pids, served
from bench.jobs_page import seed_jobs
from emulator.fattree import fat_tree
from stacklens.db import migrate, start_embedded

#: Answers of at least this many bytes must be compressed (server/compression.py).
COMPRESS_FROM = 1024
#: The encodings compared (each sent alone as the request's Accept-Encoding).
ENCODINGS = ("br", "gzip", "identity")


def routes(job: str) -> dict[str, str]:
    """Every list route, default page (name -> path), about `job` where it takes one."""
    return {
        "jobs": "/api/jobs",
        "fabric links": "/api/fabric/links",
        "fabric links, no samples": "/api/fabric/links?samples=false",
        "fabric events": "/api/fabric/events",
        "fabric groups": "/api/fabric/groups",
        "incidents": "/api/incidents",
        "job ranks": f"/api/jobs/{job}/ranks",
        "job matrix (pairs)": f"/api/jobs/{job}/matrix",
        "job files": f"/api/jobs/{job}/io",
        "job links": f"/api/jobs/{job}/links",
        "job families": f"/api/jobs/{job}/families",
        "job family links": f"/api/jobs/{job}/families/links",
    }


def rows_of(body: object) -> int:
    """Rows of a list answer: the length of its longest list (its page)."""
    if isinstance(body, list):
        return len(body)
    if isinstance(body, dict):
        return max([rows_of(v) if isinstance(v, list) else 0 for v in body.values()] or [0])
    return 0


def client(base: str, paths: list[str], rounds: int, encoding: str, start: threading.Barrier,
           times: dict[str, list[float]]) -> None:  # fmt: skip
    """One client: every path in turn, `rounds` times, on one connection."""
    with httpx.Client(base_url=base, headers={"Accept-Encoding": encoding}, timeout=120) as http:
        start.wait()
        for r in range(rounds):
            for path in paths[r % len(paths) :] + paths[: r % len(paths)]:
                t0 = time.perf_counter()
                response = http.get(path)
                times[path].append(time.perf_counter() - t0)
                assert response.status_code == 200, (path, response.status_code, response.text)


def cpu_per_request(base: str, paths: list[str], requests: int, encoding: str, server: int,
                    data_dir: Path) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Per path: (server, PostgreSQL) CPU ms per request of one client asking it `requests`
    times in a row with `encoding` (after one unmeasured request), from `cpu_by_pid` of the
    server's process and of the database's (the processes alive before and after), the
    server's less the idle server's CPU rate over the same wall time (measured first, over
    one second)."""
    pg = postgres_pids(data_dir)  # with the server's connections open
    c0, t0 = cpu_by_pid([server]), time.monotonic()
    time.sleep(1.0)
    idle_rate = cpu_used(c0, cpu_by_pid([server])) / (time.monotonic() - t0)
    costs = {}
    with httpx.Client(base_url=base, headers={"Accept-Encoding": encoding}, timeout=120) as http:
        for path in paths:
            assert http.get(path).status_code == 200, path
            c0, p0, t0 = cpu_by_pid([server]), cpu_by_pid(pg), time.monotonic()
            for _ in range(requests):
                http.get(path)
            app = cpu_used(c0, cpu_by_pid([server])) - idle_rate * (time.monotonic() - t0)
            costs[path] = (max(app, 0.0) * 1000 / requests,
                           cpu_used(p0, cpu_by_pid(pg)) * 1000 / requests)  # fmt: skip
    return costs


def measure(base: str, paths: list[str], args: argparse.Namespace, encoding: str, server: int,
            data_dir: Path) -> dict[str, object]:  # fmt: skip
    """One encoding's pass: each answer's size, the CPU per request of one client, then the
    clients at once; with the load averages."""
    sizes = {}
    for path in paths:  # each answer once, plain and as this encoding asks
        plain = httpx.get(base + path, headers={"Accept-Encoding": "identity"}, timeout=120)
        coded = httpx.get(base + path, headers={"Accept-Encoding": encoding}, timeout=120)
        assert plain.status_code == coded.status_code == 200, (path, plain.text)
        sizes[path] = (rows_of(plain.json()), len(plain.content), coded.num_bytes_downloaded,
                       coded.headers.get("content-encoding", "-"))  # fmt: skip
    load_cpu = os.getloadavg()
    costs = cpu_per_request(base, paths, args.cpu_requests, encoding, server, data_dir)
    times: dict[str, list[float]] = {p: [] for p in paths}
    start = threading.Barrier(args.clients)
    threads = [
        threading.Thread(target=client, args=(base, paths, args.rounds, encoding, start, times))
        for _ in range(args.clients)
    ]
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    return {"sizes": sizes, "costs": costs, "times": times, "wall": wall,
            "load_cpu": load_cpu, "load": os.getloadavg()}  # fmt: skip


def report(named: dict[str, str], args: argparse.Namespace, encoding: str,
           found: dict[str, Any]) -> dict[str, tuple[int, float]]:  # fmt: skip
    """Print one encoding's pass; per path its bytes on the wire and p95 ms."""
    load_cpu, load = found["load_cpu"], found["load"]
    print(f"\nAccept-Encoding: {encoding}")
    print(f"one client, {args.cpu_requests} requests a route: CPU per request; load average "
          f"{load_cpu[0]:.1f} {load_cpu[1]:.1f} {load_cpu[2]:.1f}")  # fmt: skip
    print(f"{args.clients} clients at once, {args.rounds} rounds of {len(named)} routes in "
          f"{found['wall']:.1f} s; load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}")  # fmt: skip
    print(f"{'route (default page)':<26} {'rows':>5} {'JSON B':>10} {'wire B':>9} {'enc':>8} "
          f"{'app ms':>7} {'db ms':>6} {'p50 ms':>7} {'p95 ms':>7}")  # fmt: skip
    worst, unpacked, summary = 0.0, [], {}
    for name, path in named.items():
        rows, body_bytes, wire_bytes, coding = found["sizes"][path]
        p50, p95 = np.percentile(found["times"][path], [50, 95]) * 1000
        worst = max(worst, p95)
        if body_bytes >= COMPRESS_FROM and coding == "-" and encoding != "identity":
            unpacked.append(name)
        app_ms, db_ms = found["costs"][path]
        summary[path] = (wire_bytes, p95)
        print(f"{name:<26} {rows:>5} {body_bytes:>10,} {wire_bytes:>9,} {coding:>8} "
              f"{app_ms:>7.1f} {db_ms:>6.1f} {p50:>7.0f} {p95:>7.0f}")  # fmt: skip
    if encoding != "identity":
        print(f"answers over {COMPRESS_FROM} B not compressed: {', '.join(unpacked) or 'none'}")
    print(f"worst p95: {worst:.0f} ms (target <= 300 ms)")
    return summary


def free_port() -> int:
    """A TCP port free now on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    """Fill, serve, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=1792)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--ranks", type=int, default=16)
    parser.add_argument("--intervals", type=int, default=10)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cpu-requests", type=int, default=10)
    parser.add_argument(
        "--accept-encoding",
        nargs="+",
        choices=ENCODINGS,
        default=list(ENCODINGS),
        help="the encodings to compare, each a pass of its own, in this order",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            t0 = time.perf_counter()
            nodes, links, ports = fill(database.url, fat_tree(args.hosts), args.sweeps)
            seed_jobs(database.url, args.jobs, args.ranks, args.intervals)
            print(f"fabric: {nodes} nodes, {links} links, {ports} ports, {args.sweeps} sweeps; "
                  f"{args.jobs} jobs of {args.ranks} ranks; written in "
                  f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            with served(database.url, port) as proc:
                # the first answers compute what later ones share: no 5 s timeout on them
                first = httpx.get(f"{base}/api/jobs?limit=1", timeout=120)
                named = routes(first.json()["jobs"][0]["job"])
                paths = list(named.values())
                found = {e: measure(base, paths, args, e, proc.pid, Path(scratch) / "pg")
                         for e in args.accept_encoding}  # fmt: skip
        finally:
            database.stop()
    summaries = {e: report(named, args, e, found[e]) for e in args.accept_encoding}
    print("\nper route: bytes on the wire / p95 ms, by Accept-Encoding")
    print(f"{'route (default page)':<26} " + " ".join(f"{e:>18}" for e in summaries))
    for name, path in named.items():
        cells = [f"{summaries[e][path][0]:>10,} / {summaries[e][path][1]:>5.0f}" for e in summaries]
        print(f"{name:<26} " + " ".join(cells))


if __name__ == "__main__":
    main()
