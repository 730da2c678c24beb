"""Threads, fork and SIGTERM under the hooks, with exact totals.

* MPI_THREAD_MULTIPLE: 4 threads per rank call MPI at once (distinct tags), and 24
  threads in 3 waves (more threads than per-thread counter blocks).
* fork: children that _exit, exec or exit() neither add counts nor corrupt or duplicate
  the parent's frames, and nothing hangs.
* SIGTERM: with an interval far longer than the job, the counts still arrive, because the
  library's SIGTERM handler has the sender deliver the last interval before the default
  action kills the rank.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from tests.conftest import query
from tests.hooks import jobs

MPIS = ["openmpi", "mpich"]


@pytest.mark.parametrize(
    ("mpi", "threads", "waves", "factor"),
    [
        ("openmpi", 4, 1, 50),
        ("mpich", 4, 1, 50),
        # More threads than per-thread counter blocks (16), in waves that exit and
        # hand their blocks to the next wave: counts stay exact.
        ("openmpi", 24, 3, 2),
    ],
)
def test_thread_multiple_exact(collector, pg_url, mpi, threads, waves, factor):
    job = f"threads-{mpi}-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program(mpi, "threads"), str(threads), str(waves), str(factor)]
    result = jobs.run_job(collector, mpi, argv, job, 2, timeout=120)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    msgs = waves * sum(factor * (t + 1) for t in range(threads))
    expected = {
        (r, 1 - r): (waves * sum(factor * (t + 1) * (100 * (t + 1) + r) for t in range(threads)),
                     msgs)
        for r in range(2)
    }  # fmt: skip
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    for r in range(2):
        assert calls[(r, "MPI_Isend")] == (msgs, expected[(r, 1 - r)][0])
        assert calls[(r, "MPI_Recv")] == (msgs, expected[(1 - r, r)][0])
        assert calls[(r, "MPI_Wait")][0] == msgs
        assert calls[(r, "MPI_Init_thread")][0] == 1
        assert calls[(r, "MPI_Barrier")][0] == waves
    assert jobs.ranks_finished(pg_url, job) == [(2, True)]


@pytest.mark.parametrize("mpi", MPIS)
def test_fork_children_do_not_disturb_the_parent(collector, pg_url, mpi, tmp_path):
    job = f"fork-{mpi}-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program(mpi, "forker"), str(tmp_path)]
    result = jobs.run_job(collector, mpi, argv, job, 2, interval_ms=50, timeout=60)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    for r in range(2):  # the children did run
        assert (tmp_path / f"child-a.{r}").stat().st_size == 4096
        assert (tmp_path / f"child-b.{r}").read_text() == "hello"
        assert (tmp_path / f"child-c.{r}").stat().st_size == 100
    expected = {(r, 1 - r): (3000 + 2 * r, 2) for r in range(2)}
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    assert {r: calls[(r, "MPI_Sendrecv")] for r in range(2)} == {
        r: (2, 3000 + 2 * r) for r in range(2)
    }
    # No file-system I/O of the children, no rank but the two, one pid per rank.
    io = query(
        pg_url,
        "SELECT count(*) FROM io_deltas JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s AND path LIKE %s",
        (job, f"{tmp_path.resolve()}%"),
    )
    assert io == [(0,)]
    assert jobs.ranks_finished(pg_url, job) == [(2, True)]
    frames = query(
        pg_url,
        "SELECT world_rank, count(*), max(seq) + 1 FROM received_frames "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1 ORDER BY 1",
        (job,),
    )
    # Every frame of a rank is there once: seqs 0..n-1 without gaps or duplicates.
    assert [(r, n == top) for r, n, top in frames] == [(0, True), (1, True)]


# Open MPI only: when one rank dies, MPICH's Hydra tears the other ranks down before their
# SIGTERM flush completes (seen under CPU load, also with -disable-auto-cleanup), so the
# last interval of a SIGTERMed MPICH job is not reliably delivered yet (a known gap).
@pytest.mark.parametrize("mpi", ["openmpi"])
def test_sigterm_flushes_the_last_interval(collector, pg_url, mpi, tmp_path):
    job = f"term-{mpi}-{uuid.uuid4().hex[:8]}"
    env = jobs.job_env(collector, mpi, job, interval_ms=3_600_000)
    proc = jobs.start(jobs.mpirun(mpi, 2, [jobs.program(mpi, "sigterm"), str(tmp_path)]), env)
    try:
        pids = []
        deadline = time.monotonic() + 60
        for r in range(2):
            path = tmp_path / f"pid.{r}"
            while not path.exists():
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "ranks did not get ready"
                time.sleep(0.05)
            pids.append(int(path.read_text()))
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        result = jobs.finish(proc, timeout=30)
    finally:
        jobs.kill_group(proc)
    assert result.returncode != 0  # the ranks died of SIGTERM, and the launcher says so
    expected = {(r, 1 - r): (3885 * (r + 1), 5) for r in range(2)}
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    for r in range(2):
        assert calls[(r, "MPI_Send")] == (5, 3885 * (r + 1))
        assert calls[(r, "MPI_Recv")] == (5, 3885 * (2 - r))
        assert calls[(r, "MPI_Barrier")][0] == 1
