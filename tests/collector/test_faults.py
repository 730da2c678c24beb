"""Faults with a real MPI job streaming: PostgreSQL restarted, collector SIGKILLed, two
collectors on one database. Afterwards the stored totals equal what the job sent.

Each test runs `examples/ring_allreduce` (4 ranks; rank R sends ITER messages of
SIZE + R bytes to rank R+1) under the hooks for a few seconds and breaks something
in the middle of it. Whatever the library could not deliver by the end is in its spool
directory and goes in with `stacklens replay`, as an operator would do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest

from stacklens.db import Database, migrate, start_embedded
from tests.conftest import free_port, mpi_env, query

RANKS, ITERATIONS, SIZE, SLEEP_MS = 4, 40, 8192, 100
STACKLENS = [sys.executable, "-m", "stacklens_cli"]


def expected_matrix() -> dict[tuple[int, int], tuple[int, int]]:
    return {(r, (r + 1) % RANKS): (ITERATIONS * (SIZE + r), ITERATIONS) for r in range(RANKS)}


class Collector:
    """A `stacklens collector` process (start, SIGKILL, start again on the same port)."""

    def __init__(self, url: str, port: int, log: Path):
        self.url, self.port, self.log = url, port, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
        env.update(
            STACKLENS_DATABASE_URL=self.url,
            STACKLENS_COLLECTOR=f"127.0.0.1:{self.port}",
            STACKLENS_INGEST_TOKEN="secret",
            STACKLENS_INGEST_AUTH="trusted",
        )
        self.proc = subprocess.Popen(
            [*STACKLENS, "collector"], env=env, stdout=self.log.open("a"), stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 30
        while "stacklens collector on" not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "collector did not start"
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


@pytest.fixture
def own_postgres() -> Iterator[Database]:
    """A PostgreSQL of this test alone, so that it can be stopped and started.

    Its data lives outside pytest's 0700 temporary root, which the server's own user
    must be able to traverse.
    """
    scratch = Path(tempfile.mkdtemp(prefix="stacklens-pgfault-", dir="/tmp"))
    database = start_embedded(scratch / "pg")
    migrate(database.url)
    yield database
    database.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def start_job(collectors: list[int], spool: Path, job: str) -> subprocess.Popen:
    """The ring job; rank R sends to collectors[R % len(collectors)] (MPMD for several)."""
    env = mpi_env(
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="100",
        STACKLENS_JOB_ID=job,
        STACKLENS_SPOOL_DIR=str(spool),
        STACKLENS_FINALIZE_TIMEOUT_MS="3000",
        STACKLENS_COLLECTOR=f"127.0.0.1:{collectors[0]}",
    )
    program = [str(Path("examples/build/ring_allreduce").resolve()), str(ITERATIONS), str(SIZE),
               str(SLEEP_MS)]  # fmt: skip
    command = ["mpirun"]
    for rank in range(RANKS):
        port = collectors[rank % len(collectors)]
        command += ["-np", "1", "-x", f"STACKLENS_COLLECTOR=127.0.0.1:{port}", *program, ":"]
    return subprocess.Popen(
        [*STACKLENS, "run", "--", *command[:-1]], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(job_proc: subprocess.Popen, spool: Path, port: int) -> int:
    """Wait for the job, then deliver what is left in its spool; return how many files."""
    out, err = job_proc.communicate(timeout=120)
    assert job_proc.returncode == 0, err
    left = len(list(spool.glob("*.slf"))) if spool.exists() else 0
    if left:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
        env.update(
            STACKLENS_COLLECTOR=f"127.0.0.1:{port}",
            STACKLENS_INGEST_TOKEN="secret",
            STACKLENS_INGEST_AUTH="trusted",
        )
        replay = subprocess.run(
            [*STACKLENS, "replay", str(spool)], env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert replay.returncode == 0, replay.stdout + replay.stderr
    return left


def stored_matrix(url: str, job: str) -> dict[tuple[int, int], tuple[int, int]]:
    rows = query(
        url,
        "SELECT world_rank, peer, sum(bytes_sent), sum(msgs_sent) FROM p2p_deltas "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1, 2 "
        "HAVING sum(msgs_sent) > 0",
        (job,),
    )
    return {(s, d): (b, m) for s, d, b, m in rows}


def test_postgres_restart_loses_and_duplicates_nothing(own_postgres, tmp_path, examples_built):
    server = own_postgres.embedded
    port, spool, job = free_port(), tmp_path / "spool", f"pgdown-{uuid.uuid4().hex[:8]}"
    collector = Collector(own_postgres.url, port, tmp_path / "collector.log")
    collector.start()
    try:
        job_proc = start_job([port], spool, job)
        time.sleep(1.5)
        pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata,
                        user=server.system_user)  # fmt: skip
        time.sleep(2.0)  # the job keeps running; the collector cannot commit
        pgserver.pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {server.pgdata}", "-l", str(server.log), "start"],
            pgdata=server.pgdata, user=server.system_user,
        )  # fmt: skip
        finish(job_proc, spool, port)
    finally:
        collector.stop()
    assert "could not store" in (tmp_path / "collector.log").read_text()
    assert stored_matrix(own_postgres.url, job) == expected_matrix()


def test_collector_sigkill_loses_and_duplicates_nothing(pg_url, tmp_path, examples_built):
    port, spool, job = free_port(), tmp_path / "spool", f"kill-{uuid.uuid4().hex[:8]}"
    collector = Collector(pg_url, port, tmp_path / "collector.log")
    collector.start()
    try:
        job_proc = start_job([port], spool, job)
        time.sleep(1.5)
        collector.kill()
        time.sleep(1.0)
        collector.start()  # a new process on the same port
        finish(job_proc, spool, port)
    finally:
        collector.stop()
    assert stored_matrix(pg_url, job) == expected_matrix()


def test_two_collectors_share_one_database(pg_url, tmp_path, examples_built):
    ports, spool, job = (
        [free_port(), free_port()],
        tmp_path / "spool",
        f"two-{uuid.uuid4().hex[:8]}",
    )
    collectors = [Collector(pg_url, p, tmp_path / f"c{p}.log") for p in ports]
    for c in collectors:
        c.start()
    try:
        # Ranks 1 and 3 reach only the second collector: nothing left to replay means
        # both collectors stored their halves.
        assert finish(start_job(ports, spool, job), spool, ports[0]) == 0
    finally:
        for c in collectors:
            c.stop()
    assert stored_matrix(pg_url, job) == expected_matrix()
    assert query(pg_url, "SELECT status, world_size FROM jobs WHERE job_key = %s", (job,)) == [
        ("finished", RANKS)
    ]
