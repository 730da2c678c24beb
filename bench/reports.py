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
  process, then warm; WeasyPrint for the pages), and, in turn with it, by the previous
  figure path (kaleido, bench/report_demo.kaleido_images) for the ratio; the figures
  alone and WeasyPrint alone,
- and GET /api/reports/jobs/{job}?format=html|pdf end to end over the ASGI test client.

    .venv/bin/python -m bench.reports [--ranks 1024 --seconds 3600 --repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import psycopg
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from bench.fabric_api import CAPACITY, sweep, topology
from bench.jobs_page import send
from bench.jobs_series import JOB, SECOND, T0, TOKEN, bulk_sql, frame
from bench.report_demo import kaleido_images
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--hosts", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            t = time.perf_counter()
            hosts = fabric(database.url, args.hosts, args.seconds)
            with BackgroundCollector(database.url, token=TOKEN) as collector:
                ends = [frame(r, args.ranks, s, hosts) for r in range(args.ranks)
                        for s in (0, args.seconds - 1)]  # fmt: skip
                send(collector.address, ends)
                with psycopg.connect(database.url, autocommit=True) as conn:
                    for sql in bulk_sql(args.ranks, args.seconds):
                        conn.execute(sql)
                    conn.execute("ANALYZE")
                asyncio.run_coroutine_threadsafe(
                    collector.service.roll_up_once(), collector.loop
                ).result(3600)
            print(f"seeded and rolled up: {args.ranks} ranks x {args.seconds} s on "
                  f"{len(hosts)} hosts, {args.seconds // 60 + 1} sweeps, "
                  f"{time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
            engine = make_engine(database.url)

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
            seconds, worst, urls = timed(lambda: render.images(report), args.repeat)
            print(f"  its figures alone:     {seconds:6.2f} s (max {worst:.2f}), {len(urls)}",
                  flush=True)  # fmt: skip
            seconds, worst, _ = timed(lambda: render.pdf(report, lambda _r: urls), args.repeat)
            print(f"  WeasyPrint alone:      {seconds:6.2f} s (max {worst:.2f})", flush=True)
            app = create_app(engine)
            with TestClient(app, base_url="http://127.0.0.1") as client:
                for fmt in ("html", "pdf"):

                    def get(fmt: str = fmt) -> int:
                        answer = client.get(f"/api/reports/jobs/{JOB}", params={"format": fmt})
                        return len(answer.raise_for_status().content)

                    seconds, worst, size = timed(get, args.repeat)
                    print(f"GET ...?format={fmt:<4}       {seconds:6.2f} s (max {worst:.2f}), "
                          f"{size / 1e6:.1f} MB", flush=True)  # fmt: skip
            engine.dispose()
        finally:
            database.stop()


if __name__ == "__main__":
    main()
