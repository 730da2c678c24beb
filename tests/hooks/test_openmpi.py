"""The hook library under Open MPI with 4 ranks: what PostgreSQL holds equals what was sent."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.conftest import mpi_env, query, stacklens_run
from tests.hooks.patterns import p2p_pattern

RANKS = 4


def run_under_hooks(
    collector, program: list[str], job: str, ranks: int = RANKS, interval_ms: int = 100
) -> subprocess.CompletedProcess:
    """`stacklens run -- mpirun -np N program` pointed at `collector`, then its call sites
    resolved by the collector."""
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS=str(interval_ms),
        STACKLENS_JOB_ID=job,
    )
    result = stacklens_run(["mpirun", "-np", str(ranks), *program], env)
    collector.settle_sites()  # the call sites named before the test reads them
    return result


def test_per_peer_bytes_and_messages_are_exact(collector, pg_url, hook_library, examples_built):
    job = f"p2p-{uuid.uuid4().hex[:8]}"
    result = run_under_hooks(collector, [str(examples_built / "p2p_pattern")], job)
    assert result.returncode == 0, result.stderr
    assert "stacklens:" not in result.stderr, result.stderr

    expected = p2p_pattern(RANKS)
    sent = query(
        pg_url,
        "SELECT world_rank, peer, sum(bytes_sent), sum(msgs_sent) FROM p2p_deltas "
        "JOIN jobs ON jobs.id = p2p_deltas.job_id WHERE job_key = %s "
        "GROUP BY 1, 2 HAVING sum(msgs_sent) > 0 ORDER BY 1, 2",
        (job,),
    )
    assert {(s, d): (b, m) for s, d, b, m in sent} == expected
    received = query(
        pg_url,
        "SELECT world_rank, peer, sum(bytes_recv), sum(msgs_recv) FROM p2p_deltas "
        "JOIN jobs ON jobs.id = p2p_deltas.job_id WHERE job_key = %s "
        "GROUP BY 1, 2 HAVING sum(msgs_recv) > 0 ORDER BY 1, 2",
        (job,),
    )
    assert {(s, d): (b, m) for d, s, b, m in received} == expected

    user = os.environ.get("USER") or os.environ.get("LOGNAME") or f"uid:{os.getuid()}"
    assert query(
        pg_url,
        "SELECT world_size, status, command LIKE '%%p2p_pattern%%', \"user\" FROM jobs "
        "WHERE job_key = %s",
        (job,),
    ) == [(RANKS, "finished", True, user)]
    assert query(
        pg_url,
        "SELECT count(*), bool_and(finished) FROM ranks JOIN jobs ON jobs.id = job_id "
        "WHERE job_key = %s",
        (job,),
    ) == [(RANKS, True)]

    calls = {
        (rank, op): n
        for rank, op, n in query(
            pg_url,
            "SELECT world_rank, name, sum(calls) FROM op_deltas JOIN jobs ON jobs.id = job_id "
            "JOIN mpi_ops ON mpi_ops.id = op_id WHERE job_key = %s GROUP BY 1, 2",
            (job,),
        )
    }
    for r in range(RANKS):
        # Message i of each batch of r+1 goes by MPI_Send for even i, MPI_Isend for odd i.
        assert calls[(r, "MPI_Send")] == (RANKS - 1) * ((r + 2) // 2)
        assert calls.get((r, "MPI_Isend"), 0) == (RANKS - 1) * ((r + 1) // 2)
        assert calls[(r, "MPI_Recv")] == sum(q + 1 for q in range(RANKS) if q != r)
        assert calls[(r, "MPI_Allreduce")] == 1
        assert calls[(r, "MPI_Init")] == 1
        assert calls[(r, "MPI_Finalize")] == 1


def test_job_exit_code_is_returned(collector, hook_library):
    result = subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "run", "--", "sh", "-c", "exit 7"],
        env=mpi_env(STACKLENS_COLLECTOR=collector.endpoint),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 7


def test_the_job_runs_normally_without_a_collector(hook_library, examples_built, tmp_path):
    """Hermetic: a private socket path, port and spool, so a `stacklens up` running on this
    node with default settings (/run/stacklens/ingest.sock) is not found."""
    job = f"nocoll-{uuid.uuid4().hex[:8]}"
    from tests.conftest import free_port

    env = mpi_env(
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_COLLECTOR_SOCKET=str(tmp_path / "no-collector.sock"),
        STACKLENS_SPOOL_DIR=str(tmp_path / "spool"),
        STACKLENS_INTERVAL_MS="50",
        STACKLENS_FINALIZE_TIMEOUT_MS="500",
        STACKLENS_JOB_ID=job,
    )
    result = stacklens_run(
        ["mpirun", "-np", str(RANKS), str(examples_built / "p2p_pattern")], env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    total = sum(b for b, _ in p2p_pattern(RANKS).values())
    assert f"{total} bytes sent, {total} received, {total} expected: ok" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("stacklens:")]
    assert len(warnings) == RANKS, result.stderr
    for r in range(RANKS):
        assert sum(f"rank {r}:" in line for line in warnings) == 1, result.stderr
