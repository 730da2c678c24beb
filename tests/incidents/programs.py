"""Building this folder's test programs: MPI programs with known lines (each with the MPI's
compiler wrapper, for its hook library) and the slow file system (slowfs.c, a plain
shared library); and reading the one incident the incident service opens over what such a
job stored (`tick_incident`)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.incidents.detect import Thresholds
from server.incidents.service import SETTLE_NS, IncidentService
from stacklens.db import make_engine
from stacklens.schema import Incident, Job

HERE = Path(__file__).resolve().parent
COMPILERS = {"openmpi": "mpicc", "mpich": "mpicc.mpich"}


def line_of(source: str, marker: str) -> int:
    """The line of `source` (in this folder) holding `/* site:<marker> */`."""
    lines = (HERE / source).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"/* site:{marker} */" in text)


def build(source: str, mpi: str, out: Path) -> Path:
    """`source` (in this folder) built for `mpi` into `out`, with line tables."""
    program = out / f"{Path(source).stem}.{mpi}"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-fno-optimize-sibling-calls", "-Wall",
                    "-Werror", "-o", program, HERE / source], check=True)  # fmt: skip
    return program


def slowfs(out: Path) -> Path:
    """The slow file system's preload library (slowfs.c) built into `out`."""
    library = out / "libslowfs.so"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-fPIC", "-shared", "-o", library,
                    HERE / "slowfs.c", "-ldl"], check=True)  # fmt: skip
    return library


@dataclass(frozen=True)
class Ticked:
    """What one tick of the incident service did: the one incident it stored, the webhook
    messages it sent, the service (its detectors' state), the job's id and the end of the
    steps the incident's signal held (its end, or, still open, its last hot step)."""

    incident: Incident
    messages: list[dict[str, Any]]
    service: IncidentService
    job_id: int
    last_ns: int


def tick_incident(pg_url: str, job: str, th: Thresholds) -> Ticked:
    """Once the job's last steps have settled, one tick of an incident service with
    thresholds `th` (1 s sweeps, links under http://sl.example) over what the collector
    stored: it must store exactly one incident (else the failure lists every step the
    detectors judged: time per byte, its baseline, time and bytes)."""
    engine = make_engine(pg_url)
    try:
        time.sleep(SETTLE_NS / 1e9)  # the job's last steps settle
        service = IncidentService(engine, th, sweep_interval_s=1.0,
                                  base_url="http://sl.example")  # fmt: skip
        messages = service.tick()
        with Session(engine, expire_on_commit=False) as session:
            found = session.scalars(select(Incident)).all()
            steps = {kind: [(p["t_ns"], p["baseline_per_byte_ns"], p["per_byte_ns"],
                             p["time_ns"], p["bytes"]) for p in streak.evidence]
                     for d in service.jobs.values()
                     for kind, streak in d.streaks.items()}  # fmt: skip
            assert len(found) == 1, steps
            job_id = session.scalar(select(Job.id).where(Job.job_key == job))
            assert job_id is not None
            session.expunge_all()
    finally:
        engine.dispose()
    (incident,) = found
    last = incident.end_ns
    if last is None:
        (signal,) = [s for d in service.jobs.values() for s in d.active()]
        last = signal.last_ns
    return Ticked(incident, messages, service, job_id, last)
