"""MPI-4 sessions (mpi_pmpi_hooks/tests/sessions.c, MPICH 4): a program that never calls
MPI_Init, with two sessions open at once, is recorded like an MPI_Init one: its run, both
ranks (world ranks from the mpi://WORLD process set), the session calls, the traffic on
both sessions' communicators, and the final frame at the last MPI_Session_finalize. Open
MPI 4.1 has no sessions: the library built for it has no session wrappers."""

from __future__ import annotations

import subprocess
import uuid

from stacklens.paths import LIBRARIES
from tests.conftest import query
from tests.hooks import jobs

SESSION_FUNCTIONS = ("MPI_Session_init", "MPI_Comm_create_from_group", "MPI_Session_finalize")


def test_a_session_program_is_recorded_exactly(collector, pg_url, api_client):
    job = f"sessions-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "mpich", [jobs.program("mpich", "sessions")], job, interval_ms=3600000
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["rank 0 of 2: done", "rank 1 of 2: done"]
    calls = {k: v[0] for k, v in jobs.ops(pg_url, job).items()}
    for rank in (0, 1):
        assert {op: calls.get((rank, op)) for op in (
            "MPI_Session_init", "MPI_Group_from_session_pset", "MPI_Comm_create_from_group",
            "MPI_Session_finalize", "MPI_Comm_free", "MPI_Barrier", "MPI_Allreduce",
        )} == {
            "MPI_Session_init": 2, "MPI_Group_from_session_pset": 2,
            "MPI_Comm_create_from_group": 2, "MPI_Session_finalize": 2, "MPI_Comm_free": 2,
            "MPI_Barrier": 1, "MPI_Allreduce": 5,
        }  # fmt: skip
    assert (calls[(0, "MPI_Send")], calls[(1, "MPI_Recv")]) == (10, 10)
    sent, received = jobs.p2p(pg_url, job)
    assert (sent, received) == ({(0, 1): (1000, 10)}, {(1, 0): (1000, 10)})
    assert query(
        pg_url,
        "SELECT runs.world_size, runs.status FROM runs JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(2, "finished")]
    body = api_client.get(api_client.app.url_path_for("job_ranks", job=job)).json()
    assert [(r["rank"], r["status"]) for r in body["ranks"]] == [(0, "finished"), (1, "finished")]


def test_an_mpi_without_sessions_gets_no_session_wrappers():
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIBRARIES["openmpi"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "MPI_Send" in symbols
    assert [f for f in SESSION_FUNCTIONS if f" {f}\n" in symbols] == []
    mpich = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIBRARIES["mpich"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert [f for f in SESSION_FUNCTIONS if f" {f}\n" in mpich] == list(SESSION_FUNCTIONS)
