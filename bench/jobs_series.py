"""Job series benchmark: API latency (p50, p95) of a 1,024-rank job's 1-hour series (by
category, op, rank, file and peer) and slow-rank profile, measured against seeded data, and
the cost of the collector's rollup pass over that hour.

Seeds one job of --ranks ranks with --seconds one-second intervals: the first and the last
interval of every rank go through the real collector (frames over TCP, the real writer:
job, run, ranks, day partition, dirty minutes); the intervals between are bulk-inserted
with SQL into the same storage tables in the layout the writer uses (one row per frame:
three MPI ops, two point-to-point peers, one collective; rank 7 computes longer during
minute 30; rank 0 appends to a log file every second and every rank writes its checkpoint
file at minutes 15 and 45), and every minute is marked dirty as a commit would mark it.
Then one rollup pass runs (the collector's own, timed), the API is served on a uvicorn
thread of this process, and each request is timed --repeat times over HTTP (query, JSON
or files included): every series at the step chosen from the window and at 1 s (by rank
and by peer at 1 s: 1,024 x 3,600 points, refused with 422 naming the step that fits),
the category series at 1 s as CSV, the profile at the step chosen, and the profile of the
last 5 minutes (raw deltas).

    .venv/bin/python -m bench.jobs_series [--ranks 1024 --seconds 3600 --repeat 20]
        [--only "profile (" "by=rank, step chosen" "by=peer, step chosen"]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.jobs_page import send
from collector.service import BackgroundCollector
from server.app import create_app
from server.jobs.series import BY
from stacklens import wire
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.mpi_ops import op_names
from tests.conftest import serving

T0 = 1_764_583_200 * 10**9  # 2026-12-01 10:00:00 UTC, a minute boundary
SECOND = 10**9
TOKEN = "bench"
JOB = "series-bench"
SLOW_RANK, SLOW_MINUTE = 7, 30


def frame(rank: int, ranks: int, seq: int, hosts: list[str] | None = None) -> bytes:
    """A real frame of the job: the same records the bulk rows hold; rank r on
    `hosts[r * len(hosts) // ranks]` (default: 32 ranks per host, node000, node001, ...)."""
    op = op_names().index
    tables: dict[str, list[dict[str, Any]]] = {
        "op": [
            {"op_id": op("MPI_Isend"), "calls": 2, "bytes": 8192, "time_ns": 2_000_000},
            {"op_id": op("MPI_Waitall"), "calls": 1, "time_ns": 100_000_000},
            {"op_id": op("MPI_Allreduce"), "calls": 1, "bytes": 64, "time_ns": 200_000_000},
        ],
        "p2p": [{"peer": (rank + d) % ranks, "bytes_sent": 4096, "msgs_sent": 1}
                for d in (1, ranks - 1)],  # fmt: skip
        "coll": [{"op_id": op("MPI_Allreduce"), "comm_id": 1, "comm_size": ranks,
                  "root": 0xFFFFFFFF, "calls": 1, "bytes": 64, "time_ns": 200_000_000}],
    }  # fmt: skip
    if seq == 0:
        tables["rank_info"] = [{"command": b"./solver", "user": b"alice"}]
    return wire.encode_frame(
        job_id=JOB, world_rank=rank, world_size=ranks, seq=seq,
        host=f"node{rank // 32:03d}" if hosts is None else hosts[rank * len(hosts) // ranks],
        pid=1000 + rank, interval_start_ns=T0 + seq * SECOND,
        interval_end_ns=T0 + (seq + 1) * SECOND, token=TOKEN,
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )  # fmt: skip


def bulk_sql(ranks: int, seconds: int) -> list[str]:
    """INSERTs of the intervals 1 .. seconds-2 of every rank, as the writer stores them;
    rank SLOW_RANK's MPI time is a tenth during minute SLOW_MINUTE (it computes, the
    others wait); file I/O (module doc); every minute is marked dirty."""
    op = op_names().index
    ops = f"ARRAY[{op('MPI_Isend')}, {op('MPI_Waitall')}, {op('MPI_Allreduce')}]::int2[]"
    slow = f"(r = {SLOW_RANK} AND s / 60 = {SLOW_MINUTE})"
    frames = f"generate_series(1::int8, {seconds - 2}) s, generate_series(0, {ranks - 1}) r"
    head = (f"(SELECT id FROM jobs), (SELECT id FROM runs), r, {T0} + s * {SECOND}, "
            f"{T0} + (s + 1) * {SECOND}")  # fmt: skip
    return [
        f"INSERT INTO op_frames (job_id, run_id, world_rank, t_start_ns, t_end_ns, op_id, calls,"
        f" bytes, time_ns) SELECT {head}, {ops}, ARRAY[2, 1, 1]::int8[], "
        f"ARRAY[8192, 0, 64]::int8[], CASE WHEN {slow} THEN ARRAY[200000, 10000000, 20000000]"
        f" ELSE ARRAY[2000000, 100000000, 200000000] END::int8[] FROM {frames}",
        # packed (stacklens.schema.P2P_PACKED): peer, msgs_sent, msgs_recv; bytes_sent, bytes_recv
        f"INSERT INTO p2p_frames (job_id, run_id, world_rank, t_start_ns, t_end_ns, peer_msgs, "
        f"bytes) SELECT {head}, ARRAY[(r + 1) % {ranks}, (r + {ranks - 1}) % {ranks}, 1, 1, 0, 0]"
        f"::int4[], ARRAY[4096, 4096, 0, 0]::int8[] FROM {frames}",
        f"INSERT INTO coll_frames (job_id, run_id, world_rank, t_start_ns, t_end_ns, op_id, "
        f"comm_id, comm_size, root, calls, bytes, time_ns) SELECT {head}, "
        f"ARRAY[{op('MPI_Allreduce')}]::int2[], ARRAY[1]::int8[], ARRAY[{ranks}]::int4[], "
        f"ARRAY[-1]::int4[], ARRAY[1]::int8[], ARRAY[64]::int8[], "
        f"CASE WHEN {slow} THEN ARRAY[20000000] ELSE ARRAY[200000000] END::int8[] FROM {frames}",
        f"INSERT INTO io_deltas (job_id, run_id, world_rank, t_start_ns, t_end_ns, layer, opens,"
        f" reads, writes, bytes_read, bytes_written, read_time_ns, write_time_ns, meta_time_ns, "
        f"path, mount, fstype) SELECT {head}, 1, 0, 0, 1, 0, 512, 0, 20000, 0, '/scratch/log', "
        f"'/scratch', 'lustre' FROM generate_series(1::int8, {seconds - 2}) s, "
        f"generate_series(0, 0) r",
        f"INSERT INTO io_deltas (job_id, run_id, world_rank, t_start_ns, t_end_ns, layer, opens,"
        f" reads, writes, bytes_read, bytes_written, read_time_ns, write_time_ns, meta_time_ns, "
        f"path, mount, fstype) SELECT {head}, 1, 1, 0, 64, 0, {64 << 20}, 0, 300000000, 1000000,"
        f" '/scratch/ckpt.' || r, '/scratch', 'lustre' FROM generate_series(0, {ranks - 1}) r, "
        f"unnest(ARRAY[15 * 60, 45 * 60]::int8[]) s WHERE s < {seconds - 1}",
        "INSERT INTO rollup_dirty (run_id, minute_ns, job_id) SELECT (SELECT id FROM runs), "
        f"{T0} + m * 60 * {SECOND}, (SELECT id FROM jobs) "
        f"FROM generate_series(0::int8, {(seconds - 1) // 60}) m ON CONFLICT DO NOTHING",
    ]


def p50_p95(fn, repeat: int) -> tuple[float, float, int]:
    """Median and 95th percentile seconds of `repeat` calls, and the last answer's size."""
    times, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        size = fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times), times[max(0, round(0.95 * len(times)) - 1)], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--only", nargs="*", default=[],
        help="time only the requests whose name contains one of these texts; default: all",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        t = time.perf_counter()
        with BackgroundCollector(database.url, token=TOKEN) as collector:
            ends = [frame(r, args.ranks, s) for r in range(args.ranks)
                    for s in (0, args.seconds - 1)]  # fmt: skip
            send(collector.address, ends)
            with psycopg.connect(database.url, autocommit=True) as conn:
                for sql in bulk_sql(args.ranks, args.seconds):
                    conn.execute(sql)
                conn.execute("ANALYZE")
            seeded = time.perf_counter() - t
            t = time.perf_counter()
            rows = asyncio.run_coroutine_threadsafe(
                collector.service.roll_up_once(), collector.loop
            ).result(3600)
            rolled = time.perf_counter() - t
        frames = args.ranks * args.seconds
        print(f"seeded {args.ranks} ranks x {args.seconds} s = {frames:,} frames in "
              f"{seeded:.0f} s; rollup pass over them {rolled:.0f} s ({rolled / args.seconds:.1%}"
              f" of the time they cover), {rows:,} rollup rows")  # fmt: skip

        engine = make_engine(database.url)
        with serving(create_app(engine)) as port:
            http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)
            hour = {"from": T0 // SECOND, "to": T0 // SECOND + args.seconds}
            cases: list[tuple[str, str, dict[str, Any]]] = [
                *((f"series by={by}, step chosen", "series", {"by": by}) for by in BY),
                *((f"series by={by}, step 1 s", "series", {"by": by, "step": 1}) for by in BY),
                ("series by=category, step 1 s, CSV", "series",
                 {"by": "category", "step": 1, "format": "csv"}),
                ("profile (slow rank), step chosen", "profile", {}),
                ("profile, last 5 minutes, step chosen", "profile", {"from": hour["to"] - 300}),
            ]  # fmt: skip
            print(f"{'request (1-hour window)':<38} {'status':>6} {'step s':>6} {'p50 ms':>8} "
                  f"{'p95 ms':>8} {'bytes':>12}")  # fmt: skip
            for name, route, params in cases:
                if args.only and not any(w in name for w in args.only):
                    continue
                answers: list[httpx.Response] = []

                def get(route: str = route, params: dict[str, Any] = params,
                        answers: list[httpx.Response] = answers) -> int:  # fmt: skip
                    answer = http.get(f"/api/jobs/{JOB}/{route}", params={**hour, **params})
                    answers.append(answer)
                    return len(answer.content)

                p50, p95, size = p50_p95(get, args.repeat)
                last = answers[-1]
                assert last.status_code in (200, 422), last.text
                step = (
                    last.json()["step_ns"] / SECOND
                    if "json" in last.headers["content-type"] and last.status_code == 200
                    else params.get("step", "-")
                )
                print(f"{name:<38} {last.status_code:>6} {step:>6} {p50 * 1e3:8.0f} "
                      f"{p95 * 1e3:8.0f} {size:12,}", flush=True)  # fmt: skip
                if last.status_code == 422:
                    print(f"  422: {last.json()['detail']}")
        engine.dispose()
        database.stop()


if __name__ == "__main__":
    main()
