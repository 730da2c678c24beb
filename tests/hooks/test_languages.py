"""Fortran (`use mpi`, `use mpi_f08`), C++ and mpi4py programs under the hooks, under Open MPI
and MPICH, with exact per-peer bytes, operations, collectives and MPI-IO.

Open MPI's Fortran layers call PMPI_* directly, so only the library's Fortran entry points
(mpi_send_, ..., and mpi_send_f08_ for `use mpi_f08`) see those calls; so do MPICH's f08
routines without a choice buffer (mpi_waitall_f08_). mpi4py under MPICH needs
MPI4PY_MPIABI=mpich and a libmpi.so.12 name for libmpich.so.12; it then calls the MPI-4 `_c`
functions, which the test proves are counted.
"""

from __future__ import annotations

import pickle
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import stacklens_run
from tests.hooks import jobs

MPIS = ["openmpi", "mpich"]
HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("mpi", MPIS)
def test_fortran_use_mpi_exact(collector, pg_url, mpi):
    ranks = 3
    job = f"f90-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "f_pattern")], job, ranks)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    expected = {
        (r, p): (4 * (10 * (p + 1) + r), 1) for r in range(ranks) for p in range(ranks) if p != r
    }
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    colls = jobs.coll(pg_url, job)
    for r in range(ranks):
        out = sum(b for (s, _), (b, _) in expected.items() if s == r)
        inc = sum(b for (_, d), (b, _) in expected.items() if d == r)
        assert calls[(r, "MPI_Send")] == (ranks - 1, out)
        assert calls[(r, "MPI_Recv")] == (ranks - 1, inc)
        assert calls[(r, "MPI_Bcast")] == (1, 400)
        assert calls[(r, "MPI_Allreduce")] == (1, 40)
        assert calls[(r, "MPI_Init")][0] == 1
        assert calls[(r, "MPI_Finalize")][0] == 1
        assert colls[(r, "MPI_Bcast", 0)] == (1, 400)
        assert colls[(r, "MPI_Allreduce", -1)] == (1, 40)
    assert jobs.job_end(pg_url, job) == [("finished", ranks, True, 0)]


def f_complete_ops(rank: int, ranks: int) -> dict[str, tuple[int, int]]:
    """Op name -> (calls, bytes) of one rank of f_complete.F90 (its header explains them)."""
    left = (rank - 1) % ranks
    return {
        "MPI_Init": (1, 0),
        "MPI_Isend": (3, 4 * (140 + 3 * rank)),
        "MPI_Irecv": (3, 4 * (140 + 3 * left)),
        "MPI_Waitall": (4, 0),
        "MPI_Waitany": (2, 0),
        "MPI_Waitsome": (1, 0),
        "MPI_Wait": (1, 0),
        "MPI_Sendrecv": (1, 4 * (50 + rank)),
        "MPI_Send_init": (1, 3 * 4 * (20 + rank)),
        "MPI_Recv_init": (1, 3 * 4 * (20 + left)),
        "MPI_Startall": (3, 0),
        "MPI_Request_free": (2, 0),
        "MPI_Send": (1, 4 * (40 + rank)),
        "MPI_Mprobe": (1, 0),
        "MPI_Mrecv": (1, 4 * (40 + left)),
        "MPI_File_open": (1, 0),
        "MPI_File_write_at_all": (1, 400),
        "MPI_File_close": (1, 0),
        "MPI_Finalize": (1, 0),
    }


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("program", ["f_complete", "f08_complete"])
def test_fortran_requests_sendrecv_persistent_mpiio_exact(
    collector, pg_url, mpi, program, tmp_path
):
    """Waitall (statuses and MPI_STATUSES_IGNORE), Waitany, Waitsome, Sendrecv, persistent
    requests, Mprobe/Mrecv and MPI-IO from Fortran, `use mpi` and `use mpi_f08`: operations,
    matrix both ways and the file."""
    ranks = 3
    job = f"{program}-{mpi}-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "f_complete.dat"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, program), str(out)], job, ranks)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert out.stat().st_size == 400 * ranks

    expected = {}
    for r in range(ranks):
        to_right = 4 * (100 + r) + 3 * 4 * (20 + r) + 4 * (10 + r) + 4 * (30 + r) + 4 * (40 + r)
        expected[(r, (r + 1) % ranks)] = (to_right, 7)
        expected[(r, (r - 1) % ranks)] = (4 * (50 + r), 1)
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected

    calls = jobs.ops(pg_url, job)
    assert calls == {
        (r, name): value for r in range(ranks) for name, value in f_complete_ops(r, ranks).items()
    }
    # One MPI-IO open and write per rank; none of the POSIX I/O under it, nor the runtime's.
    assert jobs.io(pg_url, job) == {
        (r, 3, str(out.resolve())): (1, 0, 1, 0, 400) for r in range(ranks)
    }
    assert jobs.job_end(pg_url, job) == [("finished", ranks, True, 0)]


