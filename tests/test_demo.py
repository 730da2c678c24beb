"""`stacklens demo --for N`: everything starts, the example job's traffic arrives exactly,
and everything it started is gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from stacklens.paths import EXAMPLES_DIR
from tests.conftest import free_port

RANKS, ITERATIONS, BYTES = 4, 40, 262144  # stacklens.cli.demo_workload


def _leftover_processes() -> list[str]:
    """Live (not zombie) processes of the demo workload."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True, check=True)
    program = str(EXAMPLES_DIR / "build" / "ring_allreduce")
    return [line for line in ps.stdout.splitlines() if program in line and not line.startswith("Z")]


def test_demo_runs_the_example_job_and_stops(tmp_path, hook_library, examples_built):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_STATE_DIR=str(tmp_path / "state"),  # embedded PostgreSQL, as on a fresh machine
        STACKLENS_HTTP_PORT=str(port),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INTERVAL_MS="250",
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens.cli", "demo", "--for", "20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    finished = None
    try:
        while finished is None and time.monotonic() - started < 60:
            time.sleep(0.5)
            try:
                jobs = httpx.get(f"{base}/api/jobs", timeout=2).json()
            except httpx.HTTPError:
                continue
            finished = next((j for j in jobs if j["status"] == "finished"), None)
        assert finished is not None, "no demo job finished"
        matrix = httpx.get(f"{base}/api/jobs/{finished['job']}/matrix", timeout=5).json()
        assert matrix["world_size"] == RANKS
        assert {(c["src"], c["dst"]): (c["bytes"], c["messages"]) for c in matrix["cells"]} == {
            (r, (r + 1) % RANKS): (ITERATIONS * (BYTES + r), ITERATIONS) for r in range(RANKS)
        }
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"stacklens is up: dashboard {base}/" in out
    assert "demo: running" in out
    assert (tmp_path / "state" / "pg" / "PG_VERSION").is_file()
    assert _leftover_processes() == []
