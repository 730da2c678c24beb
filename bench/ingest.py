"""Ingest benchmark: frames in -> committed samples, against a raw binary COPY ceiling.

Starts an embedded PostgreSQL and a collector, drives it with bench/loadgen.py in a
separate process (real frames over TCP), then prints, measured in one run:
- sustained samples/s end to end (a sample = one point-to-point record = one peer's
  counters for one interval), frames in -> acknowledged (= committed, queryable), after
  an untimed warm-up of two frames per rank;
- the same samples loaded by one raw binary COPY in the same storage layout (the
  ceiling) and the ratio of the two, in `--rounds` alternating rounds (on a shared
  machine the load of the moment changes both alike), with the median ratio;
- where the time goes: CPU microseconds per frame of the database (its processes), the
  collector and the load generator end to end, and of the database and its client in the
  raw COPY;
- bytes on disk per stored sample (table + indexes + TOAST, all partitions);
- frame-to-queryable latency p50/p99 in a paced run at half the measured throughput.

    .venv/bin/python -m bench.ingest [--ranks 64 --frames 300 --peers 64 --rounds 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

from bench.fabric_viewers import cpu_seconds, postgres_pids
from bench.loadgen import p2p_records
from collector import codec
from collector.service import BackgroundCollector
from collector.store.copy import COPY_SIGNATURE, COPY_TRAILER
from collector.store.tables import DELTA_TABLES
from stacklens import wire
from stacklens.db import migrate, start_embedded

P2P = next(t for t in DELTA_TABLES if t.wire == "p2p")

_SIZE = """
SELECT coalesce(sum(pg_total_relation_size(relid)), 0)
FROM pg_partition_tree(%s::regclass) WHERE isleaf
"""
_SAMPLES = "SELECT coalesce(sum(cardinality(bytes) / 2), 0) FROM p2p_frames"  # 2 per sample


def loadgen(endpoint: str, args: argparse.Namespace, rate: float = 0.0) -> dict:
    """Run bench/loadgen.py against the collector and return its figures."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.loadgen", "--collector", endpoint,
         "--ranks", str(args.ranks), "--frames", str(args.frames), "--peers", str(args.peers),
         "--rate", str(rate)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def raw_copy_payload(ranks: int, frames: int, peers: int) -> tuple[bytes, int]:
    """(binary COPY payload, samples) of the same kind of frames (same layout and data),
    encoded beforehand by the collector's own encoder."""
    now = time.time_ns()  # today's partition exists: the collector created it
    rng = np.random.default_rng(0)
    raw = b"".join(
        wire.encode_frame(
            job_id="raw",
            world_rank=i % ranks,
            world_size=ranks,
            seq=i,
            interval_start_ns=now - 10**9,
            interval_end_ns=now,
            tables={"p2p": p2p_records(rng, i % ranks, ranks, peers)},
        )  # fmt: skip
        for i in range(ranks * frames)
    )
    batch, error = codec.scan(raw, codec.limits("", 1 << 20))
    assert error is None and len(batch) == ranks * frames
    rows = b"".join(map(bytes, codec.encode_arrays(
        wire.SPEC.table("p2p").id, P2P.columns, codec.frame_addresses([batch]), batch.info,
        np.zeros(len(batch), dtype=np.int64), np.zeros(len(batch), dtype=np.int64),
        batch.info["world_rank"],
    )))  # fmt: skip
    return COPY_SIGNATURE + rows + COPY_TRAILER, len(batch) * peers


class CpuClock:
    """CPU seconds used so far by the database (the postmaster and the processes it runs
    now) and by this process (the collector's thread: the main thread only waits while a
    load runs)."""

    def __init__(self, data_dir: Path):
        self._data_dir = data_dir

    def database(self) -> float:
        """CPU seconds of the database cluster's processes alive now."""
        return cpu_seconds(postgres_pids(self._data_dir))

    def own(self) -> float:
        """CPU seconds of this process, all its threads."""
        return time.process_time()


