"""A launch whose rank crashes before its first frame still leaves a run (issue #32 point 3).

mpi_pmpi_hooks/tests/crasher.c: rank 1 dies of SIGSEGV (or abort()) 600 ms after MPI_Init,
a window allocation, 3 barriers and 2 messages to rank 0, with a reporting interval of an
hour: no rank sends a frame before the crash. Under `stacklens run`, the ranks keep crash
snapshots in a directory of its own under /dev/shm (stacklens_cli/snapshots.py); the crashed
rank's snapshot becomes its final frame (killed), so the run is listed `killed` with what the
rank counted up to its last snapshot: its exact calls and bytes. The other ranks are ended by
the launcher (their own final frame, or their snapshot when that did not arrive). Nothing is
left in /dev/shm. Real MPI (Open MPI and MPICH), a real collector, API and database.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from stacklens_cli.snapshots import SHM
from tests.conftest import query, stacklens_run
from tests.hooks import jobs
from tests.test_cli_run import run_lines, user_env

#: What each rank counted before rank 1 died (crasher.c): (rank, op) -> (calls, bytes).
COUNTED = {
    (0, "MPI_Init"): (1, 0), (0, "MPI_Barrier"): (3, 0), (0, "MPI_Recv"): (2, 2000),
    (1, "MPI_Init"): (1, 0), (1, "MPI_Barrier"): (3, 0), (1, "MPI_Send"): (2, 2000),
}  # fmt: skip


def _snapshot_dirs() -> set[Path]:
    return set(SHM.glob("stacklens-*"))


@pytest.mark.parametrize(
    ("mpi", "how"),
    [("openmpi", "segv"), ("mpich", "segv"), ("openmpi", "abort"), ("mpich", "abort")],
)
def test_a_rank_that_crashes_before_its_first_frame_leaves_a_killed_run(
    collector, pg_url, api_client, tmp_path, mpi, how
):
    job = f"crash-{mpi}-{how}-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="3600000",
                   STACKLENS_SPOOL_DIR=str(tmp_path / "spool"))  # fmt: skip
    before = _snapshot_dirs()
    launch = ["mpirun", "-np", "2"] if mpi == "openmpi" else ["mpirun.mpich", "-np", "2"]
    result = stacklens_run([*launch, jobs.program(mpi, "crasher"), how], env, timeout=120)
    assert result.returncode != 0
    assert _snapshot_dirs() == before  # the launch's directory is gone
    lines = run_lines(result.stderr)
    assert any(line.endswith("crash snapshots are sent as their last frame (killed)")
               for line in lines), result.stderr  # fmt: skip
    assert query(
        pg_url,
        "SELECT r.status, r.world_size FROM runs r JOIN jobs j "
        "ON j.id = r.job_id WHERE j.job_key = %s",
        (job,),
    ) == [("killed", 2)]
    ops = jobs.ops(pg_url, job)
    assert {key: ops.get(key) for key in COUNTED} == COUNTED
    assert ops[(1, "MPI_Win_allocate")][0] == ops[(0, "MPI_Win_allocate")][0] == 1
    sent, received = jobs.p2p(pg_url, job)
    assert (sent[(1, 0)], received[(0, 1)]) == ((2000, 2), (2000, 2))
    ranks = {r["rank"]: r for r in api_client.get(
        api_client.app.url_path_for("job_ranks", job=job)).json()["ranks"]}  # fmt: skip
    assert ranks[1]["status"] == "killed"
    listed = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
    assert [(j["status"], j["command"]) for j in listed if j["job"] == job] == [
        ("killed", f"{jobs.program(mpi, 'crasher')} {how}")
    ]
    assert list((tmp_path / "spool").glob("*.slf")) == []  # all delivered


def test_without_a_spool_the_snapshots_are_sent_directly(collector, pg_url, tmp_path):
    """STACKLENS_SPOOL_DIR=off: the snapshots go from a folder of the launch's own."""
    job = f"crash-nospool-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="3600000",
                   STACKLENS_SPOOL_DIR="off")  # fmt: skip
    result = stacklens_run(["mpirun.mpich", "-np", "2", jobs.program("mpich", "crasher"), "segv"],
                           env, timeout=120)  # fmt: skip
    assert result.returncode != 0
    ops = jobs.ops(pg_url, job)
    assert {key: ops.get(key) for key in COUNTED} == COUNTED, result.stderr
