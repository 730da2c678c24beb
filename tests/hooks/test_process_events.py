"""Threads, fork and SIGTERM under the hooks, with exact totals.

* MPI_THREAD_MULTIPLE: 4 threads per rank call MPI at once (distinct tags), and 24
  threads in 3 waves (more threads than per-thread counter blocks); half of them on a
  duplicate of MPI_COMM_WORLD, whose messages per communicator are exact too.
* fork: children that _exit, exec or exit() neither add counts nor corrupt or duplicate
  the parent's frames, and nothing hangs.
* SIGTERM (and SIGINT, to the ranks): with an interval far longer than the job, the counts
  still arrive, because the library's handler has the sender deliver the last interval
  before the default action kills the rank.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import query, stacklens_replay
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
    # the odd threads' messages on the duplicate, per communicator (comm_p2p)
    odd = [t for t in range(threads) if t % 2]
    on_dup = {r: (waves * sum(factor * (t + 1) for t in odd),
                  waves * sum(factor * (t + 1) * (100 * (t + 1) + r) for t in odd))
              for r in range(2)}  # fmt: skip
    rows = query(
        pg_url,
        "SELECT world_rank, name, peer, received, count(DISTINCT comm_id), sum(msgs), "
        "sum(bytes) FROM comm_p2p_deltas JOIN jobs ON jobs.id = job_id "
        "JOIN mpi_ops ON mpi_ops.id = op_id WHERE job_key = %s GROUP BY 1, 2, 3, 4",
        (job,),
    )
    assert {(r, n, p, d): v for r, n, p, d, *v in rows} == {
        **{(r, "MPI_Isend", 1 - r, 0): [1, *on_dup[r]] for r in range(2)},
        **{(r, "MPI_Recv", 1 - r, 1): [1, *on_dup[1 - r]] for r in range(2)},
    }
    calls = jobs.ops(pg_url, job)
    for r in range(2):
        assert calls[(r, "MPI_Isend")] == (msgs, expected[(r, 1 - r)][0])
        assert calls[(r, "MPI_Recv")] == (msgs, expected[(1 - r, r)][0])
        assert calls[(r, "MPI_Wait")][0] == msgs
        assert calls[(r, "MPI_Init_thread")][0] == 1
        assert calls[(r, "MPI_Barrier")][0] == waves
    assert jobs.job_end(pg_url, job) == [("finished", 2, True, 0)]


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
    assert jobs.job_end(pg_url, job) == [("finished", 2, True, 0)]
    frames = query(
        pg_url,
        "SELECT world_rank, count(*), max(seq) + 1 FROM received_frames "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1 ORDER BY 1",
        (job,),
    )
    # Every frame of a rank is there once: seqs 0..n-1 without gaps or duplicates.
    assert [(r, n == top) for r, n, top in frames] == [(0, True), (1, True)]


#: Who gets the signal: every rank at once; the whole job at once, launcher and its daemons
#: too (what a batch scheduler does: Slurm's scancel signals every process of the job);
#: only the launcher, which forwards it to the ranks (a user stopping mpirun/mpiexec).
#: SIGINT (Ctrl-C) reaches ranks that way under MPICH, whose Hydra forwards it.
TERM_CASES = [
    ("ranks", signal.SIGTERM),
    ("job", signal.SIGTERM),
    ("launcher", signal.SIGTERM),
    ("ranks", signal.SIGINT),
]


@pytest.mark.parametrize(("target", "signum"), TERM_CASES)
@pytest.mark.parametrize("mpi", MPIS)
def test_sigterm_flushes_the_last_interval(collector, pg_url, mpi, target, signum, tmp_path):
    """The last interval of a job killed by SIGTERM (or SIGINT) arrives exactly once.

    A launcher may SIGKILL the ranks that are still flushing as soon as one rank dies of
    the signal: MPICH's Hydra proxy always does (auto-cleanup or not), Open MPI's mpirun
    does once it is terminating the job itself (SIGTERM to mpirun). Each rank writes its
    final frame to the spool before any network attempt, so what a killed rank could not
    deliver (or could not see acknowledged) arrives by `stacklens replay`, the documented
    route (the node epilog runs it). The collector drops duplicates by (job, rank, seq),
    so a frame both delivered live and replayed counts once. Only when Open MPI's ranks
    are signalled directly does every rank get time to finish: mpirun gives the survivors
    of an abnormal death SIGCONT, then SIGTERM and SIGKILL a second apart each.
    """
    job = f"term-{mpi}-{target}-{signum.name}-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    env = jobs.job_env(collector, mpi, job, interval_ms=3_600_000, STACKLENS_SPOOL_DIR=str(spool))
    proc = jobs.start(jobs.mpirun(mpi, 2, [jobs.program(mpi, "sigterm"), str(tmp_path)]), env)
    try:
        pids = jobs.rank_pids(proc, tmp_path, 2)
        signalled = {
            "ranks": pids,
            "job": jobs.process_tree(proc.pid),
            "launcher": [proc.pid],
        }[target]
        for pid in signalled:
            with contextlib.suppress(ProcessLookupError):  # a short-lived helper is gone
                os.kill(pid, signum)
        result = jobs.finish(proc, timeout=30)
    finally:
        jobs.kill_group(proc)
    if mpi == "openmpi" or target == "ranks":
        assert result.returncode != 0  # the ranks died of SIGTERM, and the launcher says so
    # else: Hydra's mpiexec, itself signalled, exits 0 or 15 depending on what it reads
    # first from its proxy (its forced cleanup zeroes the exit statuses it has not seen
    # yet); strace shows the ranks die of SIGTERM either way.
    spooled = sorted(p.name for p in spool.glob("*.slf"))
    if (mpi, target) == ("openmpi", "ranks"):
        assert spooled == []  # delivered live, every spool file deleted on its ack
    replayed = stacklens_replay(collector.endpoint, spool)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert f"replayed {len(spooled)} frames" in replayed.stdout
    assert list(spool.glob("*.slf")) == []

    expected = {(r, 1 - r): (3885 * (r + 1), 5) for r in range(2)}
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    for r in range(2):
        assert calls[(r, "MPI_Send")] == (5, 3885 * (r + 1))
        assert calls[(r, "MPI_Recv")] == (5, 3885 * (2 - r))
        assert calls[(r, "MPI_Barrier")][0] == 1
    # Both final frames stored, each saying its rank ended by the signal.
    assert jobs.job_end(pg_url, job) == [("killed", 2, True, 2)]
    frames = query(
        pg_url,
        "SELECT world_rank, count(*), max(seq) + 1 FROM received_frames "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1 ORDER BY 1",
        (job,),
    )
    assert frames == [(0, 1, 1), (1, 1, 1)]  # one frame per rank (seq 0, the final), once


def test_stacklens_run_delivers_what_killed_ranks_spooled(collector, pg_url, tmp_path):
    """Ranks killed while their final frames wait in the spool: `stacklens run` delivers
    them once its command has exited, with no `stacklens replay` by hand. The collector is
    paused (its event loop blocked: nothing read, stored or acknowledged) from before the
    SIGTERM until both ranks are dead, so every rank's final frame is deterministically
    still in the spool when the command ends (Hydra SIGKILLs the other rank at once)."""
    job = f"term-run-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    env = jobs.job_env(
        collector, "mpich", job, interval_ms=3_600_000, STACKLENS_SPOOL_DIR=str(spool),
        STACKLENS_FINALIZE_TIMEOUT_MS="1000",
    )  # fmt: skip
    del env["LD_PRELOAD"]  # stacklens run chooses the MPICH build
    argv = jobs.mpirun("mpich", 2, [jobs.program("mpich", "sigterm"), str(tmp_path)])
    proc = jobs.start([sys.executable, "-m", "stacklens_cli", "run", "--", *argv], env)
    try:
        pids = jobs.rank_pids(proc, tmp_path, 2)
        with collector_paused(collector):
            for pid in pids:
                os.kill(pid, signal.SIGTERM)
            jobs.wait_dead(pids, timeout=60)
            # both final frames are spooled, none acknowledged
            assert len(list(spool.glob(f"{job}.*.slf"))) == 2
        result = jobs.finish(proc, timeout=60)
    finally:
        jobs.kill_group(proc)
    assert result.returncode != 0  # the ranks died of SIGTERM
    assert list(spool.glob("*.slf")) == []
    expected = {(r, 1 - r): (3885 * (r + 1), 5) for r in range(2)}
    sent, _ = jobs.p2p(pg_url, job)
    assert sent == expected
    assert jobs.job_end(pg_url, job) == [("killed", 2, True, 2)]
    # a rank SIGKILLed after spooling its final frame may leave its crash snapshot too (a
    # duplicate the collector drops): delivered with the rest
    died = re.findall(r"stacklens run: (\d+) ranks died without a final frame", result.stderr)
    delivered = [line for line in result.stderr.splitlines() if "spooled frames" in line]
    assert delivered == [
        f"stacklens run: delivered {2 + sum(map(int, died))} spooled frames to "
        f"{collector.endpoint}; 0 rejected, 0 left in {spool}"
    ], result.stderr


@contextlib.contextmanager
def collector_paused(collector) -> Iterator[None]:
    """The collector's event loop blocked for the duration: connections are accepted by
    the kernel, but nothing is read, stored or acknowledged until the block ends."""
    release, blocked = threading.Event(), threading.Event()

    def block() -> None:
        blocked.set()
        release.wait(120)

    collector.loop.call_soon_threadsafe(block)
    assert blocked.wait(10), "the collector's loop did not pause"
    try:
        yield
    finally:
        release.set()
