"""The I/O stall detector on a real job under the hooks (tests/hooks/stall_job.py, Open MPI,
mpi4py) on a file system whose speed this test sets: a tmpfs mounted for the job alone (a
mount namespace of its own) and tests/incidents/slowfs.c, preloaded after the hooks. Two
ranks rewrite a 64 KiB block of their files every 100 ms, each write made 5 ms slow (a
steady baseline of time per byte that neither a disk nor the machine's load moves); then
rank 1 rewrites a file of a stalled directory back to back, each write made 250 ms slow,
as a stalled file system's would be. The incident service, over what the collector
stored, opens an I/O stall incident of that job exactly 2 steps after its first stalled
step began, naming rank 1 first and its stalled file as the one with the most I/O time;
the stored writes to it are exactly those the program made and the shim slowed."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.incidents import repository as repo
from server.incidents.detect import Thresholds
from stacklens.db import make_engine
from stacklens.paths import LIBRARIES
from stacklens.schema import IoDelta
from tests.hooks import jobs
from tests.incidents.programs import slowfs, tick_incident

STALL_JOB = Path(__file__).parent / "stall_job.py"
S = 10**9
NORMAL_S, STALL_S = 8, 6
#: The shim's delay per write: to the steady files, to the stalled one.
STEADY_US, STALLED_US = 5_000, 250_000
TH = Thresholds(sweeps=2, clear=3, slowdown=3.0, baseline_ns=120 * S, min_time_ns=10**6,
                min_ns=2 * S)  # fmt: skip


#: Runs "$@" in a mount namespace of its own where "$0" is a fresh tmpfs with the
#: job's two directories: writes to it never wait for a disk.
ON_TMPFS = 'mount -t tmpfs -o size=16m stall "$0" && mkdir "$0/steady" "$0/stalled" && exec "$@"'


def test_a_jobs_stalled_writes_are_an_io_stall_naming_its_rank_and_file(
    tmp_path, collector, pg_url, hook_library
):
    pytest.importorskip("mpi4py")
    library, fs, report = slowfs(tmp_path), tmp_path / "fs", tmp_path / "report"
    steady, stalled, out = fs / "steady", fs / "stalled", tmp_path / "out"
    for d in (fs, report, out):
        d.mkdir()
    job = f"stall-{uuid.uuid4().hex[:8]}"
    env = jobs.job_env(collector, "openmpi", job, LD_PRELOAD=f"{LIBRARIES['openmpi']}:{library}",
                       SLOWFS_DIR=f"{steady}:{stalled}",
                       SLOWFS_DELAY_US=f"{STEADY_US}:{STALLED_US}",
                       SLOWFS_REPORT=str(report))  # fmt: skip
    argv = [sys.executable, str(STALL_JOB), str(fs), str(out), str(NORMAL_S), str(STALL_S)]
    command = ["unshare", "-m", "sh", "-c", ON_TMPFS, str(fs), *jobs.mpirun("openmpi", 2, argv)]
    done = jobs.finish(jobs.start(command, env), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # what the ranks wrote and what the shim slowed (a report per process that loaded it,
    # the launcher's too: a line per directory): every write, once, with its delay
    said = [tuple(int(n) for n in (out / f"writes.{r}").read_text().split()) for r in (0, 1)]
    stalled_from = said[1][2]
    delayed = [[tuple(int(n) for n in line.split()) for line in f.read_text().splitlines()]
               for f in report.iterdir()]  # fmt: skip
    assert len(said) == 2 and {(d[0][1], d[1][1]) for d in delayed} == {(STEADY_US, STALLED_US)}
    assert [sum(d[i][0] for d in delayed) for i in (0, 1)] == [sum(n[i] for n in said)
                                                               for i in (0, 1)]  # fmt: skip
    stalled_writes = sum(n[1] for n in said)
    stalled_file = stalled / "out.1"

    ticked = tick_incident(pg_url, job, TH)
    incident, messages = ticked.incident, ticked.messages
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            members = repo.visible_jobs(session, [incident.id])[incident.id]
            i = IoDelta
            stored = session.execute(
                select(func.sum(i.writes), func.sum(i.write_time_ns))
                .where(i.job_id == ticked.job_id, i.path == str(stalled_file))
            ).one()  # fmt: skip
    finally:
        engine.dispose()
    assert [m["event"] for m in messages] in (["opened"], ["closed"])
    assert incident.kind == "io_stall" and incident.link_ids == []
    # its first hot step is one of the stalled ones (a step of the job counts its
    # intervals that ended in it)
    assert stalled_from - S < incident.start_ns < stalled_from + STALL_S * S
    assert incident.detected_ns - incident.start_ns == 2 * S  # 2 steps
    # the stalled file's writes stored: exactly those rank 1 made, each slowed 250 ms
    assert stored[0] == stalled_writes > 0
    assert stored[1] >= stalled_writes * STALLED_US * 1000
    (member,) = members.values()
    assert (member["job"], member["role"], member["signals"]) == (job, "victim", ["io_stall"])
    assert member["ranks"][0] == 1, (member["ranks"], member["evidence"]["io_stall"]["ranks"])
    assert member["files"][0] == f"POSIX:{stalled_file}"
    evidence = member["evidence"]["io_stall"]
    assert max(p["per_byte_ns"] or 0 for p in evidence["series"]) >= (
        3 * evidence["baseline_per_byte_ns"]
    )
