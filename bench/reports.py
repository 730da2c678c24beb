# bench/reports.py — the 1,024-rank hour's report: built, rendered, and end to end.
"""Report benchmark (#16): how long the report of a 1,024-rank, 1-hour job takes to build
and render, HTML and PDF, with the job placed on a 512-host fat tree.

Seeds the job of bench/jobs_series.py (1,024 ranks x 3,600 one-second intervals: the first
and last interval of every rank through the real collector, the rest bulk-inserted, then
the collector's rollup pass), its ranks two per host on the hosts of a 512-host fat tree
(bench/fabric_api.py's fabric, written through the real FabricStore) with one sweep a
minute over the job's hour; then times, in this process, over the server's own code:

- the report built (every query, the findings, the figures as Plotly objects),
- that report rendered as HTML (plotly.js embedded, figures as JSON),
- rendered as PDF (the painter's Chromium for the figures, cold at the first PDF of the
  process, then warm; WeasyPrint for the pages) and, with --kaleido, in turn with it, by
  the previous figure path (kaleido, bench/report_demo.kaleido_images) for the ratio; the
  figures alone and WeasyPrint alone,
- GET /api/reports/jobs/{job}?format=html|pdf end to end over the ASGI test client,
- and `stacklens report --job {job} -o F.html|F.pdf` end to end (a process of its own)
  against the app served by uvicorn in another process (its first PDF apart: a browser
  starting).

The load average is printed with the figures (on a shared node most of the wall time is
waiting for a core).

    .venv/bin/python -m bench.reports [--ranks 1024 --seconds 3600 --repeat 3]
                                      [--data DIR] [--kaleido]

With --data DIR the seeded database is kept in DIR and used again by the next run of the
same sizes (seeding takes minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import psycopg
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from bench.fabric_api import CAPACITY, sweep, topology
from bench.jobs_page import send
from bench.jobs_series import JOB, SECOND, T0, TOKEN, bulk_sql, frame
from bench.report_demo import cli, free_port, kaleido_images, wait_http
from collector.fabric.counters import DeltaTracker
from collector.fabric.store import FabricStore
from collector.service import BackgroundCollector
from emulator.fattree import fat_tree
from presentation.report_model import Report
from server.app import create_app
from server.query_params import ALL_TIME
from server.reports import build, render
from stacklens.constants import PORT_COUNTERS
from stacklens.db import make_engine, migrate, start_embedded

T = TypeVar("T")


def fabric(url: str, hosts: int, seconds: int) -> list[str]:
    """The fat tree with one sweep a minute over the job's window; its host names."""
    tree = fat_tree(hosts)
    topo = topology(tree)
    ends = sorted(topo.ports)
    rng = np.random.default_rng(7)
    words = np.zeros((len(ends), len(PORT_COUNTERS)), dtype=np.uint64)
    data = [PORT_COUNTERS.index(c) for c in ("xmit_bytes", "rcv_bytes", "xmit_wait")]
    store = FabricStore(url)
    try:
        store.write_topology(topo, T0 - 60 * SECOND, [])
        tracker = DeltaTracker()
        for minute in range(seconds // 60 + 1):
            words[:, data] += rng.integers(0, CAPACITY * 15, size=(len(ends), 3), dtype=np.uint64)
            store.write_samples(
                tracker.update(sweep(ends, words.copy(), T0 + minute * 60 * SECOND))
            )
    finally:
        store.close()
    return list(tree.hosts)


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, float, T]:
    """(median, max) wall seconds of `repeat` calls of fn, and its last result; prints the
    median CPU seconds of this process per call (on a loaded machine the wall time is
    mostly waiting for a core; the database's own CPU is not in it)."""
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"  (this process's CPU: {statistics.median(cpu):.2f} s per call)", flush=True)
    return statistics.median(times), max(times), result


def seed(url: str, ranks: int, seconds: int, hosts_n: int) -> None:
    """The job and its fabric into the database at `url` (migrated), rolled up."""
    t = time.perf_counter()
    hosts = fabric(url, hosts_n, seconds)
    with BackgroundCollector(url, token=TOKEN) as collector:
        ends = [frame(r, ranks, s, hosts) for r in range(ranks) for s in (0, seconds - 1)]
        send(collector.address, ends)
        with psycopg.connect(url, autocommit=True) as conn:
            for sql in bulk_sql(ranks, seconds):
                conn.execute(sql)
            conn.execute("ANALYZE")
        asyncio.run_coroutine_threadsafe(collector.service.roll_up_once(), collector.loop).result(
            3600
        )
    print(f"seeded and rolled up: {ranks} ranks x {seconds} s on {len(hosts)} hosts, "
          f"{seconds // 60 + 1} sweeps, {time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip


@contextlib.contextmanager
def database_in(data: Path | None, ranks: int, seconds: int, hosts: int) -> Iterator[str]:
    """The URL of a database holding the seeded job: in `data` (seeded there once, kept
    for the next run with the same sizes) or, without it, in a scratch directory."""
    with contextlib.ExitStack() as stack:
        if data is None:
            data = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp")))  # fmt: skip
        database = start_embedded(data / "pg")
        stack.callback(database.stop)
        marker, sizes = data / "seeded", f"{ranks} {seconds} {hosts}"
        if not marker.exists() or marker.read_text() != sizes:
            migrate(database.url)
            seed(database.url, ranks, seconds, hosts)
            marker.write_text(sizes)
        else:
            print(f"the seeded job kept in {data} ({sizes.replace(' ', ' / ')})", flush=True)
        yield database.url


def load() -> str:
    """The load average now, and the CPUs it shares."""
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} CPUs"


