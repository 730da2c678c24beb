"""Fabric over time benchmark: API latency (p50, p95) of the fabric series and of the
windowed links list over 1 hour of 1,000 ports sampled every second (3.6 M samples),
measured against seeded data.

Seeds a fabric of --leaves leaf switches with 25 hosts each (1,000 ports at 20 leaves:
500 links) through the real FabricStore (topology, ports, links), then --seconds sweeps
of every port bulk-inserted with SQL into the day-partitioned sample table as the store
writes them (deltas with dt = 1 s, every counter moving; a few ports erring), each port's
newest sample made its latest, and the rollups per minute and per 10 s rebuilt by the
store (`FabricStore.rebuild_rollups`, the same sums it keeps with every sweep). The API
is served on a uvicorn thread of this process; each request below is timed --repeat
times over HTTP (query and JSON included):

- series of a link over the hour at the step chosen (10 s: the 10 s rollups), at 1 s
  (raw, 3,600 steps), at 60 s (minute rollups), and as CSV; of a leaf switch (its 25 ports
  summed) at the step chosen;
- links over the hour (all 500, ranked; and a page of the 50 busiest), from a whole
  minute and from mid-second (the partial first and last minutes from the 10 s rollups and
  under 10 s raw at each end), and the state
  over the hour (a playback frame); a 1-second window (a playback step); the same window
  asked again is answered from the sums kept for it (server/fabric/snapshot.py), so these
  are also timed with a new window each request (shifted by 1 ms: every one summed);
- for comparison: the live links (page of 50) and the live state.

Besides the wall times (inflated on a loaded machine), each request's CPU time: of this
process (the API and its HTTP client) and of the database cluster (its backends, parallel
workers included), mean ms per request.

    .venv/bin/python -m bench.fabric_series [--leaves 20 --seconds 3600 --repeat 20]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.jobs_series import p50_p95
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from collector.store.partitions import day_of
from server.app import create_app
from stacklens.constants import ERROR_COUNTERS, FLAG_EXTENDED, PORT_COUNTERS
from stacklens.db import make_engine, migrate, start_embedded
from tests.conftest import serving

T0 = 1_764_583_200 * 10**9  # 2026-12-01 10:00:00 UTC, a minute boundary
SECOND = 10**9
MINUTE = 60 * SECOND
HOSTS_PER_LEAF = 25
CAPACITY = 12_500_000_000  # EDR 4x


def topology(leaves: int) -> Topology:
    """`leaves` leaf switches, each with HOSTS_PER_LEAF single-port hosts on ports 1..25."""
    nodes, ports, links = {}, {}, []
    lid = 1
    for s in range(leaves):
        switch = 0xF452_1403_0000_0000 + s
        nodes[switch] = Node(switch, NodeType.SWITCH, f"leaf{s:02d}", 36, lid)
        lid += 1
        for h in range(HOSTS_PER_LEAF):
            host = 0x0002_C903_0000_0000 + s * 100 + h
            nodes[host] = Node(host, NodeType.CA, f"host{s:02d}{h:02d}", 1, lid)
            for end in ((switch, h + 1), (host, 1)):
                ports[end] = Port(end[0], end[1], end[0], lid, 4, 5, 2, 4, 0, CAPACITY)
            links.append(Link.of((host, 1), (switch, h + 1)))
            lid += 1
    return Topology(nodes=nodes, ports=ports, links=links)


def seed_sql(seconds: int) -> list[str]:
    """The samples of every port (fabric_ports) for sweeps 1..seconds (dt 1 s), bytes
    varying by port and second, one error at one port in a hundred every ten minutes,
    stored sweep after sweep as the fabric store does (the time index, a BRIN, relies on
    it: in port order it would pick every page for any time); then each port's newest
    sample as its latest."""
    deltas = {
        "xmit_bytes": "((p.id * 7 + s * 13) % 1000) * 4096",
        "rcv_bytes": "((p.id * 11 + s * 3) % 1000) * 4096",
        "xmit_pkts": "((p.id * 7 + s * 13) % 1000)",
        "rcv_pkts": "((p.id * 11 + s * 3) % 1000)",
        "xmit_wait": "(p.id + s) % 50",
        **dict.fromkeys(ERROR_COUNTERS, "0"),
        "symbol_errors": "CASE WHEN p.id % 100 = 0 AND s % 600 = 0 THEN 1 ELSE 0 END",
    }
    raw = ", ".join(f"s * 1000 + {i}" for i in range(len(PORT_COUNTERS)))
    columns = ", ".join([*PORT_COUNTERS, *(f"d_{c}" for c in PORT_COUNTERS)])
    every = ", ".join(["port_id", "ts_ns", "dt_ns", "flags", columns])
    return [
        f"INSERT INTO fabric_port_samples (port_id, ts_ns, dt_ns, flags, {columns}) "
        f"SELECT p.id, {T0} + s * {SECOND}, {SECOND}, {FLAG_EXTENDED}, {raw}, "
        f"{', '.join(deltas[c] for c in PORT_COUNTERS)} "
        f"FROM generate_series(1::int8, {seconds}) s, fabric_ports p ORDER BY s, p.id",
        f"INSERT INTO fabric_port_latest ({every}) SELECT {every} FROM fabric_port_samples "
        f"WHERE ts_ns = {T0 + seconds * SECOND}",
    ]


def db_cpu_s(data_dir: Path) -> float:
    """CPU seconds used so far by the database cluster of `data_dir`: its postmaster with
    the processes it reaped (backends, parallel workers) and its live children."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])

    def ticks(pid: str, fields: slice) -> int:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in stat[fields])

    total = ticks(str(postmaster), slice(11, 15))  # utime, stime, cutime, cstime
    for child in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        with contextlib.suppress(OSError):  # ended meanwhile: in the postmaster's cutime
            total += ticks(child, slice(11, 13))
    return total / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        data_dir = Path(scratch) / "pg"
        database = start_embedded(data_dir)
        migrate(database.url)
        t = time.perf_counter()
        topo = topology(args.leaves)
        store = FabricStore(database.url)
        store.write_topology(topo, T0, [])
        with psycopg.connect(database.url, autocommit=True) as conn:
            store.partitions.ensure_sync(conn, [day_of(T0), day_of(T0 + args.seconds * SECOND)])
            for sql in seed_sql(args.seconds):
                conn.execute(sql)
            samples = conn.execute("SELECT count(*) FROM fabric_port_samples").fetchone()[0]
        seeded = time.perf_counter() - t
        t = time.perf_counter()
        end = -(-(T0 + (args.seconds + 1) * SECOND) // MINUTE) * MINUTE
        rows = store.rebuild_rollups(T0, end)
        store.close()
        with psycopg.connect(database.url, autocommit=True) as conn:
            # as autovacuum leaves a table written for a while: the time index's block
            # ranges summarized (a bulk load leaves them unsummarized, and a time read then
            # rechecks every row of the day: 0.5 s for 10 s of raw samples here)
            conn.execute("VACUUM ANALYZE")
        rolled = time.perf_counter() - t
        print(f"seeded {len(topo.ports):,} ports x {args.seconds} s = {samples:,} samples in "
              f"{seeded:.0f} s; rollups rebuilt in {rolled:.0f} s, {rows:,} rows")  # fmt: skip

        engine = make_engine(database.url)
        with serving(create_app(engine)) as port:
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)
            lo, hi = T0 // SECOND + 1, T0 // SECOND + 1 + args.seconds
            hour = {"from": lo, "to": hi}
            whole = {"from": lo - 1, "to": hi - 1}  # from a whole minute
            odd = {"from": f"{lo}.5", "to": f"{hi}.5"}

            def shifted(k: int) -> dict[str, str]:
                """The mid-second hour shifted by k ms (k < 499: a window asked for once)."""
                return {"from": f"{lo}.{501 + k:03d}", "to": f"{hi}.{501 + k:03d}"}

            leaf = f"{0xF452_1403_0000_0000:#018x}"  # leaf00
            cases = [
                ("series link, step chosen (10 s)", "series", {"link": 1, **whole}),
                ("series link step=1 s", "series", {"link": 1, "step": 1, **hour}),
                ("series link step=60 s (rollups)", "series", {"link": 1, "step": 60, **whole}),
                ("series link step=1 s, CSV", "series",
                 {"link": 1, "step": 1, "format": "csv", **hour}),
                ("series node (25 ports), step chosen", "series", {"guid": leaf, **whole}),
                ("links, 1 h from a whole minute", "links", {"samples": "false", **whole}),
                ("links, 1 h from mid-second", "links", {"samples": "false", **odd}),
                ("links, 1 h, the page's 50 busiest", "links",
                 {"samples": "false", "limit": 50, **odd}),
                ("links, 1 h, a new window each request", "links",
                 lambda k: {"samples": "false", **shifted(k)}),
                ("the page of 50, a new window each request", "links",
                 lambda k: {"samples": "false", "limit": 50, **shifted(k)}),
                ("state, 1 h (a playback frame)", "state", odd),
                ("state, 1 h, a new window each request", "state", shifted),
                ("state, 1 s (a playback step)", "state", {"from": hi - 2, "to": hi - 1}),
                ("events, 1 h", "events", hour),
                ("links live, 50", "links", {"samples": "false", "limit": 50}),
                ("state live", "state", {}),
            ]  # fmt: skip
            print(f"{'request (1-hour window)':<42} {'p50 ms':>7} {'p95 ms':>7} "
                  f"{'API CPU':>8} {'DB CPU':>7} {'bytes':>10}")  # fmt: skip
            asked = itertools.count()  # shared: no two requests ask for the same new window
            for name, route, params in cases:
                cpu: list[tuple[float, float]] = []

                def get(route: str = route, params: Any = params, cpu: Any = cpu) -> int:
                    chosen = params(next(asked)) if callable(params) else params
                    db, api = db_cpu_s(data_dir), time.process_time()
                    answer = http.get(f"/api/fabric/{route}", params=chosen)
                    size = len(answer.raise_for_status().content)
                    cpu.append((time.process_time() - api, db_cpu_s(data_dir) - db))
                    return size

                p50, p95, size = p50_p95(get, args.repeat)
                api_ms, db_ms = (statistics.mean(c) * 1e3 for c in zip(*cpu, strict=True))
                print(f"{name:<42} {p50 * 1e3:7.0f} {p95 * 1e3:7.0f} {api_ms:8.0f} {db_ms:7.0f} "
                      f"{size:10,}", flush=True)  # fmt: skip
        engine.dispose()
        database.stop()


if __name__ == "__main__":
    main()