def raw_copy(url: str, payload: bytes, samples: int, clock: CpuClock) -> dict:
    """One binary COPY of `payload` and its commit: samples/s, and CPU seconds of the
    database and of this (the client's) process."""
    with psycopg.connect(url) as conn:
        db, own = clock.database(), clock.own()
        start = time.perf_counter()
        with conn.cursor().copy(P2P.copy_statement) as copy:
            copy.write(payload)
        conn.commit()
        seconds = time.perf_counter() - start
        return {"rows_per_s": samples / seconds, "db_cpu_s": clock.database() - db,
                "client_cpu_s": clock.own() - own}  # fmt: skip


def burst(endpoint: str, args: argparse.Namespace, clock: CpuClock) -> dict:
    """One unpaced load through the collector, with the CPU seconds of the database and of
    the collector while it ran (the generator's own are in its figures)."""
    db, own = clock.database(), clock.own()
    figures = loadgen(endpoint, args)
    figures["db_cpu_s"], figures["collector_cpu_s"] = clock.database() - db, clock.own() - own
    return figures


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--peers", type=int, default=64)
    parser.add_argument(
        "--rounds", type=int, default=5,
        help="alternating rounds of the load through the collector and of the raw COPY",
    )  # fmt: skip
    args = parser.parse_args()
    frames = args.ranks * args.frames
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        clock = CpuClock(Path(scratch) / "pg")
        payload, samples = raw_copy_payload(args.ranks, args.frames, args.peers)
        bursts, copies = [], []
        with BackgroundCollector(database.url) as collector:
            for i in range(args.rounds):
                bursts.append(burst(collector.endpoint, args, clock))
                if i == 0:
                    with psycopg.connect(database.url) as conn:
                        on_disk = conn.execute(_SIZE, (P2P.sql,)).fetchone()[0]
                        stored = conn.execute(_SAMPLES).fetchone()[0]  # warm-up included
                copies.append(raw_copy(database.url, payload, samples, clock))
            rate = float(np.median([b["frames_per_s"] for b in bursts]))
            paced = loadgen(collector.endpoint, args, rate=rate / 2)
        database.stop()
    ratios = [b["rows_per_s"] / c["rows_per_s"] for b, c in zip(bursts, copies, strict=True)]
    print(
        f"load                   : {args.ranks} ranks x {args.frames} frames x "
        f"{args.peers} peer records = {bursts[0]['rows']:,} samples, "
        f"{args.rounds} alternating rounds"
    )
    for i, (b, c, r) in enumerate(zip(bursts, copies, ratios, strict=True)):
        print(
            f"round {i + 1}: end-to-end {b['rows_per_s']:>11,.0f} samples/s "
            f"({b['frames_per_s']:,.0f} frames/s), raw COPY {c['rows_per_s']:>11,.0f}, "
            f"ratio {r:.2f}"
        )
    print(f"ratio, median          : {np.median(ratios):.2f} (min {min(ratios):.2f}, "
          f"max {max(ratios):.2f})")  # fmt: skip
    us = 1e6 / frames
    print(
        "CPU per frame, median  : end to end: database "
        f"{np.median([b['db_cpu_s'] for b in bursts]) * us:.1f} us, collector "
        f"{np.median([b['collector_cpu_s'] for b in bursts]) * us:.1f} us, generator "
        f"{np.median([b['cpu_s'] for b in bursts]) * us:.1f} us; raw COPY: database "
        f"{np.median([c['db_cpu_s'] for c in copies]) * us:.1f} us, client "
        f"{np.median([c['client_cpu_s'] for c in copies]) * us:.1f} us"
    )
    print(f"on disk                : {on_disk / stored:.1f} B per sample")
    print(
        f"latency at {paced['frames_per_s']:,.0f} frames/s: p50 "
        f"{paced['latency_p50_s'] * 1000:.1f} ms, p99 {paced['latency_p99_s'] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
