"""Ingest benchmark: frames in -> committed samples, against a raw binary COPY ceiling.

Starts an embedded PostgreSQL and a collector, drives it with bench/loadgen.py in a
separate process (real frames over TCP), then prints, measured in one run:
- sustained samples/s end to end (a sample = one point-to-point record = one peer's
  counters for one interval), frames in -> acknowledged (= committed, queryable), after
  an untimed warm-up of two frames per rank;
- the same samples loaded by one raw binary COPY in the same storage layout (the
  ceiling) and the ratio of the two;
- bytes on disk per stored sample (table + indexes + TOAST, all partitions);
- frame-to-queryable latency p50/p99 in a paced run at half the measured throughput.

    .venv/bin/python -m bench.ingest [--ranks 64 --frames 300 --peers 64]
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
_SAMPLES = "SELECT coalesce(sum(cardinality(peer)), 0) FROM p2p_frames"


def loadgen(endpoint: str, args: argparse.Namespace, rate: float = 0.0) -> dict:
    """Run bench/loadgen.py against the collector and return its figures."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.loadgen", "--collector", endpoint,
         "--ranks", str(args.ranks), "--frames", str(args.frames), "--peers", str(args.peers),
         "--rate", str(rate)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def raw_copy_rate(url: str, ranks: int, frames: int, peers: int) -> float:
    """Samples/s of one binary COPY of the same kind of frames (same layout and data),
    encoded beforehand by the collector's own encoder; only the COPY is timed."""
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
    rows = codec.encode_arrays(
        wire.SPEC.table("p2p").id, P2P.columns, codec.frame_addresses([batch]), batch.info,
        np.zeros(len(batch), dtype=np.int64), np.zeros(len(batch), dtype=np.int64),
        batch.info["world_rank"],
    )  # fmt: skip
    payload = COPY_SIGNATURE + rows + COPY_TRAILER
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        with conn.cursor().copy(P2P.copy_statement) as copy:
            copy.write(payload)
        conn.commit()
        return len(batch) * peers / (time.perf_counter() - start)


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--peers", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        with BackgroundCollector(database.url) as collector:
            burst = loadgen(collector.endpoint, args)
            with psycopg.connect(database.url) as conn:
                on_disk = conn.execute(_SIZE, (P2P.sql,)).fetchone()[0]
                stored = conn.execute(_SAMPLES).fetchone()[0]  # warm-up frames included
            paced = loadgen(collector.endpoint, args, rate=burst["frames_per_s"] / 2)
        ceiling = raw_copy_rate(database.url, args.ranks, args.frames, args.peers)
        database.stop()
    print(
        f"load                   : {args.ranks} ranks x {args.frames} frames x "
        f"{args.peers} peer records = {burst['rows']:,} samples"
    )
    print(
        f"end-to-end (committed) : {burst['rows_per_s']:,.0f} samples/s "
        f"({burst['frames_per_s']:,.0f} frames/s)"
    )
    print(f"raw binary COPY        : {ceiling:,.0f} samples/s (same layout)")
    print(f"ratio                  : {burst['rows_per_s'] / ceiling:.2f}")
    print(f"on disk                : {on_disk / stored:.1f} B per sample")
    print(
        f"latency at {paced['frames_per_s']:,.0f} frames/s: p50 "
        f"{paced['latency_p50_s'] * 1000:.1f} ms, p99 {paced['latency_p99_s'] * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
