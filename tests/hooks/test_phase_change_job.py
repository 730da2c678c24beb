"""A real job that changes phase mid-run is no MPI slowdown (issue #31 point 4): the job of
tests/hooks/phase_job.py (Open MPI, mpi4py, under the hooks) allreduces 1 MiB every 40-50
ms for 10 s (rank 0 waiting 10 ms per step), then exchanges 4 KiB halos with MPI_Sendrecv,
one rank waiting 20 ms per exchange, for 10 s: its time blocked per byte rises hundreds of
times, but its bytes move in other calls (point-to-point, not collectives). The incident
service, over what the collector stored, opens nothing: the step where the mix of its bytes
changed starts a new baseline (server/incidents/detect.py), and the halo phase is judged
against its own steps once it has enough of them."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.incidents.detect import Thresholds
from server.incidents.service import SETTLE_NS, IncidentService
from stacklens.db import make_engine
from stacklens.schema import Incident, Job
from tests.conftest import mpi_env, stacklens_run

PHASE_JOB = Path(__file__).parent / "phase_job.py"
S = 10**9
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=S)  # fmt: skip


def test_a_job_that_changes_phase_mid_run_opens_no_slowdown(collector, pg_url, hook_library):
    pytest.importorskip("mpi4py")
    job = f"phase-{uuid.uuid4().hex[:8]}"
    env = mpi_env(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
                  STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="100",
                  STACKLENS_JOB_ID=job)  # fmt: skip
    done = stacklens_run(["mpirun", "-np", "2", sys.executable, str(PHASE_JOB), "10", "10"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    engine = make_engine(pg_url)
    try:
        time.sleep(SETTLE_NS / S)  # the job's last steps settle
        service = IncidentService(engine, TH, sweep_interval_s=1.0)
        messages = service.tick()
        with Session(engine) as session:
            incidents = session.scalar(select(func.count()).select_from(Incident))
            (job_id,) = session.scalars(select(Job.id).where(Job.job_key == job)).all()
    finally:
        engine.dispose()
    assert (messages, incidents, service.stats.silenced) == ([], 0, 0)
    # the detector did judge both phases: one step changed the mix (collective bytes to
    # point-to-point), and later halo steps had a baseline of their own
    points = list(service.jobs[job_id].streaks["mpi_slowdown"].evidence)
    changed = [i for i, p in enumerate(points) if p.get("phase_change")]
    assert len(changed) == 1
    judged = [p for p in points[changed[0] :] if p["baseline_per_byte_ns"] is not None]
    assert len(judged) >= 3
    before = [p["baseline_per_byte_ns"] for p in points[: changed[0]]
              if p["baseline_per_byte_ns"] is not None]  # fmt: skip
    assert before and judged[-1]["baseline_per_byte_ns"] > 100 * before[-1]
