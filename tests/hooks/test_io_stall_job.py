"""The I/O stall detector on a real job under the hooks (tests/hooks/stall_job.py, Open MPI,
mpi4py): two ranks rewrite their files at a steady pace; then rank 1 rewrites its file
back to back while this test stops it for 300 ms of every 310 (SIGSTOP, SIGCONT): the
stop lands mostly inside a write, which then returns only when the rank is resumed, as
a write to a stalled file system would. (The hooks do not time writes to pipes, so a pipe
drained slowly cannot stand in for a slow file.) The incident service, over what the
collector stored, opens an I/O stall incident of that job exactly 2 steps after its
first stalled step began, naming rank 1 first and its file as the one with the most I/O
time."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.incidents import repository as repo
from server.incidents.detect import Thresholds
from server.incidents.service import SETTLE_NS, IncidentService
from stacklens.db import make_engine
from stacklens.schema import Incident
from tests.conftest import mpi_env, stacklens_run

STALL_JOB = Path(__file__).parent / "stall_job.py"
S = 10**9
NORMAL_S, STALL_S = 8, 6
STOPPED_S, RUNNING_S = 0.3, 0.01
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip


def _stall(out: Path, seconds: float) -> None:
    """Once rank 1 says it is stalling (its pid in OUT/stalling), stop it for STOPPED_S of
    every STOPPED_S + RUNNING_S, for `seconds`."""
    note = out / "stalling"
    deadline = time.monotonic() + 120
    while not note.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = int(note.read_text().split()[0])
    until = time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(STOPPED_S)
            os.kill(pid, signal.SIGCONT)
            time.sleep(RUNNING_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # never leave it stopped


def test_a_jobs_stalled_writes_are_an_io_stall_naming_its_rank_and_file(
    tmp_path, collector, pg_url, hook_library
):
    pytest.importorskip("mpi4py")
    staller = threading.Thread(target=_stall, args=(tmp_path, STALL_S - 0.5), daemon=True)
    staller.start()
    job = f"stall-{uuid.uuid4().hex[:8]}"
    env = mpi_env(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
                  STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="100",
                  STACKLENS_JOB_ID=job)  # fmt: skip
    command = ["mpirun", "-np", "2", sys.executable, str(STALL_JOB), str(tmp_path),
               str(NORMAL_S), str(STALL_S)]  # fmt: skip
    done = stacklens_run(command, env)
    assert done.returncode == 0, done.stdout + done.stderr
    staller.join(timeout=30)
    stalled_from = int((tmp_path / "stalling").read_text().split()[1])

    engine = make_engine(pg_url)
    try:
        time.sleep(SETTLE_NS / S)  # the job's last steps settle
        service = IncidentService(engine, TH, sweep_interval_s=1.0)
        messages = service.tick()
        with Session(engine) as session:
            found = session.scalars(select(Incident)).all()
            points = [(p["t_ns"], p["baseline_per_byte_ns"], p["per_byte_ns"], p["time_ns"],
                       p["bytes"]) for d in service.jobs.values()
                      for p in d.streaks["io_stall"].evidence]  # fmt: skip
            assert len(found) == 1, (stalled_from, points)  # the steps and their baselines
            (incident,) = found
            jobs = repo.visible_jobs(session, [incident.id])[incident.id]
    finally:
        engine.dispose()
    assert [m["event"] for m in messages] in (["opened"], ["closed"])
    assert incident.kind == "io_stall" and incident.link_ids == []
    # its first hot step is one of the stalled ones (a step of the job counts its
    # intervals that ended in it)
    assert stalled_from - S < incident.start_ns < stalled_from + STALL_S * S
    assert incident.detected_ns - incident.start_ns == 2 * S  # 2 steps
    (member,) = jobs.values()
    assert (member["job"], member["role"], member["signals"]) == (job, "victim", ["io_stall"])
    assert member["ranks"][0] == 1, (member["ranks"], member["evidence"]["io_stall"]["ranks"])
    assert member["files"][0] == f"POSIX:{tmp_path / 'out.1'}"
    evidence = member["evidence"]["io_stall"]
    assert max(p["per_byte_ns"] or 0 for p in evidence["series"]) >= (
        3 * evidence["baseline_per_byte_ns"]
    )
