"""How a rank ends, and what of it arrives: MPI_Abort (Open MPI and MPICH) and exec.

* MPI_Abort (mpi_pmpi_hooks/tests/aborter.c, f_abort.f90): the aborting rank delivers its final
  frame, of type aborted with the error code, before the runtime tears the job down: it is stored
  `aborted` with its code and every call it made, the job is `aborted`, and no rank of the
  ended job is shown `running`.
* exec (mpi_pmpi_hooks/tests/execer.c): the interval before an exec arrives as the final
  frame; an exec that fails keeps counting.
* No MPI_Finalize (mpi_pmpi_hooks/tests/unfinalized.c, the shape of a multithreaded latency
  benchmark): return from main, exit() from a thread, _exit after a fork, return from main
  while a thread of every rank is still blocked in an MPI_Recv (not counted: it never
  returns), under MPICH and Open MPI. Under MPICH, Hydra
  SIGKILLs the other ranks as soon as one rank's process ends without finalizing; every rank
  still delivers its final frame (type exited: the rank says it did not finalize).
"""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import mpi_env, query
from tests.hooks import jobs


@pytest.mark.parametrize(
    ("mpi", "program", "code"),
    [
        ("openmpi", "aborter", 3),
        ("mpich", "aborter", 3),
        ("openmpi", "f_abort", 5),
        ("mpich", "f_abort", 5),
    ],  # fmt: skip
)
def test_mpi_abort_is_stored_with_its_code(collector, pg_url, api_client, mpi, program, code):
    """C (aborter.c) and Fortran (f_abort.f90: MPI_ABORT's Fortran entry point)."""
    job = f"abort-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, program)], job, ranks=3)
    assert result.returncode != 0
    ops = jobs.ops(pg_url, job)
    assert (ops[(1, "MPI_Barrier")][0], ops[(1, "MPI_Abort")][0]) == (40, 1)
    assert query(pg_url, "SELECT status FROM jobs WHERE job_key = %s", (job,)) == [("aborted",)]
    body = api_client.get(api_client.app.url_path_for("job_ranks", job=job)).json()
    ranks = {r["rank"]: r for r in body["ranks"]}
    assert (ranks[1]["status"], ranks[1]["aborted"], ranks[1]["abort_code"]) == (
        "aborted",
        True,
        code,
    )
    # The others were ended by the launcher: by a signal (their last frame says so) or
    # outright (no final frame: lost). None is left running.
    assert {r["status"] for n, r in ranks.items() if n != 1} <= {"killed", "lost"}
    jobs_list = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
    assert [j["status"] for j in jobs_list if j["job"] == job] == ["aborted"]


def test_exec_delivers_the_interval_and_a_failed_exec_counts_on(
    collector, pg_url, hook_library, tmp_path
):
    job = f"exec-{uuid.uuid4().hex[:8]}"
    target = tmp_path / "out.bin"
    env = mpi_env(
        LD_PRELOAD=str(hook_library),
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="3600000",  # nothing arrives but what the ending sends
        STACKLENS_SPOOL_DIR="off",
        STACKLENS_JOB_ID=job,
    )
    proc = jobs.start([jobs.program("openmpi", "execer"), str(target)], env)
    result = jobs.finish(proc, timeout=60)
    assert result.returncode == 0, result.stderr
    rows = query(
        pg_url,
        "SELECT sum(opens), sum(writes), sum(bytes_written) FROM io_deltas JOIN jobs "
        "ON jobs.id = job_id WHERE job_key = %s AND path = %s",
        (job, str(target.resolve())),
    )
    assert rows == [(1, 2, 1500)]
    ended = query(
        pg_url,
        "SELECT status, bool_and(finished) FROM jobs JOIN ranks ON jobs.id = job_id "
        "WHERE job_key = %s GROUP BY 1",
        (job,),
    )
    assert ended == [("finished", True)]


@pytest.mark.parametrize(
    ("mpi", "mode"),
    [
        ("mpich", "return"),
        ("mpich", "exit"),
        ("mpich", "_exit"),
        ("openmpi", "return"),
        ("mpich", "blocked"),
        ("openmpi", "blocked"),
    ],
)
def test_ranks_ending_without_finalize_are_all_recorded(collector, pg_url, api_client, mpi, mode):
    job = f"unfinalized-{mpi}-{mode}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, mpi, [jobs.program(mpi, "unfinalized"), mode, "100"], job,
        interval_ms=3600000,  # nothing arrives but what the ending sends
    )  # fmt: skip
    # Open MPI's mpirun ends with status 1 when a rank did not finalize (hooks or not).
    assert result.returncode == (0 if mpi == "mpich" else 1), result.stderr
    ops = jobs.ops(pg_url, job)
    assert {k: v[0] for k, v in ops.items()} == {
        (0, "MPI_Init_thread"): 1,
        (0, "MPI_Comm_dup"): 1,
        (0, "MPI_Send"): 100,
        (0, "MPI_Barrier"): 1,
        (1, "MPI_Init_thread"): 1,
        (1, "MPI_Comm_dup"): 1,
        (1, "MPI_Recv"): 100,
        (1, "MPI_Barrier"): 1,
    }
    sent, received = jobs.p2p(pg_url, job)
    assert (sent, received) == ({(0, 1): (6400, 100)}, {(1, 0): (6400, 100)})
    body = api_client.get(api_client.app.url_path_for("job_ranks", job=job)).json()
    assert [(r["rank"], r["status"], r["unfinalized"]) for r in body["ranks"]] == [
        (0, "exited", True),
        (1, "exited", True),
    ]
    assert query(pg_url, "SELECT status FROM jobs WHERE job_key = %s", (job,)) == [("finished",)]