@pytest.mark.parametrize("mpi", MPIS)
def test_cxx_program_exact(collector, pg_url, mpi):
    ranks = 3
    job = f"cxx-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "cxx_pattern")], job, ranks)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    expected = {(r, (r + 1) % ranks): (800 * (r + 1), 1) for r in range(ranks)}
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected
    calls = jobs.ops(pg_url, job)
    colls = jobs.coll(pg_url, job)
    for r in range(ranks):
        assert calls[(r, "MPI_Sendrecv")][0] == 1
        assert colls[(r, "MPI_Reduce", 0)] == (1, 12)
        assert colls[(r, "MPI_Gather", ranks - 1)] == (1, 16)


@pytest.mark.parametrize("mpi", MPIS)
@pytest.mark.parametrize("attach", ["preload", "stacklens run"])
def test_mpi4py_exact(collector, pg_url, mpi, attach, request):
    """mpi4py under the library preloaded by hand, and under `stacklens run` with no
    settings (which must attach the MPICH build for an MPICH launcher)."""
    pytest.importorskip("mpi4py")
    ranks = 3
    job = f"mpi4py-{mpi}-{uuid.uuid4().hex[:8]}"
    extra = {}
    if mpi == "mpich":
        abi = request.getfixturevalue("mpich_abi_dir")
        extra = {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi)}
    argv = [sys.executable, str(HERE / "py_pattern.py")]
    if attach == "preload":
        result = jobs.run_job(collector, mpi, argv, job, ranks, **extra)
    else:
        env = jobs.user_env(collector, job, **extra)
        result = stacklens_run(jobs.mpirun(mpi, ranks, argv), env)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []

    from tests.hooks.py_pattern import PICKLED

    pickled = len(pickle.dumps(PICKLED, pickle.HIGHEST_PROTOCOL))
    numeric = {
        (r, p): (8 * (10 * (p + 1) + r), 1) for r in range(ranks) for p in range(ranks) if p != r
    }
    expected = dict(numeric)
    for p in range(1, ranks):
        b, m = expected[(0, p)]
        expected[(0, p)] = (b + pickled, m + 1)
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == expected
    assert {(s, d): v for (d, s), v in recv.items()} == expected

    # Which entry points mpi4py used: the MPI-4 large-count ones under MPICH.
    suffix = "_c" if mpi == "mpich" else ""
    calls = jobs.ops(pg_url, job)
    for r in range(ranks):
        out = sum(b for (s, _), (b, _) in expected.items() if s == r)
        send_calls = (ranks - 1) * (2 if r == 0 else 1)
        assert calls[(r, f"MPI_Send{suffix}")] == (send_calls, out)
        assert calls[(r, f"MPI_Allreduce{suffix}")] == (1, 32)
    assert jobs.job_end(pg_url, job) == [("finished", ranks, True, 0)]
