"""An mpi4py data-parallel loop's families exact under Open MPI and MPICH (issue #27 point
4): tests/hooks/data_parallel.py on 4 ranks (0-1 on host hA, 2-3 on hB) under the hooks;
GET /api/jobs/{job}/families gives the families "tp", "dp" (their names) and the world,
each with its groups in world ranks and its allreduce calls and bytes exactly as the
program makes them, tp's bytes all inside a host and dp's all between the two hosts (no
fabric here: "unplaced")."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from tests.hooks import jobs
from tests.hooks.test_families import run_on_hosts

PROGRAM = Path(__file__).with_name("data_parallel.py")
#: data_parallel.py's steps, and the bytes of one call of each allreduce.
STEPS = 6
TP_BYTES, DP_BYTES, LOSS_BYTES = 1024 * 8, 4096 * 4, 8


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_data_parallel_loop_per_family(collector, api_client, mpich_abi_dir, mpi):
    pytest.importorskip("mpi4py")
    job = f"dp-{mpi}-{uuid.uuid4().hex[:8]}"
    extra = {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(mpich_abi_dir)}
    result = run_on_hosts(collector, mpi, [sys.executable, str(PROGRAM)], job, per_host=2,
                          **(extra if mpi == "mpich" else {}))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert jobs.library_warnings(result.stderr) == []
    answer = api_client.get(api_client.app.url_path_for("job_families", job=job)).json()
    allreduce = "MPI_Allreduce_c" if mpi == "mpich" else "MPI_Allreduce"  # mpi4py's calls
    calls = 4 * STEPS  # every rank, every step
    got = {
        f["label"]: (
            f["made"],
            sorted(sorted(g["members"]) for g in f["groups"]),
            {o["op"]: (o["calls"], o["bytes"]) for o in f["ops"]},
            {r["reach"] for r in f["reach"]},
        )
        for f in answer["families"]
    }
    assert got == {
        "tp": ("split", [[0, 1], [2, 3]], {allreduce: (calls, calls * TP_BYTES)}, {"host"}),
        "dp": ("split", [[0, 2], [1, 3]], {allreduce: (calls, calls * DP_BYTES)}, {"unplaced"}),
        "world": ("world", [[0, 1, 2, 3]], {allreduce: (calls, calls * LOSS_BYTES)},
                  {"host", "unplaced"}),
    }  # fmt: skip
    by = {f["label"]: f for f in answer["families"]}
    for label in ("tp", "dp"):
        assert all(r["provenance"] == "modelled" for r in by[label]["reach"])
