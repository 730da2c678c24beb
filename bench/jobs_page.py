"""Jobs page benchmark: what the job list and one refresh of the Jobs page cost with many
jobs, one run.

Seeds --jobs jobs through the real collector (frames over TCP, the real writer): each of
--ranks ranks sends --intervals one-second frames with point-to-point traffic to every
other rank, a few MPI operations, a collective, a size histogram and a file; jobs start
one minute apart, the newest last. Then it runs a rollup pass (as the collector does every
few seconds), serves the API and the dashboard on a uvicorn thread of this process, and
prints the median of --repeat runs of:
- `GET /api/jobs`, the first page of the job list (over HTTP; query + JSON);
- one tick of the Jobs page: its refresh callback (`frontend.pages.jobs.refresh`, in the
  dashboard's Flask app context, the newest job shown, nothing on screen yet): every
  request it makes over HTTP into the same process (the list and each card's, at once),
  parsing and rendering, and how many requests that was.

    .venv/bin/python -m bench.jobs_page [--jobs 2000 --ranks 4 --intervals 30 --repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.fabric_api import timed
from collector.service import BackgroundCollector
from frontend.app import create_dash_app
from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.mpi_ops import op_names
from tests.conftest import serving

T0 = 1_700_000_000 * 10**9
SECOND = 10**9
TOKEN = "bench"


def job_frames(job: int, ranks: int, intervals: int) -> list[bytes]:
    """Every frame of one job (all its ranks, all its intervals)."""
    op = op_names().index
    start = T0 + job * 60 * SECOND
    frames = []
    for rank in range(ranks):
        peers = [p for p in range(ranks) if p != rank]
        p2p = wire.records("p2p", [
            {"peer": p, "bytes_sent": 4096 * (p + 1), "msgs_sent": p + 1,
             "bytes_recv": 4096 * (rank + 1), "msgs_recv": rank + 1} for p in peers
        ])  # fmt: skip
        ops = wire.records("op", [
            {"op_id": op("MPI_Isend"), "calls": 2 * len(peers), "bytes": 8192, "time_ns": 900},
            {"op_id": op("MPI_Waitall"), "calls": 1, "bytes": 0, "time_ns": 20_000},
            {"op_id": op("MPI_Allreduce"), "calls": 1, "bytes": 64, "time_ns": 5_000},
        ])  # fmt: skip
        hist = wire.records("hist", [{"op_id": op("MPI_Isend"), "bucket": 13, "count": 4}])
        coll = wire.records("coll", [
            {"op_id": op("MPI_Allreduce"), "comm_id": 1, "comm_size": ranks,
             "root": 0xFFFFFFFF, "calls": 1, "bytes": 64, "time_ns": 5_000}
        ])  # fmt: skip
        io = wire.records("io", [{"layer": 1, "opens": 1, "writes": 2, "bytes_written": 1 << 20,
                                  "path": b"/scratch/out.dat", "mount": b"/scratch",
                                  "fstype": b"lustre"}])  # fmt: skip
        for seq in range(intervals):
            tables = {"p2p": p2p, "op": ops, "hist": hist, "coll": coll, "io": io}
            if seq == 0:
                tables["rank_info"] = wire.records(
                    "rank_info", [{"command": b"./solver --steps 30", "user": b"alice"}]
                )
            frames.append(
                wire.encode_frame(
                    job_id=f"bench-{job:05d}",
                    world_rank=rank,
                    world_size=ranks,
                    seq=seq,
                    host=f"node{rank:03d}",
                    pid=1000 + rank,
                    interval_start_ns=start + seq * SECOND,
                    interval_end_ns=start + (seq + 1) * SECOND,
                    token=TOKEN,
                    tables=tables,
                )
            )
    return frames


def send(address: tuple[str, int], frames: list[bytes]) -> None:
    """Send frames on one connection and wait until each is acknowledged as committed."""
    with socket.create_connection(address, timeout=120) as sock:
        sock.sendall(b"".join(frames))
        buf, acked = b"", 0
        while acked < len(frames):
            chunk = sock.recv(1 << 16)
            assert chunk, "collector closed the connection"
            buf += chunk
            n = len(buf) // wire.ACK_SIZE
            for i in range(n):
                status, _ = wire.decode_ack(buf[i * wire.ACK_SIZE : (i + 1) * wire.ACK_SIZE])
                assert status == 0, f"frame refused: status {status}"
            acked += n
            buf = buf[n * wire.ACK_SIZE :]


def seed_jobs(database_url: str, jobs: int, ranks: int, intervals: int) -> int:
    """Send `jobs` jobs of `ranks` x `intervals` frames through a real collector (50 jobs
    per connection) and run one rollup pass; the rows it rolled up."""
    with BackgroundCollector(database_url, token=TOKEN) as collector:
        for first in range(0, jobs, 50):
            frames = [f for job in range(first, min(first + 50, jobs))
                      for f in job_frames(job, ranks, intervals)]  # fmt: skip
            send(collector.address, frames)
        rows: int = asyncio.run_coroutine_threadsafe(
            collector.service.roll_up_once(), collector.loop
        ).result(600)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--intervals", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        migrate(database.url)
        t = time.perf_counter()
        rows = seed_jobs(database.url, args.jobs, args.ranks, args.intervals)
        seeded = time.perf_counter() - t
        n_frames = args.jobs * args.ranks * args.intervals
        print(
            f"seeded {args.jobs} jobs x {args.ranks} ranks x {args.intervals} intervals "
            f"= {n_frames:,} frames in {seeded:.1f} s; rollup pass: {rows:,} rows"
        )

        engine = make_engine(database.url)
        with serving(create_app(engine)) as port:
            base = f"http://127.0.0.1:{port}"
            http = httpx.Client(base_url=base, timeout=120)
            body = http.get("/api/jobs").content
            jobs_s, _ = timed(lambda: http.get("/api/jobs").raise_for_status(), args.repeat)
            print(f"GET /api/jobs: {jobs_s * 1e3:.1f} ms, {len(body):,} B")

            dash_app = create_dash_app(base)
            from frontend.pages import jobs as jobs_page  # registers a page: after the app

            requests: list[str] = []
            took: dict[str, list[float]] = {}

            def answered(response: httpx.Response) -> None:
                response.read()
                part = response.request.url.path.rsplit("/", 1)[-1]
                took.setdefault(part, []).append(response.elapsed.total_seconds())

            hook = {
                "request": [lambda request: requests.append(request.url.path)],
                "response": [answered],
            }
            dash_app.server.extensions["stacklens_api"]._http.event_hooks = hook
            # The newest job shown, no search or filter, the first page.
            state: tuple[Any, ...] = (None, None, None, None, None, [None], None, 1000, 1000)
            with dash_app.server.app_context():
                tick = jobs_page.refresh(0, *state)
                assert tick["hidden"] is False, tick["status"]
                requests.clear()
                tick_s, _ = timed(lambda: jobs_page.refresh(0, *state), args.repeat)
            per_tick = len(requests) // args.repeat
            print(f"Jobs page tick: {tick_s * 1e3:.1f} ms, {per_tick} HTTP requests at once")
            for part, times in sorted(took.items()):
                print(f"  {part}: median {sorted(times)[len(times) // 2] * 1e3:.1f} ms")
        engine.dispose()
        database.stop()


if __name__ == "__main__":
    main()
