"""Ingest benchmark: frames in -> committed rows, against a raw binary COPY of the same rows.

Starts an embedded PostgreSQL and a collector, drives it with bench/loadgen.py in a
separate process, then loads the same number of point-to-point rows with one raw binary
COPY (the ceiling) and prints both rates and their ratio, measured in one run.

    .venv/bin/python -m bench.ingest [--ranks 64 --frames 50 --peers 64]
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

from collector.service import BackgroundCollector
from collector.store.copy import binary_copy
from stacklens.db import migrate, start_embedded


def raw_copy_rate(url: str, rows: int) -> float:
    """Rows/s of one binary COPY of `rows` point-to-point rows into p2p_deltas."""
    ones = np.ones(rows, dtype=np.int64)
    payload = binary_copy(
        [
            ("int8", ones),
            ("int4", ones),
            ("int4", np.arange(rows) % 64),
            ("int8", ones),
            ("int8", ones),
            ("int8", ones * 4096),
            ("int8", ones),
            ("int8", ones * 0),
            ("int8", ones * 0),
        ]
    )
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO jobs (id, job_key, world_size, status, started_ns, last_seen_ns) "
            "OVERRIDING SYSTEM VALUE VALUES (1, 'raw-copy', 1, 'running', 0, 0) "
            "ON CONFLICT DO NOTHING"
        )
        start = time.perf_counter()
        with conn.cursor().copy(
            "COPY p2p_deltas (job_id, world_rank, peer, t_start_ns, t_end_ns, bytes_sent,"
            " msgs_sent, bytes_recv, msgs_recv) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.write(payload)
        conn.commit()
        return rows / (time.perf_counter() - start)


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--peers", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        with BackgroundCollector(database.url) as collector:
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.loadgen",
                    "--collector",
                    collector.endpoint,
                    "--ranks",
                    str(args.ranks),
                    "--frames",
                    str(args.frames),
                    "--peers",
                    str(args.peers),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
        figures = json.loads(out.stdout)
        ceiling = raw_copy_rate(database.url, figures["rows"])
        database.embedded.cleanup()
    print(
        f"frames in -> committed : {figures['frames']} frames, {figures['rows']} rows "
        f"in {figures['seconds']:.2f} s"
    )
    print(
        f"end-to-end             : {figures['rows_per_s']:,.0f} rows/s "
        f"({figures['frames_per_s']:,.0f} frames/s)"
    )
    print(f"raw binary COPY        : {ceiling:,.0f} rows/s")
    print(f"ratio                  : {figures['rows_per_s'] / ceiling:.2f}")


if __name__ == "__main__":
    main()