@contextlib.contextmanager
def server(url: str, scratch: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The app served by uvicorn over `url` in a process of its own (as `stacklens up`
    serves it, its painter started with it): its base URL and the environment of a CLI
    that talks to it (a private state dir, no token: the loopback viewer)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env["STACKLENS_STATE_DIR"] = str(scratch / "state")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench.report_demo", "--serve", url,
                             str(port), "painter"], env=env)  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/api/jobs", 180)
        yield base, env
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--data",
        type=Path,
        help="keep the seeded database here and use it "
        "again next time (default: seeded anew in a scratch directory)",
    )
    parser.add_argument(
        "--kaleido",
        action="store_true",
        help="also render the PDF by the previous figure path (kaleido), in turn, for the ratio",
    )
    args = parser.parse_args()
    with (
        database_in(args.data, args.ranks, args.seconds, args.hosts) as url,
        tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as tmp,
    ):
        scratch = Path(tmp)
        print(f"start: {load()}", flush=True)
        engine = make_engine(url)

        def built() -> Report:
            with Session(engine) as session:
                return build.job_report(session, JOB, None, ALL_TIME)

        seconds, worst, report = timed(built, args.repeat)
        print(f"report built:            {seconds:6.2f} s (max {worst:.2f})", flush=True)
        seconds, worst, body = timed(lambda: render.html(report), args.repeat)
        print(f"rendered as HTML:        {seconds:6.2f} s (max {worst:.2f}), "
              f"{len(body) / 1e6:.1f} MB", flush=True)  # fmt: skip
        seconds, _, body = timed(lambda: render.pdf(report), 1)
        print(f"rendered as PDF (cold):  {seconds:6.2f} s, {len(body) / 1e6:.1f} MB",
              flush=True)  # fmt: skip
        if args.kaleido:
            timed(lambda: render.pdf(report, kaleido_images), 1)  # kaleido started
            now: list[float] = []
            before: list[float] = []
            for _ in range(args.repeat):  # in turn: this code, the previous figure path
                now.append(timed(lambda: render.pdf(report), 1)[0])
                before.append(timed(lambda: render.pdf(report, kaleido_images), 1)[0])
            new, old = statistics.median(now), statistics.median(before)
            print(f"rendered as PDF (warm):  {new:6.2f} s (max {max(now):.2f}); previous "
                  f"path (kaleido) {old:.2f} s (max {max(before):.2f}): {old / new:.2f}x",
                  flush=True)  # fmt: skip
        else:
            seconds, worst, _ = timed(lambda: render.pdf(report), args.repeat)
            print(f"rendered as PDF (warm):  {seconds:6.2f} s (max {worst:.2f})", flush=True)
        seconds, worst, urls = timed(lambda: render.images(report), args.repeat)
        print(f"  its figures alone:     {seconds:6.2f} s (max {worst:.2f}), {len(urls)}",
              flush=True)  # fmt: skip
        seconds, worst, _ = timed(lambda: render.pdf(report, lambda _r: urls), args.repeat)
        print(f"  WeasyPrint alone:      {seconds:6.2f} s (max {worst:.2f})", flush=True)
        print(f"end to end ({load()}):", flush=True)
        app = create_app(engine)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            for fmt in ("html", "pdf"):

                def get(fmt: str = fmt) -> int:
                    answer = client.get(f"/api/reports/jobs/{JOB}", params={"format": fmt})
                    return len(answer.raise_for_status().content)

                seconds, worst, size = timed(get, args.repeat)
                print(f"GET ...?format={fmt:<4}       {seconds:6.2f} s (max {worst:.2f}), "
                      f"{size / 1e6:.1f} MB   ({load()})", flush=True)  # fmt: skip
        engine.dispose()
        with server(url, scratch) as (base, env):
            cli(base, env, scratch / "first.pdf", JOB)  # the server's painter started
            for fmt in ("html", "pdf"):
                took = [cli(base, env, scratch / f"r.{fmt}", JOB) for _ in range(args.repeat)]
                print(f"stacklens report -o r.{fmt:<4} {statistics.median(took):6.2f} s "
                      f"(max {max(took):.2f})   ({load()})", flush=True)  # fmt: skip
        print(f"done: {load()}", flush=True)


if __name__ == "__main__":
    main()
