"""Fabric page at cluster scale: server CPU per viewer (1 vs 10) and Chromium timings.

Writes the 1,792-host fat tree of bench/fabric_api.py (128 switches, 1,920 nodes, 3,584
links, 7,168 ports) through the real FabricStore into an embedded PostgreSQL, serves the
real app (API + dashboard) with uvicorn in a child process, and keeps writing one sweep
per second (random traffic, a few errors) as the sampler would. Then:

1. Chromium (Playwright, Debian's chromium) opens /fabric, twice (the first viewer, with
   the server's shared answers cold; then another page): time from navigation to the
   first painted graph, element count, and the ticks' fetch-to-painted times measured by
   the page itself (`window.stacklensFabricTicks`, assets/fabric.js).
2. Viewers emulated over HTTP doing per tick exactly what the page's browser asks of the
   server: GET /api/fabric/state with If-None-Match every tick, and the links grid +
   events and the (closed) detail panel callbacks (POST /_dash-update-component) every
   TABLE_TICKS ticks. The server process's CPU time
   (and PostgreSQL's) over a window with 1 viewer and with 10 viewers; per viewer and the
   ratio.

With --sim the sweeps are not written by the benchmark but by the real sampler
(collector/fabric/service.FabricSampler, as `stacklens up` runs it: MAD sweeps of every
port, period 1 s) over the same fat tree simulated by ibsim, and each window also prints
whether the period held while the viewers were served (issue #30 point 2): the sweeps
done, those behind schedule (`stacklens_fabric_sweeps_behind`), their mean duration,
and the store's writer (its own thread): sweeps stored and merged, the most sweeps
waiting at once (read every 50 ms) and the mean store.

    .venv/bin/python -m bench.fabric_viewers [--hosts 1792 --window 20] [--sim] [--no-chromium]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from bench.fabric_api import sweep, topology
from collector.fabric.counters import DeltaTracker
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.fabric.store import FabricStore
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim
from stacklens.constants import PORT_COUNTERS
from stacklens.db import migrate, start_embedded

#: Ticks between two refreshes of the page's tables (frontend/pages/fabric.py TABLE_TICKS;
#: that module registers a Dash page on import, so it is not imported here).
TABLE_TICKS = 5
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
#: JS: whether the graph is drawn and painted (every edge has its title), and its size.
PAINTED = """() => { const el = document.querySelector('#fabric-graph');
  const cy = el && el._cyreg && el._cyreg.cy;
  if (!cy || cy.edges().length === 0 || cy.edges('[title]').length !== cy.edges().length)
    return null;
  return {nodes: cy.nodes().length, edges: cy.edges().length}; }"""


class Sweeper:
    """Writes one sweep of every port per `period_s` in a thread, as the sampler would."""

    def __init__(self, url: str, hosts: int, period_s: float = 1.0):
        self.topo = topology(fat_tree(hosts))
        self.ends = sorted(self.topo.ports)
        self.url, self.period_s = url, period_s
        self.words = np.zeros((len(self.ends), len(PORT_COUNTERS)), dtype=np.uint64)
        self.rng = np.random.default_rng(7)
        self.tracker = DeltaTracker()
        self.store = FabricStore(url)
        self.store.write_topology(self.topo, time.time_ns(), [])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def write_one(self) -> None:
        """One sweep: random traffic (up to a tenth of 4x HDR), errors on a few ports."""
        data = [PORT_COUNTERS.index(c) for c in ("xmit_bytes", "rcv_bytes")]
        n = len(self.ends)
        self.words[:, data] += self.rng.integers(0, 25_000_000_000 // 40, size=(n, 2),
                                                 dtype=np.uint64)  # fmt: skip
        errors = PORT_COUNTERS.index("symbol_errors")
        self.words[self.rng.integers(0, n, size=8), errors] += np.uint64(3)
        raw = sweep(self.ends, self.words.copy(), time.time_ns())
        self.store.write_samples(self.tracker.update(raw))

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.write_one()

    def __enter__(self) -> Sweeper:
        self.write_one()
        time.sleep(0.05)
        self.write_one()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.store.close()


class Sampled:
    """The real sampler (period `period_s`) over the fat tree of `hosts` simulated by ibsim
    (and brought up by opensm) in `workdir`, sampling in a thread of its own (its asyncio
    loop) as `stacklens up` does; `topo` and `ends` as Sweeper's."""

    def __init__(self, url: str, hosts: int, workdir: Path, period_s: float = 1.0):
        self.url, self.period_s = url, period_s
        self.sim = FabricSim(fat_tree(hosts), workdir)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self.queue_max = 0

    async def _loop(self) -> None:
        await self.sampler.start()
        while not self._stop.is_set():
            await asyncio.sleep(0.1)
        await self.sampler.stop()

    def figures(self) -> dict[str, float]:
        """So far: sweeps, sweeps behind schedule, timed sweeps and their seconds, sweeps
        stored and merged, timed stores and their seconds; and the most sweeps waiting to
        be stored at once since the last figures()."""
        s, w = self.sampler, self.sampler.writer
        out = {"sweeps": s.sweeps, "behind": s.behind, "timed": s.sweep_timings.count,
               "timed_s": s.sweep_timings.total_s, "stored": w.stored, "merged": w.merged,
               "stores": w.store_timings.count, "stores_s": w.store_timings.total_s,
               "queue_max": self.queue_max}  # fmt: skip
        self.queue_max = 0
        return out

    def _watch(self) -> None:
        """The most sweeps waiting to be stored, read every 50 ms."""
        while not self._stop.wait(0.05):
            self.queue_max = max(self.queue_max, self.sampler.writer.pending)

    def __enter__(self) -> Sampled:
        self.sim.__enter__()
        source = MadSource(env=self.sim.client_env(), workdir=self.sim.workdir)
        self.sampler = FabricSampler(self.url, source, self.period_s, 3600.0)
        self.sampler.step()  # the discovery and a first sweep, before the viewers come
        self.topo = self.sampler.topology
        self.ends = self.topo.sweep_targets()
        self._thread.start()
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._watcher.join()
        self.sim.__exit__(*exc)


