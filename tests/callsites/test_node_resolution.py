# tests/callsites/test_node_resolution.py — call sites named on the compute node.
"""No shared file system (issue #26 point 2): `stacklens run` runs in a mount namespace
of its own where the program lives on a tmpfs that the collector (this process, outside
the namespace) never sees — a node whose local disk holds the binary. After the run the
tmpfs is gone with the namespace. The collector's resolver finds the module missing
(stored fallback: 'is not here'); the answers `stacklens run` resolved on the node and
sent in its launch frame name every site at its exact line, for every rank, under Open
MPI and MPICH. A program replaced by a rebuild after its ranks ended but before `stacklens
run` resolved is never read for lines on the node: its sites stay module+offset."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.callsites.test_end_to_end import build, line_of
from tests.conftest import query
from tests.hooks import jobs
from tests.test_cli_run import user_env

RANKS = 2
ITERATIONS = 4
#: (op, file, marker, function) -> calls per rank (solver.c with 4 iterations).
EXPECTED = {
    ("MPI_Init", "solver.c", "init"): 1,
    ("MPI_Bcast", "solver.c", "bcast"): 1,
    ("MPI_Allreduce", "solver.c", "small"): ITERATIONS,
    ("MPI_Allreduce", "solver.c", "big"): ITERATIONS // 2,
    ("MPI_Sendrecv_replace", "halo.c", "halo"): 3,
    ("MPI_Finalize", "solver.c", "finalize"): 1,
}


def run_on_node(collector, mpi: str, job: str, program: Path, node: Path,
                then: str = "") -> subprocess.CompletedProcess:  # fmt: skip
    """`stacklens run -- <launcher> -np RANKS node/solver` in a mount namespace where
    `node` is a tmpfs holding a copy of `program`; `then`: a shell command run by the
    launched command after the launcher ended (inside the namespace)."""
    launch = " ".join(jobs.mpirun(mpi, RANKS, [str(node / "solver"), str(ITERATIONS)]))
    command = f"{launch} && {then}" if then else launch
    script = (
        f"mount -t tmpfs none {node} && cp {program} {node}/solver && "
        f"exec {sys.executable} -m stacklens_cli run --mpi {mpi} -- sh -c '{command}'"
    )
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_SPOOL_DIR="off",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")  # fmt: skip
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env,
                            capture_output=True, text=True, timeout=240)  # fmt: skip
    collector.settle_sites()
    return result


def sites(api_client, job: str) -> dict[tuple[str, str], tuple[int, int, str, str]]:
    """(op, label) -> (calls, ranks, resolved, reason) of the job's MPI sites."""
    answer = api_client.get(f"/api/jobs/{job}/callsites").json()
    return {(s["op"], s["label"]): (s["calls"], s["ranks"], s["frames"][0]["resolved"],
                                    s["frames"][0]["reason"])
            for s in answer["sites"] if s["layer"] == "mpi"}  # fmt: skip


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_sites_named_on_the_node_when_the_collector_cannot_read_the_program(
    collector, api_client, pg_url: str, tmp_path: Path, mpi: str
) -> None:
    job = f"node-{uuid.uuid4().hex[:8]}"
    built, node = tmp_path / "build", tmp_path / "node"
    built.mkdir()
    node.mkdir()
    program = build(built, mpi)
    result = run_on_node(collector, mpi, job, program, node)
    assert result.returncode == 0, result.stderr
    assert not (node / "solver").exists()  # the node's disk is not the collector's
    got = sites(api_client, job)
    expected = {(op, f"{source}:{line_of(source, marker)}"): (calls * RANKS, RANKS, "node", "")
                for (op, source, marker), calls in EXPECTED.items()}  # fmt: skip
    assert {k: v for k, v in got.items() if k in expected} == expected
    assert set(got) - set(expected) <= {("MPI_Allreduce", "<other call sites>")}
    # the collector could not read the program: its fallback says so, the node's answer wins
    reasons = query(pg_url, "SELECT DISTINCT reason FROM callsite_fallbacks WHERE module = %s",
                    (str(node / "solver"),))  # fmt: skip
    assert reasons == [(f"{node / 'solver'} is not here",)]
    stored = query(pg_url, "SELECT count(*), min(file), max(file) FROM callsite_node_symbols "
                           "WHERE file LIKE %s", ("%solver.c",))  # fmt: skip
    assert stored == [(5, str(Path(__file__).parent / "solver.c"),
                       str(Path(__file__).parent / "solver.c"))]  # fmt: skip


def test_a_program_rebuilt_before_the_node_resolves_is_never_read(
    collector, api_client, pg_url: str, tmp_path: Path
) -> None:
    mpi = "openmpi"
    job = f"rebuilt-{uuid.uuid4().hex[:8]}"
    built, other, node = tmp_path / "build", tmp_path / "other", tmp_path / "node"
    for d in (built, other, node):
        d.mkdir()
    program = build(built, mpi)
    # the same program rebuilt from an edited source: another build-id, lines moved by one
    source = Path(__file__).parent / "solver.c"
    edited = other / "solver.c"
    edited.write_text("/* edited */\n" + source.read_text())
    subprocess.run(["mpicc", "-g", "-O2", "-fPIE", "-pie", "-o", other / "solver", edited,
                    f"-L{built}", "-lhalo", f"-Wl,-rpath,{built}"], check=True)  # fmt: skip
    result = run_on_node(collector, mpi, job, program, node,
                         then=f"cp {other / 'solver'} {node}/solver.new && "
                              f"mv {node}/solver.new {node}/solver")  # fmt: skip
    assert result.returncode == 0, result.stderr
    got = sites(api_client, job)
    solver = {k: v for k, v in got.items() if k[1].startswith("solver+")}
    assert len(solver) == 5  # init, bcast, small, big, finalize: none named, none wrong
    assert all(v[2] == "" and v[3] == f"{node / 'solver'} is not here" for v in solver.values())
    assert not any(k[1].startswith("solver.c:") for k in got)
    # the library was not rebuilt: named on the node
    halo = f"halo.c:{line_of('halo.c', 'halo')}"
    assert got[("MPI_Sendrecv_replace", halo)] == (3 * RANKS, RANKS, "node", "")
    assert query(pg_url, "SELECT count(*) FROM callsite_node_symbols WHERE file LIKE %s",
                 ("%solver.c",)) == [(0,)]  # fmt: skip
    shutil.rmtree(other)
    assert not os.path.exists(node / "solver")
