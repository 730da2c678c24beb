"""List routes benchmark: every list answer's size and p95 with 10 clients at once, one run.

Writes the largest fat tree of bench/fabric_api.py (default 1,792 hosts: 3,584 links,
7,168 ports) with --sweeps sweeps through the real FabricStore, and --jobs jobs of --ranks
ranks through the real collector (bench/jobs_page.py: point-to-point traffic to every
other rank, operations, a collective, sizes, a file), then serves the app in a child
process (uvicorn, as `stacklens up` does) and has --clients clients (threads, one HTTP
connection each, `Accept-Encoding: gzip, br`) ask every list route's default page in
turn, --rounds times each, all at once. Prints per route: rows in the page, bytes of the
JSON body, bytes on the wire and the encoding, p50 and p95 over every client's requests;
then whether every answer over 1 KiB was compressed and the worst p95.

    .venv/bin/python -m bench.list_routes [--hosts 1792 --jobs 200 --clients 10 --rounds 10]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from bench.fabric_api import fill
from bench.fabric_viewers import served
from bench.jobs_page import seed_jobs
from emulator.fattree import fat_tree
from stacklens.db import migrate, start_embedded

#: Answers of at least this many bytes must be compressed (server/app.py).
COMPRESS_FROM = 1024


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


def client(base: str, paths: list[str], rounds: int, start: threading.Barrier,
           times: dict[str, list[float]]) -> None:  # fmt: skip
    """One client: every path in turn, `rounds` times, on one connection."""
    headers = {"Accept-Encoding": "gzip, br"}
    with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
        start.wait()
        for r in range(rounds):
            for path in paths[r % len(paths) :] + paths[: r % len(paths)]:
                t0 = time.perf_counter()
                response = http.get(path)
                times[path].append(time.perf_counter() - t0)
                assert response.status_code == 200, (path, response.status_code, response.text)


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
            with served(database.url, port):
                job = httpx.get(f"{base}/api/jobs?limit=1").json()["jobs"][0]["job"]
                named = routes(job)
                paths = list(named.values())
                sizes = {}
                for path in paths:  # each answer once, plain and compressed
                    plain = httpx.get(base + path, headers={"Accept-Encoding": "identity"})
                    packed = httpx.get(base + path, headers={"Accept-Encoding": "gzip, br"})
                    assert plain.status_code == 200, (path, plain.text)
                    sizes[path] = (rows_of(plain.json()), len(plain.content),
                                   packed.num_bytes_downloaded,
                                   packed.headers.get("content-encoding", "-"))  # fmt: skip
                times: dict[str, list[float]] = {p: [] for p in paths}
                start = threading.Barrier(args.clients)
                threads = [
                    threading.Thread(target=client, args=(base, paths, args.rounds, start, times))
                    for _ in range(args.clients)
                ]
                wall = time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                wall = time.perf_counter() - wall
        finally:
            database.stop()
    load = os.getloadavg()
    print(f"{args.clients} clients at once, {args.rounds} rounds of {len(paths)} routes in "
          f"{wall:.1f} s; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
    print(f"{'route (default page)':<26} {'rows':>5} {'JSON B':>10} {'wire B':>9} {'enc':>5} "
          f"{'p50 ms':>7} {'p95 ms':>7}")  # fmt: skip
    worst, unpacked = 0.0, []
    for name, path in named.items():
        rows, body_bytes, wire_bytes, encoding = sizes[path]
        p50, p95 = np.percentile(times[path], [50, 95]) * 1000
        worst = max(worst, p95)
        if body_bytes >= COMPRESS_FROM and encoding == "-":
            unpacked.append(name)
        print(f"{name:<26} {rows:>5} {body_bytes:>10,} {wire_bytes:>9,} {encoding:>5} "
              f"{p50:>7.0f} {p95:>7.0f}")  # fmt: skip
    print(f"answers over {COMPRESS_FROM} B not compressed: {', '.join(unpacked) or 'none'}")
    print(f"worst p95: {worst:.0f} ms (target <= 300 ms)")


if __name__ == "__main__":
    main()
