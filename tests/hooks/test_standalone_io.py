"""File I/O of standalone (non-MPI) programs under the hooks (tests/hooks/standalone_io.py).

* The sender thread works in a descriptor table of its own (mpi_pmpi_hooks/src/fdtable.h):
  its collector socket is not in the program's table, it holds none of the program's
  descriptors (a pipe the program closes reaches end-of-file at once), and the counts
  still arrive exactly.
* Per-thread I/O counter rows: more threads than counter blocks, in waves that hand their
  blocks on, writing and reading one file: the totals are exact.
* Direct calls (mpi_pmpi_hooks/src/posix.c): the tracked read/write family of a
  single-threaded program gives libc's results and errno; an interposer preloaded after
  stacklens still sees every call; a cancellation request is honoured at those calls.
* Copies made with fcntl(F_DUPFD) count as their file; numbers closed by close_range or
  closefrom are no file's afterwards.
* A program whose main thread ends with pthread_exit ends when its last thread does, and
  its counts arrive (the sender thread does not keep it alive).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import uuid
from pathlib import Path

from tests.conftest import mpi_env, query
from tests.hooks import jobs

PROGRAM = str(Path(__file__).with_name("standalone_io.py"))


def env(collector, hook_library, job: str) -> dict:
    """A standalone job attached to `collector` (no spool directory)."""
    return mpi_env(
        LD_PRELOAD=str(hook_library),
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="50",
        STACKLENS_SPOOL_DIR="off",
        STACKLENS_JOB_ID=job,
    )


def io_totals(pg_url: str, job: str, path: Path, layer: int = 1) -> tuple:
    """(opens, reads, writes, bytes read, bytes written) of path in the job (every process of
    its run of processes without MPI), at layer (1 POSIX, 2 stdio)."""
    return query(
        pg_url,
        "SELECT sum(opens), sum(reads), sum(writes), sum(bytes_read), sum(bytes_written) "
        "FROM io_deltas JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s AND layer = %s AND path = %s",
        (job, layer, str(path.resolve())),
    )[0]


def test_sender_thread_has_a_descriptor_table_of_its_own(collector, pg_url, hook_library, tmp_path):
    job = f"fdtab-{uuid.uuid4().hex[:8]}"
    r, w = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, PROGRAM, "fds", str(tmp_path), str(w)],
        env=env(collector, hook_library, job),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, pass_fds=(w,), start_new_session=True,
    )  # fmt: skip
    try:
        os.close(w)
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)
        # The program closed its end of the pipe: end-of-file, while it still runs.
        ready, _, _ = select.select([r], [], [], 10)
        assert ready and os.read(r, 1) == b"", "a copy of the pipe's write end is still open"
        assert proc.poll() is None
        proc.stdin.write("done\n")
        proc.stdin.flush()
        result = jobs.finish(proc, timeout=60)
    finally:
        os.close(r)
        jobs.kill_group(proc)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []

    seen = json.loads(line)
    app, threads = seen["app"], seen["threads"]
    data = str((tmp_path / "data.bin").resolve())
    assert data in app.values()
    assert not [t for t in app.values() if t.startswith("socket:")], app
    # Exactly one thread has a table with the collector socket: the sender's, and it holds
    # nothing of the program's (not the data file, not the inherited pipe, not stdio).
    senders = [t for t in threads.values() if any(v.startswith("socket:") for v in t.values())]
    assert len(senders) == 1, threads
    (sender,) = senders
    assert data not in sender.values()
    assert app[str(w)] not in sender.values()
    assert [sender[fd] for fd in ("0", "1", "2")] == ["/dev/null"] * 3
    assert io_totals(pg_url, job, tmp_path / "data.bin") == (1, 0, 8, 0, 8 * 4096)


def test_io_counts_exact_with_more_threads_than_counter_blocks(
    collector, pg_url, hook_library, tmp_path
):
    job = f"iothreads-{uuid.uuid4().hex[:8]}"
    nthreads, waves, n = 20, 2, 30  # 20 threads + the main thread > 16 counter blocks
    result = subprocess.run(
        [sys.executable, PROGRAM, "threads", str(tmp_path), str(nthreads), str(waves), str(n)],
        env=env(collector, hook_library, job),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    records = waves * sum(n * (t + 1) for t in range(nthreads))
    nbytes = waves * sum(n * (t + 1) * 100 * (t + 1) for t in range(nthreads))
    assert io_totals(pg_url, job, tmp_path / "threads.bin") == (
        1, records, records, nbytes, nbytes,
    )  # fmt: skip


def semantics(argv: list[str], env: dict | None) -> subprocess.CompletedProcess:
    """Runs the io_semantics test program (mpi_pmpi_hooks/tests/io_semantics.c)."""
    return subprocess.run(
        [jobs.program("openmpi", "io_semantics"), *argv],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


#: What the `calls` mode prints: call, result, errno (see io_semantics.c).
CALLS = """write 4093 0
pwrite 100 0
writev 30 0
write -1 EFAULT
pread 50 0
pread -1 EINVAL
lseek 0 0
read 4096 0
readv 300 0
pwrite64 7 0
pread64 7 0
lseek 9007 0
read 0 0
write -1 EBADF
"""


def test_tracked_calls_give_libc_results_and_errno(collector, pg_url, hook_library, tmp_path):
    job = f"calls-{uuid.uuid4().hex[:8]}"
    plain = semantics(["calls", str(tmp_path)], None)
    assert (plain.returncode, plain.stdout) == (0, CALLS), plain.stderr
    traced = semantics(["calls", str(tmp_path)], env(collector, hook_library, job))
    assert (traced.returncode, traced.stdout) == (0, CALLS), traced.stderr
    assert jobs.library_warnings(traced.stderr) == []
    # Failed calls count as calls with 0 bytes.
    assert io_totals(pg_url, job, tmp_path / "sem.bin") == (2, 6, 6, 4453, 4230)


def test_an_interposer_preloaded_after_stacklens_sees_every_write(
    collector, pg_url, hook_library, tmp_path
):
    job = f"nextwrite-{uuid.uuid4().hex[:8]}"
    next_write = Path(jobs.program("openmpi", "libnext_write.so"))
    run_env = env(collector, hook_library, job)
    run_env["LD_PRELOAD"] = f"{hook_library}:{next_write}"
    result = semantics(["writes", str(tmp_path), "25"], run_env)
    assert result.returncode == 0, result.stderr
    assert "next_write: 25" in result.stderr.splitlines()
    assert io_totals(pg_url, job, tmp_path / "next.bin") == (1, 0, 25, 0, 25 * 4093)


def test_descriptors_copied_or_closed_behind_close_are_followed(
    collector, pg_url, hook_library, tmp_path
):
    job = f"reuse-{uuid.uuid4().hex[:8]}"
    result = semantics(["reuse", str(tmp_path)], env(collector, hook_library, job))
    assert result.returncode == 0, result.stderr
    # fcntl(F_DUPFD*) copies count as the file; after close_range/closefrom the pipe that
    # takes the number is not the file.
    assert io_totals(pg_url, job, tmp_path / "stale.bin") == (1, 0, 3, 0, 60)
    assert io_totals(pg_url, job, tmp_path / "stale2.bin") == (1, 0, 1, 0, 50)


def test_cancellation_requests_act_at_tracked_writes(collector, hook_library, tmp_path):
    run_env = env(collector, hook_library, f"cancel-{uuid.uuid4().hex[:8]}")
    # The only thread cancels itself: its next write is where the cleanup handler runs.
    own = semantics(["selfcancel", str(tmp_path)], run_env)
    assert own.returncode == 42, own.stderr
    # Another thread writing in a loop with no other cancellation point is cancelled.
    other = semantics(["cancelwriter", str(tmp_path)], run_env)
    assert (other.returncode, other.stdout) == (0, "canceled\n"), other.stderr


def test_program_ending_main_with_pthread_exit_ends_and_reports(
    collector, pg_url, hook_library, tmp_path
):
    job = f"pexit-{uuid.uuid4().hex[:8]}"
    result = semantics(["pexit", str(tmp_path)], env(collector, hook_library, job))
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert io_totals(pg_url, job, tmp_path / "pexit.bin") == (1, 0, 7, 0, 7 * 4096)


def test_reopened_names_count_for_the_file_they_lead_to_now(
    collector, pg_url, hook_library, tmp_path
):
    """An open by an absolute name the thread opened before skips the readlink of its
    descriptor when the name opens the same file again (mpi_pmpi_hooks/src/io.c, opened
    names): a name whose symbolic link now leads elsewhere, a renamed file and a new file
    under the old name each count for the file they open now."""
    job = f"reopen-{uuid.uuid4().hex[:8]}"
    result = semantics(["reopen", str(tmp_path.resolve())], env(collector, hook_library, job))
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert io_totals(pg_url, job, tmp_path / "a.bin") == (6, 0, 6, 0, 6)
    assert io_totals(pg_url, job, tmp_path / "r1" / "f.bin") == (3, 0, 3, 0, 6)
    assert io_totals(pg_url, job, tmp_path / "r2" / "f.bin") == (2, 0, 2, 0, 4)
    assert io_totals(pg_url, job, tmp_path / "b.bin") == (2, 0, 2, 0, 2)
    assert io_totals(pg_url, job, tmp_path / "rel.bin") == (2, 0, 2, 0, 8)
    assert io_totals(pg_url, job, tmp_path / "s.txt", layer=2) == (3, 0, 3, 0, 9)
    # nothing under the name as given through the link: files count by their own path
    given = str(tmp_path.resolve() / "link" / "f.bin")
    assert query(pg_url, "SELECT count(*) FROM io_deltas WHERE path = %s", (given,)) == [(0,)]
