"""`stacklens demo --for N`: everything starts (the simulated fabric too), the example job's
traffic arrives exactly, its ranks sit on simulated hosts whose ports are sampled, and
everything it started is gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import psycopg

from stacklens.db import running_embedded_url
from tests.conftest import free_port, leftover_processes

RANKS, ITERATIONS, BYTES = 4, 40, 262144  # stacklens_cli.services.demo_workload
DEMO_HOSTS = ["host01", "host09", "host17", "host25"]  # 4 ranks on the 32-host fat tree


def _fabric_view(state_dir, job_key: str) -> tuple[list[str], int]:
    """Hosts of the job's ranks and the number of stored fabric port samples."""
    url = running_embedded_url(state_dir / "pg")
    assert url is not None
    with psycopg.connect(url) as conn:
        hosts = conn.execute(
            "SELECT host FROM ranks JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
            "ORDER BY world_rank",
            (job_key,),
        ).fetchall()
        samples = conn.execute("SELECT count(*) FROM fabric_port_samples").fetchone()[0]
    return [h for (h,) in hosts], samples


def test_demo_runs_the_example_job_and_stops(tmp_path, hook_library, examples_built):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_STATE_DIR=str(tmp_path / "state"),  # embedded PostgreSQL, as on a fresh machine
        STACKLENS_HTTP_PORT=str(port),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_COLLECTOR_SOCKET=str(tmp_path / "ingest.sock"),  # not the node's own
        STACKLENS_INTERVAL_MS="250",
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens_cli", "demo", "--for", "20", "--workload", "ring"],
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
                jobs = httpx.get(f"{base}/api/jobs", timeout=2).json()["jobs"]
            except httpx.HTTPError:
                continue
            finished = next((j for j in jobs if j["status"] == "finished"), None)
        assert finished is not None, "no demo job finished"
        hosts, samples = _fabric_view(tmp_path / "state", finished["job"])
        assert hosts == DEMO_HOSTS
        assert samples > 0
        running = leftover_processes(str(tmp_path / "state"))
        assert any(c.startswith("ibsim ") for c in running), running  # the check sees them
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
    assert leftover_processes(str(tmp_path / "state")) == []
