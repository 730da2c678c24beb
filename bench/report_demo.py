# bench/report_demo.py — the demo job's report from the command line and from the job
# page's button while `stacklens demo` runs, against the previous figure path in one run.
"""Report benchmark on a live demo (issues #29 point 3, #30 point 6): how long the report
of the demo's job (`demo-solver`) takes while `stacklens demo` runs on this node (its two
MPI jobs, the collector, the simulated fabric swept every second, the incident detectors
and its own server), from

- the command line: `stacklens report --job demo-solver -o F.pdf|F.html` (a process of its
  own, start-up included), and
- the job page's button: GET /api/reports/jobs/demo-solver?format=...&progress=true read
  to its file, as the page's script reads it (assets/stacklens.js).

Three servers answer, in turn each round: the demo's own (`stacklens up` as shipped: its
report painter started with it), and two servers this benchmark runs over the demo's
database, the same app (server.app.create_app) but for the PDF's figures: `painter` (this
code: plotly.js kept loaded in one page of one Chromium, all of a report's figures in one
call) and `kaleido` (the previous code path: kaleido 1.x, its tab reloaded after every
figure — `kaleido_images` below, kept here to compare). Each server's first PDF is
printed apart (a browser starting), then the median and max of the rounds, and the ratio
previous / now per path. Prints the load average and the CPU count with the figures.

    .venv/bin/python -m bench.report_demo [--warmup 60 --rounds 3]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from presentation.report_model import Report

JOB = "demo-solver"


def kaleido_images(report: Report) -> list[str]:
    """The previous code path of the PDF's figures (to compare): every figure as a PNG
    drawn by kaleido 1.x in its Chromium (2 tabs, started once, each tab reloaded after
    every figure), as data URLs."""
    import kaleido  # type: ignore[import-untyped]

    from server.reports import render

    figs = [fig for section in report.sections for fig in section.figures]
    if not figs:
        return []
    if not getattr(kaleido_images, "started", False):
        kaleido.start_sync_server(n=2, page_generator=kaleido.PageGenerator(mathjax=False),
                                  silence_warnings=True)  # fmt: skip
        kaleido_images.started = True  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-kaleido-") as tmp:
        paths = [Path(tmp) / f"{i}.png" for i in range(len(figs))]
        kaleido.write_fig_from_object_sync([
            {"fig": render.static(fig.figure), "path": path,
             "opts": {"format": "png", "width": render.PDF_FIGURE_WIDTH, "height": fig.height,
                      "scale": render.PDF_IMAGE_SCALE}}
            for fig, path in zip(figs, paths, strict=True)
        ])  # fmt: skip
        return ["data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()
                for p in paths]  # fmt: skip


def serve(database: str, port: int, figures: str) -> None:
    """A server of the app over `database` on 127.0.0.1:`port`, its PDF figures drawn by
    `figures` (painter: this code; kaleido: the previous path)."""
    import uvicorn

    from server.app import create_app
    from server.reports import render
    from stacklens.db import make_engine

    if figures == "kaleido":
        render.images = kaleido_images  # the previous path, for the comparison
    uvicorn.run(create_app(make_engine(database)), host="127.0.0.1", port=port,
                log_level="warning")  # fmt: skip


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer in {seconds:.0f} s")


@contextlib.contextmanager
def demo(scratch: Path, seconds: float) -> Iterator[tuple[str, dict[str, str]]]:
    """`stacklens demo` in a private state dir and ports: (its URL, the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    port = free_port()
    env.update(STACKLENS_STATE_DIR=str(scratch / "state"), STACKLENS_HTTP_PORT=str(port),
               STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
               STACKLENS_COLLECTOR_SOCKET=str(scratch / "ingest.sock"))  # fmt: skip
    log = (scratch / "demo.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "stacklens_cli", "demo", "--for",
                             str(int(seconds))], env=env, stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", env
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cli(base: str, env: dict[str, str], path: Path, job: str = JOB) -> float:
    """Wall seconds of `stacklens report --job job -o path` against `base`."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "stacklens_cli", "report", "--job", job, "-o",
                    str(path), "--server", base], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - t0
    if not path.stat().st_size:
        raise RuntimeError(f"{path}: empty")
    return seconds


def button(base: str, fmt: str) -> float:
    """Wall seconds of the button's request (its progress stream) read to its file."""
    t0 = time.perf_counter()
    with httpx.stream(
        "GET",
        f"{base}/api/reports/jobs/{JOB}",
        params={"format": fmt, "progress": "true"},
        timeout=600,
    ) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            event = json.loads(line) if line else {}
            if "error" in event:
                raise RuntimeError(f"the report failed: {event}")
            if "file" in event:
                if not base64.b64decode(event["file"]):
                    raise RuntimeError("an empty file")
                return time.perf_counter() - t0
    raise RuntimeError("no file in the answer")  # fmt: skip


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmup", type=float, default=60,
                        help="seconds of the demo before the first report")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from stacklens.db import running_embedded_url

    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as tmp:
        scratch = Path(tmp)
        with demo(scratch, args.warmup + 3600) as (shipped, env):
            wait_http(f"{shipped}/api/jobs", 180)
            started = time.monotonic()
            while time.monotonic() - started < args.warmup:
                time.sleep(1)
            database = running_embedded_url(scratch / "state" / "pg")
            if database is None:
                raise RuntimeError("the demo's database is not running")
            servers = {"demo (as shipped)": shipped}
            children = []
            for figures in ("painter", "kaleido"):
                port = free_port()
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "bench.report_demo", "--serve", database, str(port),
                     figures], env=env))  # fmt: skip
                servers[figures] = f"http://127.0.0.1:{port}"
            try:
                for base in servers.values():
                    wait_http(f"{base}/api/jobs", 180)
                print(f"demo running {time.monotonic() - started:.0f} s; {load()}", flush=True)
                for name, base in servers.items():
                    print(f"first PDF of {name:<18} CLI {cli(base, env, scratch / 'f.pdf'):6.2f} s"
                          f"   ({load()})", flush=True)  # fmt: skip
                times: dict[tuple[str, str, str], list[float]] = {}
                for r in range(args.rounds):
                    for name, base in servers.items():
                        for fmt in ("pdf", "html"):
                            for path in ("CLI", "button"):
                                took = (cli(base, env, scratch / f"r.{fmt}") if path == "CLI"
                                        else button(base, fmt))  # fmt: skip
                                times.setdefault((name, path, fmt), []).append(took)
                                print(f"round {r + 1} {name:<18} {path:<6} {fmt:<4} {took:6.2f} s"
                                      f"   ({load()})", flush=True)  # fmt: skip
                print("\nmedian (max) wall seconds over the rounds:")
                for (name, path, fmt), values in times.items():
                    print(f"  {name:<18} {path:<6} {fmt:<4} {statistics.median(values):6.2f}"
                          f" ({max(values):.2f})")  # fmt: skip
                print("previous path (kaleido) / this code (painter), medians:")
                for path in ("CLI", "button"):
                    for fmt in ("pdf", "html"):
                        old = statistics.median(times[("kaleido", path, fmt)])
                        new = statistics.median(times[("painter", path, fmt)])
                        print(f"  {path:<6} {fmt:<4} {old:6.2f} / {new:6.2f} = {old / new:.2f}x")
                print(f"done; {load()}")
            finally:
                for child in children:
                    child.terminate()
                    child.wait(30)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
