"""A real RMA job whose rank arrives late is named a victim of its time blocked in RMA
synchronisation (issue #31 point 2): the job of tests/hooks/rma_job.py (Open MPI, mpi4py,
under the hooks) puts 1 MiB between two MPI_Win_fence calls every 60 ms for 8 s, rank 0
waiting about 50 ms in the first, then rank 1 computes 540 ms more before each first
fence for 6 s, so rank 0 waits about 12 times as long in MPI_Win_fence. The incident
service, over what the collector stored, opens an MPI slowdown of that job 2 steps after
its first late step began: the job its victim, the evidence its time blocked by kind
(nearly all of it RMA synchronisation: `waits_in` rma), and its ranks named as the job
profile names them, rank 1 late at MPI_Win_fence first, then rank 0 waiting for it."""

from __future__ import annotations

import sys
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

RMA_JOB = Path(__file__).parent / "rma_job.py"
S = 10**9
NORMAL_S, LATE_S = 8, 6
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=S)  # fmt: skip


def test_a_late_rank_in_rma_synchronisation_makes_its_job_a_victim(
    tmp_path, collector, pg_url, hook_library
):
    pytest.importorskip("mpi4py")
    job = f"rma-{uuid.uuid4().hex[:8]}"
    env = mpi_env(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
                  STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="100",
                  STACKLENS_JOB_ID=job)  # fmt: skip
    command = ["mpirun", "-np", "2", sys.executable, str(RMA_JOB), str(tmp_path),
               str(NORMAL_S), str(LATE_S)]  # fmt: skip
    done = stacklens_run(command, env)
    assert done.returncode == 0, done.stdout + done.stderr
    late_from = int((tmp_path / "late").read_text())
    engine = make_engine(pg_url)
    try:
        time.sleep(SETTLE_NS / S)  # the job's last steps settle
        service = IncidentService(engine, TH, sweep_interval_s=1.0)
        service.tick()
        with Session(engine) as session:
            found = session.scalars(select(Incident)).all()
            points = [(p["baseline_per_byte_ns"], p["per_byte_ns"], p.get("phase_change"))
                      for d in service.jobs.values()
                      for p in d.streaks["mpi_slowdown"].evidence]  # fmt: skip
            assert len(found) == 1, points  # the steps' time per byte and baselines
            (incident,) = found
            jobs = repo.visible_jobs(session, [incident.id])[incident.id]
    finally:
        engine.dispose()
    assert incident.kind == "mpi_slowdown" and incident.link_ids == []
    assert late_from - S < incident.start_ns < late_from + LATE_S * S
    assert incident.detected_ns - incident.start_ns == 2 * S  # 2 steps
    (member,) = jobs.values()
    assert (member["job"], member["role"], member["signals"]) == (job, "victim", ["mpi_slowdown"])
    evidence = member["evidence"]["mpi_slowdown"]
    # nearly all of it in the fences (the rest: the loop's MPI_Bcast, collective)
    waiting = evidence["waiting_ns"]
    assert evidence["waits_in"] == "rma" and waiting["rma"] > 0.95 * sum(waiting.values())
    assert waiting["rma"] >= 1 * S  # rank 0's waits over the slow steps
    assert evidence["peak_factor"] >= 3.0
    named = [(r["rank"], r["role"], r["op"]) for r in evidence["ranks"]]
    assert named == [(1, "late", "MPI_Win_fence"), (0, "waiting", "MPI_Win_fence")]
    assert member["ranks"][:2] == [1, 0]
