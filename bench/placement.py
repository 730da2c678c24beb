"""Placement benchmark: what `GET /api/jobs/{job}/placement` costs for a job on every host
of a cluster-sized fat tree, one run.

Writes a fat tree (default 512 hosts: 48 switches, 1,024 links) and --sweeps sweeps through
the real FabricStore (bench/fabric_api.py's `fill`) into an embedded PostgreSQL, then a job
with one rank per host (its jobs, runs and ranks rows written directly: the placement reads
nothing else of it; matched by host name), and times the route (the app in-process over
its ASGI test client: queries, the pure placement and JSON) and the pure `place` alone.
Prints the median of --repeat runs, the hosts, links and the body size.

    .venv/bin/python -m bench.placement [--hosts 512 --sweeps 3 --repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from pathlib import Path

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from bench.fabric_api import T0, fill, timed
from emulator.fattree import fat_tree
from server.app import create_app
from server.fabric import repository as fabric
from server.jobs.placement import hosts_and_ranks, place
from server.jobs.repository import Scope
from stacklens.db import make_engine, migrate, start_embedded

JOB = "bench-placement"


def add_job(url: str, hosts: list[str], sweeps: int) -> int:
    """A finished job with rank i on hosts[i] over the sweeps' time; its id."""
    end = T0 + (sweeps + 1) * 10**9
    with psycopg.connect(url) as conn:
        job_id = conn.execute(
            "INSERT INTO jobs (job_key, world_size, status, started_ns, last_seen_ns)"
            " VALUES (%s, %s, 'finished', %s, %s) RETURNING id",
            (JOB, len(hosts), T0, end),
        ).fetchone()[0]
        run_id = conn.execute(
            "INSERT INTO runs (job_id, run_key, ordinal, kind, world_size, status, started_ns,"
            " last_seen_ns) VALUES (%s, 1, 1, 'mpi', %s, 'finished', %s, %s) RETURNING id",
            (job_id, len(hosts), T0, end),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO ranks (job_id, run_id, world_rank, host, pid, first_seen_ns,"
            " last_seen_ns, finished) SELECT %s, %s, r - 1, h, 1000 + r, %s, %s, true"
            " FROM unnest(%s::text[]) WITH ORDINALITY AS u(h, r)",
            (job_id, run_id, T0, end, hosts),
        )
    return int(job_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tree = fat_tree(args.hosts)
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            nodes, links, ports = fill(database.url, tree, args.sweeps)
            job_id = add_job(database.url, tree.hosts, args.sweeps)
            print(f"fabric: {nodes} nodes, {links} links, {ports} ports, {args.sweeps} sweeps;"
                  f" job: {len(tree.hosts)} ranks, one per host")  # fmt: skip
            engine = make_engine(database.url)
            with Session(engine) as session:
                ranks = hosts_and_ranks(session, Scope(job_id))
                placing = functools.partial(place, ranks, {}, fabric.nodes(session),
                                            fabric.links(session))  # fmt: skip
            seconds, placed = timed(placing, args.repeat)
            print(f"place(): {seconds * 1000:.0f} ms (median of {args.repeat}), "
                  f"{len(placed['links'])} links placed")  # fmt: skip
            app = create_app(engine)
            with TestClient(app, base_url="http://127.0.0.1") as client:
                path = f"/api/jobs/{JOB}/placement"
                seconds, response = timed(lambda: client.get(path), args.repeat)
                assert response.status_code == 200, response.text
                body = response.json()
                unmatched = sum(h["match"] == "unmatched" for h in body["hosts"])
                size = len(response.content) / 1e6
                print(f"GET {path}: {seconds * 1000:.0f} ms (median of {args.repeat}), "
                      f"{len(body['hosts'])} hosts ({unmatched} unmatched), "
                      f"{len(body['links'])} links, {size:.2f} MB")  # fmt: skip
            engine.dispose()
        finally:
            database.stop()


if __name__ == "__main__":
    main()
