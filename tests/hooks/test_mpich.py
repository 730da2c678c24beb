"""The exact checks of test_openmpi.py and test_surface.py under MPICH 4 (Hydra launcher,
the library built with mpicc.mpich into build-mpich/)."""

from __future__ import annotations

import uuid

from tests.hooks import jobs
from tests.hooks.patterns import p2p_pattern
from tests.hooks.test_surface import check_surface

RANKS = 4


def test_mpich_per_peer_bytes_and_op_counts_exact(collector, pg_url):
    job = f"mpich-p2p-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "mpich", [jobs.example("mpich", "p2p_pattern")], job, RANKS)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []

    sent, recv = jobs.p2p(pg_url, job)
    expected = p2p_pattern(RANKS)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    for r in range(RANKS):
        assert calls[(r, "MPI_Send")][0] == (RANKS - 1) * ((r + 2) // 2)
        assert calls.get((r, "MPI_Isend"), (0, 0))[0] == (RANKS - 1) * ((r + 1) // 2)
        out = sum(b for (s, _), (b, _) in expected.items() if s == r)
        assert calls[(r, "MPI_Send")][1] + calls.get((r, "MPI_Isend"), (0, 0))[1] == out
        assert calls[(r, "MPI_Recv")][0] == sum(q + 1 for q in range(RANKS) if q != r)
        assert calls[(r, "MPI_Allreduce")] == (1, 24)
        assert calls[(r, "MPI_Init")][0] == 1
        assert calls[(r, "MPI_Finalize")][0] == 1
    assert jobs.job_end(pg_url, job) == [("finished", RANKS, True, 0)]


def test_mpich_whole_surface_exact(collector, pg_url, tmp_path):
    job = f"mpich-surface-{uuid.uuid4().hex[:8]}"
    argv = [jobs.example("mpich", "mpi_surface"), str(tmp_path)]
    result = jobs.run_job(collector, "mpich", argv, job, RANKS)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    check_surface(pg_url, job, tmp_path)