@contextlib.contextmanager
def served(url: str, port: int, fold_above: int = 256) -> Iterator[subprocess.Popen]:
    """The stacklens app (API + dashboard) over `url` in a child process on `port`."""
    code = (
        "import sys, uvicorn; from stacklens_cli.site import create_site; "
        "from stacklens.db import make_engine; "
        f"app = create_site(make_engine({url!r}), api_base_url='http://127.0.0.1:{port}', "
        f"fabric_fold_above={fold_above}); "
        f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (those still alive)."""
    return sum(cpu_by_pid(pids).values())


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each of these processes still alive."""
    found = {}
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            found[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two cpu_by_pid readings by the processes alive at both (a
    backend that ended meanwhile took its time with it)."""
    return sum(after[pid] - before[pid] for pid in before.keys() & after.keys())


def postgres_pids(data_dir: Path) -> list[int]:
    """The PostgreSQL processes of the embedded database in `data_dir`: its postmaster and
    that one's children (backends, background workers) now."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(proc.name))
    return pids


def measure_page(page, base: str, ticks: int = 5, timeout_s: float = 60) -> dict:
    """Open /fabric in `page` (Playwright): seconds to the first painted graph, its node and
    edge counts, and the fetch-to-painted ms of the next `ticks` ticks (median, max)."""
    t0 = time.monotonic()
    page.goto(base + "/fabric")
    handle = page.wait_for_function(PAINTED, timeout=timeout_s * 1000)
    first = time.monotonic() - t0
    size = handle.json_value()
    # When the page reached each stage (ms since navigation; assets/fabric.js marks them),
    # and when the first state and graph answers had arrived (the browser's resource timing).
    stages = page.evaluate(
        "() => Object.fromEntries(['fabric-state', 'fabric-graph', 'fabric-painted'].map("
        "(n) => [n, Math.round((performance.getEntriesByName(n)[0] || {}).startTime || -1)])"
        ".concat([['dom_content_loaded', Math.round(performance.getEntriesByType('navigation')"
        "[0].domContentLoadedEventEnd)]]).concat([['state_answered', '/api/fabric/state'], "
        "['graph_answered', '/_fabric/graph']].map(([k, p]) => [k, Math.round((performance"
        ".getEntriesByType('resource').find((e) => new URL(e.name).pathname === p) || "
        "{}).responseEnd || -1)])))"
    )
    page.evaluate("() => { window.stacklensFabricTicks.length = 0; }")
    page.wait_for_function(
        f"() => window.stacklensFabricTicks.filter((t) => t.edges > 0).length >= {ticks}",
        timeout=(ticks * 3 + 30) * 1000,
    )
    times = [t["fetch_to_painted_ms"] for t in page.evaluate("() => window.stacklensFabricTicks")
             if t["edges"] > 0]  # fmt: skip
    return {"first_render_s": first, **size, "stages_ms": stages,
            "tick_median_ms": float(np.median(times)),
            "tick_max_ms": max(times), "ticks": len(times)}  # fmt: skip


def chromium(base: str, ticks: int = 5) -> list[dict]:
    """`measure_page` in a fresh headless Chromium: the first viewer (the server's shared
    answers and the browser's cache cold), then a second page (warm)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        try:
            out = []
            for _ in range(2):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                out.append(measure_page(page, base, ticks))
                page.close()
            return out
        finally:
            browser.close()


def _dash_request(outputs: list[tuple[str, str]], inputs: list[tuple[str, str, object]]) -> dict:
    """The body of a Dash callback request (POST /_dash-update-component)."""
    return {
        "output": ".." + "...".join(f"{i}.{p}" for i, p in outputs) + "..",
        "outputs": [{"id": i, "property": p} for i, p in outputs],
        "inputs": [{"id": i, "property": p, "value": v} for i, p, v in inputs],
        "changedPropIds": [f"{inputs[0][0]}.{inputs[0][1]}"],
        "state": [],
    }


#: The view of a page opened at /fabric (frontend/pages/fabric.py view_of({})).
VIEW = {"live": "5m", "from": None, "to": None, "at": None, "step": None, "job": "",
        "focus": None}  # fmt: skip
#: What the page's slower callback asks every TABLE_TICKS ticks: the links grid and the
#: events (frontend/pages/fabric.py `tables`; the detail panel, closed, asks nothing).
TABLE_REQUESTS = [
    _dash_request(
        [("fabric-links-grid", "rowData"), ("fabric-links-caption", "children"),
         ("fabric-links-newer", "disabled"), ("fabric-links-older", "disabled"),
         ("fabric-links-next", "data"), ("fabric-events-table", "children"),
         ("fabric-status", "children")],
        [("fabric-table-interval", "n_intervals", 1), ("fabric-view", "data", VIEW),
         ("fabric-links-sort", "value", "utilisation"), ("fabric-links-pages", "data", [None])],
    ),
]  # fmt: skip


def viewer(base: str, stop: threading.Event, counts: list[int], i: int, period_s: float) -> None:
    """One emulated viewer: per tick the state (If-None-Match), every TABLE_TICKS ticks the
    tables callback; counts[i] += 1 per tick."""
    etag = None
    tick = 0
    with httpx.Client(base_url=base, timeout=30) as http:
        while not stop.is_set():
            started = time.monotonic()
            r = http.get("/api/fabric/state", headers={"If-None-Match": etag} if etag else {})
            assert r.status_code in (200, 304), r.status_code
            etag = r.headers.get("etag", etag)
            if tick % TABLE_TICKS == 0:
                for body in TABLE_REQUESTS:
                    t = http.post("/_dash-update-component", json=body)
                    assert t.status_code in (200, 204), t.text[:300]
            tick += 1
            counts[i] += 1
            stop.wait(max(0.0, period_s - (time.monotonic() - started)))


def server_cpu(
    base: str,
    pids: list[int],
    pg: list[int],
    viewers: int,
    window_s: float,
    sampled: Sampled | None = None,
) -> dict:
    """CPU of the server (and of PostgreSQL) per second with `viewers` emulated viewers;
    with `sampled`, the real sampler's sweeps over the same window too."""
    stop = threading.Event()
    counts = [0] * viewers
    threads = [threading.Thread(target=viewer, args=(base, stop, counts, i, 1.0))
               for i in range(viewers)]  # fmt: skip
    for t in threads:
        t.start()
    time.sleep(3)  # warm up: every viewer past its first full answers
    s0 = sampled.figures() if sampled else None
    c0, p0, t0, n0 = cpu_by_pid(pids), cpu_by_pid(pg), time.monotonic(), sum(counts)
    time.sleep(window_s)
    c1, p1, t1, n1 = cpu_by_pid(pids), cpu_by_pid(pg), time.monotonic(), sum(counts)
    s1 = sampled.figures() if sampled else None
    stop.set()
    for t in threads:
        t.join()
    dt = t1 - t0
    out = {"viewers": viewers, "server_core": cpu_used(c0, c1) / dt,
           "postgres_core": cpu_used(p0, p1) / dt,
           "ticks_per_s": (n1 - n0) / dt}  # fmt: skip
    if s0 is not None and s1 is not None:
        d = {k: s1[k] - s0[k] for k in s0}
        out |= {"sweeps_per_s": d["sweeps"] / dt, "sweeps_behind": d["behind"],
                "sweep_ms_mean": 1000 * d["timed_s"] / d["timed"] if d["timed"] else 0.0,
                "sweeps_stored": d["stored"], "sweeps_merged": d["merged"],
                "store_ms_mean": 1000 * d["stores_s"] / d["stores"] if d["stores"] else 0.0,
                "store_queue_max": s1["queue_max"]}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=1792)
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured per case")
    parser.add_argument("--port", type=int, default=7491)
    parser.add_argument("--sim", action="store_true",
                        help="the real sampler over ibsim instead of written sweeps")  # fmt: skip
    parser.add_argument("--no-chromium", action="store_true",
                        help="only the emulated viewers (no browser)")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            base = f"http://127.0.0.1:{args.port}"
            sampled = (
                Sampled(database.url, args.hosts, Path(scratch) / "ibsim") if args.sim else None
            )
            sweeps = sampled or Sweeper(database.url, args.hosts)
            with sweeps as sweeper, served(database.url, args.port) as proc:
                topo = sweeper.topo
                how = "swept by the sampler over ibsim" if args.sim else "a sweep written"
                print(f"fabric: {len(topo.nodes)} nodes, {len(topo.links)} links, "
                      f"{len(sweeper.ends)} ports; {how} every second")  # fmt: skip
                viewers = ("first viewer", "next viewer")
                pages = [] if args.no_chromium else chromium(base)
                for name, page in zip(viewers[: len(pages)], pages, strict=True):
                    rounded = {k: round(v, 3) if isinstance(v, float) else v
                               for k, v in page.items()}  # fmt: skip
                    print(f"chromium, {name}:", json.dumps(rounded))
                pg = postgres_pids(Path(scratch) / "pg")  # with the server's connections
                results = [server_cpu(base, [proc.pid], pg, n, args.window, sampled)
                           for n in (1, 10)]  # fmt: skip
                for r in results:
                    print("viewers:", json.dumps({k: round(v, 4) for k, v in r.items()}))
                one, ten = results
                print(
                    f"server CPU: one viewer {one['server_core']:.1%} of a core, "
                    f"10 viewers {ten['server_core']:.1%} "
                    f"= {ten['server_core'] / one['server_core']:.2f}x one viewer; "
                    f"PostgreSQL {one['postgres_core']:.1%} / {ten['postgres_core']:.1%}"
                )
        finally:
            database.stop()


if __name__ == "__main__":
    main()
