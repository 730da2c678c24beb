"""`stacklens up` runs its collector in a process of its own (issue #24 finding 4: one
upload froze the HTTP server, the collector and the API sharing one interpreter lock).

A real `stacklens up` against the test database: the collector is another process than
the API's (and nicer); stopped (SIGSTOP), it cannot hold the API back, which keeps
answering; killed, it is started again and said so; one that cannot start ends `up`;
`up` stops it on SIGTERM. Each test failed on the code before the change (one process).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from stacklens.connguard import ConnectionLimits
from stacklens.settings import Settings
from stacklens_cli.collector_process import NICENESS, CollectorProcess
from tests.collector.test_ingest import T0, exchange, frame, wait_for
from tests.conftest import collector_pid, leftover_processes, query, running_up, up_environment

TOKEN = {"Authorization": "Bearer e2e-token"}
KILLED = "stacklens up: collector: its process ended (killed by SIGKILL); starting it again"
#: The frames of tests/collector/test_ingest.py are from 2023: inside the ingest horizon.
OLD_FRAMES = {"STACKLENS_INGEST_HORIZON_DAYS": "3660"}


def batch(seq: int) -> dict:
    """An HTTP ingest batch of one frame of the job "http-job"."""
    return {"frames": [{
        "job": "http-job", "run_id": 1, "world_rank": 0, "world_size": 1, "seq": seq,
        "interval_start_ns": T0 + seq, "interval_end_ns": T0 + seq + 1,
        "tables": {"p2p": [{"peer": 0, "bytes_sent": 100, "msgs_sent": 1}]},
    }]}  # fmt: skip


def counter(metrics: str, name: str) -> float | None:
    """The value of a sample without labels in a Prometheus exposition (None if absent)."""
    found = re.search(rf"^{name} (\S+)$", metrics, re.MULTILINE)
    return None if found is None else float(found[1])


def test_the_api_answers_while_the_collector_process_is_stopped(pg_url, tmp_path):
    with running_up(pg_url, tmp_path / "state", **OLD_FRAMES) as up:
        pid = collector_pid(up["pid"])
        assert pid != int(up["pid"])
        # nicer than the API: on a busy node the API's answers get the CPU first
        api_nice = os.getpriority(os.PRIO_PROCESS, int(up["pid"]))
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, api_nice + NICENESS)
        host, port = up["STACKLENS_COLLECTOR"].rsplit(":", 1)
        address = (host, int(port))
        assert exchange(address, frame(0, token="e2e-token"), 1) == [(0, 0)]
        os.kill(pid, signal.SIGSTOP)
        try:
            for path in ("/api/health", "/api/jobs"):
                started = time.monotonic()
                answer = httpx.get(up["base"] + path, timeout=10)
                assert answer.status_code == 200, answer.text
                assert time.monotonic() - started < 2.0, path
            assert httpx.get(up["base"] + "/api/jobs").json()["jobs"][0]["job"] == "job-A"
            # /metrics says the collector does not answer (after its control timeout)
            metrics = httpx.get(up["base"] + "/metrics", timeout=20).text
            assert counter(metrics, "stacklens_collector_up") == 0
            assert counter(metrics, "stacklens_http_connections_open") is not None
        finally:
            os.kill(pid, signal.SIGCONT)
        posted = httpx.post(up["base"] + "/api/ingest/frames", json=batch(0), headers=TOKEN)
        assert posted.status_code == 200 and posted.json() == {"stored": 1}, posted.text
        metrics = httpx.get(up["base"] + "/metrics", timeout=10).text
    assert counter(metrics, "stacklens_collector_up") == 1
    assert counter(metrics, "stacklens_store_frames_committed_total") == 2  # TCP, HTTP
    assert counter(metrics, "stacklens_ingest_frames_received_total") == 2
    assert counter(metrics, "stacklens_collector_restarts_total") == 0
    assert query(pg_url, "SELECT job_key FROM jobs ORDER BY 1") == [("http-job",), ("job-A",)]


def test_a_collector_process_that_dies_is_started_again(pg_url, tmp_path):
    with running_up(pg_url, tmp_path / "state", **OLD_FRAMES) as up:
        first = collector_pid(up["pid"])
        host, port = up["STACKLENS_COLLECTOR"].rsplit(":", 1)
        address = (host, int(port))
        os.kill(first, signal.SIGKILL)
        # meanwhile the HTTP ingest says to resend; the API answers
        assert httpx.get(up["base"] + "/api/health").status_code == 200
        wait_for(lambda: "listening again" in Path(up["log"]).read_text(), timeout=60)
        second = collector_pid(up["pid"])
        assert second != first
        assert exchange(address, frame(0, token="e2e-token"), 1) == [(0, 0)]
        posted = httpx.post(up["base"] + "/api/ingest/frames", json=batch(0), headers=TOKEN)
        assert posted.json() == {"stored": 1}, posted.text
        metrics = httpx.get(up["base"] + "/metrics", timeout=10).text
        log = Path(up["log"]).read_text()
    assert counter(metrics, "stacklens_collector_restarts_total") == 1
    assert counter(metrics, "stacklens_store_frames_committed_total") == 2  # since the restart
    assert KILLED in log.splitlines()
    assert f"stacklens up: collector: listening again on {host}:{port} (process {second})" in log


def test_up_stops_its_collector_process_before_it_ends(pg_url, tmp_path):
    state = tmp_path / "state"
    with running_up(pg_url, state) as up:
        pid = collector_pid(up["pid"])
    # running_up ended `up` with SIGTERM and reaped it: its collector process went first
    assert not Path(f"/proc/{pid}").exists()
    assert leftover_processes(str(state)) == []
    assert Path(up["log"]).read_text().splitlines()[-1] == "stacklens up: stopped"


def test_up_ends_when_a_restarted_collector_cannot_get_ready(pg_url, tmp_path):
    """The collector's port taken while its process restarts: `up` says why and ends with
    exit status 1, nothing left running."""
    state = tmp_path / "state"
    env = up_environment(pg_url, state)
    host, port = env["STACKLENS_COLLECTOR"].rsplit(":", 1)
    state.mkdir()
    with (state / "up.log").open("w") as out:
        up = subprocess.Popen([sys.executable, "-m", "stacklens_cli", "up"], env=env,
                              stdout=out, stderr=out)  # fmt: skip
    try:
        log = state / "up.log"
        wait_for(lambda: "stacklens is up" in log.read_text(), timeout=60)
        pid = collector_pid(up.pid)
        with socket.socket() as squatter:
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=10)
            squatter.bind((host, int(port)))  # before the restart, a second later
            squatter.listen()
            assert up.wait(60) == 1
    finally:
        up.kill()
        up.wait()
    lines = log.read_text().splitlines()
    assert KILLED in lines
    assert (f"stacklens up: collector: cannot start: [Errno 98] error while attempting to bind on "
            f"address ('{host}', {port}): address already in use") in lines  # fmt: skip
    assert lines[-2:] == [
        "stacklens up: stopped",
        "stacklens: collector: the collector process ended (exit status 1) before it was ready",
    ]
    assert leftover_processes(str(state)) == []


def test_the_control_socket_binds_under_a_deep_tmpdir(tmp_path, monkeypatch):
    """A TMPDIR too deep for a Unix socket (a batch job's, pytest's) puts the control
    directory in /tmp: the socket binds, in a directory only this user may enter."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    process = CollectorProcess(Settings(), "postgresql://unused", ConnectionLimits())
    try:
        assert process.link.path.parent.parent == Path("/tmp")
        assert process.link.path.parent.stat().st_mode & 0o777 == 0o700
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(process.link.path))
    finally:
        process.link.path.unlink(missing_ok=True)
        process.link.path.parent.rmdir()
