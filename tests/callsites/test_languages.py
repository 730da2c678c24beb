# tests/callsites/test_languages.py — C++ and Fortran MPI call sites, exact, to file:line.
"""Programs whose call sites are known, under the real hooks on Open MPI and MPICH, 3 ranks
(issue #26 point 5):

- cxx_sites.cpp makes every MPI call through a wrapper class (comm.hpp, comm.cpp, its own
  translation unit); at STACKLENS_CALLSITE_DEPTH=2 each site is the wrapper's line in
  comm.cpp and the user's line in cxx_sites.cpp that called it, so two user lines calling
  the same wrapper method are two sites;
- f_sites.f90 (`use mpi`) and f08_sites.f90 (`use mpi_f08`) make the same calls from
  Fortran: at the default depth each lands on the Fortran line of its `call`, not in the MPI
  library's Fortran binding layer (libmpi_mpifh, libmpi_usempif08, libmpifort).

Every rank's sites, resolved by the collector's resolver (collector/resolver.py) from
the (module, build-id, offset) frames the hooks sent, must be exactly the marked lines with
exactly the calls and bytes the program made, and per op the sites must add up to the op
table (no call counted at a site inside a binding layer). The programs are built in the
test's temporary directory with line tables, optimised, without sibling calls.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from server.callsites import repository, resolution, summary
from server.jobs.repository import Scope
from stacklens.db import make_engine
from tests.conftest import query
from tests.hooks import jobs

HERE = Path(__file__).resolve().parent
RANKS = 3
MPIS = ["openmpi", "mpich"]
CXX = {"openmpi": "mpicxx", "mpich": "mpicxx.mpich"}
FC = {"openmpi": "mpif90", "mpich": "mpif90.mpich"}
FLAGS = ["-g", "-O2", "-fno-optimize-sibling-calls"]
#: The Fortran programs by the module they use.
FORTRAN = {"mpi": "f_sites.f90", "mpi_f08": "f08_sites.f90"}


def markers(source: str) -> dict[str, int]:
    """marker -> the line of `source` (in this folder) marked `site:<marker>`."""
    lines = (HERE / source).read_text().splitlines()
    return {
        m.group(1): i
        for i, text in enumerate(lines, 1)
        if (m := re.search(r"site:(\w+)", text)) and not text.lstrip().startswith(("!", "//"))
    }


def at(source: str, marker: str) -> str:
    """'source:line' of a marked line, as a resolved frame is labelled here."""
    return f"{source}:{markers(source)[marker]}"


def sites(pg_url: str, job: str, ops: tuple[str, ...]) -> dict[int, dict[tuple, list[int]]]:
    """rank -> {(op, ('file:line', ... per frame)): [calls, bytes]} of the job's MPI sites of
    ops; every frame must resolve to a line in a file of this folder."""
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (job,))[0]
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        rows = repository.callsite_rows(session, Scope(job_id))
        resolved = resolution.resolve(session, job_id, (f for r in rows for f in r["frames"]))
    engine.dispose()
    out: dict[int, dict[tuple, list[int]]] = {}
    for r in rows:
        if r["layer"] != 0 or r["op"] not in ops:
            continue
        assert r["site_id"] != summary.OVERFLOW_SITE, r
        where = []
        for frame in r["frames"]:
            f = resolved[summary.frame_key(frame)]
            assert f["quality"] == "line" and f["file"].startswith(str(HERE)), (r["op"], f)
            where.append(f"{Path(f['file']).name}:{f['line']}")
        got = out.setdefault(r["rank"], {}).setdefault((r["op"], tuple(where)), [0, 0])
        got[0] += r["calls"]
        got[1] += r["bytes"]
    return out


def assert_sites_are_the_op_table(pg_url: str, job: str, got: dict, ops: tuple[str, ...]) -> None:
    """Per rank and op, the sites' calls and bytes add up to the op table's."""
    table = jobs.ops(pg_url, job)
    for rank in range(RANKS):
        for op in ops:
            mine = [v for (o, _), v in got[rank].items() if o == op]
            assert [sum(v[0] for v in mine), sum(v[1] for v in mine)] == list(table[(rank, op)]), (
                rank,
                op,
            )


def run(collector, mpi: str, program: Path, job: str, **extra: str) -> None:
    """program on RANKS ranks of mpi under the hooks, finished cleanly."""
    result = jobs.run_job(collector, mpi, [str(program)], job, ranks=RANKS, interval_ms=50,
                          timeout=180, **extra)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []


@pytest.mark.parametrize("mpi", MPIS)
def test_cxx_wrapper_class_at_depth_two_reaches_the_users_line(collector, pg_url, api_client,
                                                               tmp_path, mpi) -> None:  # fmt: skip
    program = tmp_path / "cxx_sites"
    subprocess.run([CXX[mpi], *FLAGS, "-o", program, HERE / "cxx_sites.cpp", HERE / "comm.cpp"],
                   check=True)  # fmt: skip
    job = f"sites-cxx-{mpi}-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, program, job, STACKLENS_CALLSITE_DEPTH="2")
    ops = ("MPI_Allreduce", "MPI_Send", "MPI_Recv")
    got = sites(pg_url, job, ops)
    user, wrapper = "cxx_sites.cpp", "comm.cpp"
    expected = {
        ("MPI_Allreduce", (at(wrapper, "wrap_sum"), at(user, "small"))): [3, 3 * 64],
        ("MPI_Allreduce", (at(wrapper, "wrap_sum"), at(user, "large"))): [5, 5 * 4000],
        ("MPI_Send", (at(wrapper, "wrap_send"), at(user, "send"))): [2, 200],
        ("MPI_Recv", (at(wrapper, "wrap_recv"), at(user, "recv"))): [2, 200],
    }
    assert sorted(got) == list(range(RANKS))
    for rank in range(RANKS):
        assert got[rank] == expected, rank
    assert_sites_are_the_op_table(pg_url, job, got, ops)
    # the API labels each site by its path, the user's line included, every rank's calls summed
    # (a loop the compiler unrolled calls from one line at several addresses: one site each)
    answer = api_client.get(f"/api/jobs/{job}/callsites").json()
    shown: dict[tuple[str, str], list[int]] = {}
    for s in answer["sites"]:
        row = shown.setdefault((s["op"], s["label"]), [0, 0, 0])
        row[0] += s["calls"]
        row[1] += s["bytes"]
        row[2] = max(row[2], s["ranks"])
    for (op, path), (calls, nbytes) in expected.items():
        assert shown[(op, " < ".join(path))] == [calls * RANKS, nbytes * RANKS, RANKS]


@pytest.mark.parametrize("module", sorted(FORTRAN))
@pytest.mark.parametrize("mpi", MPIS)
def test_fortran_call_lands_on_the_fortran_line(collector, pg_url, tmp_path, mpi,
                                                module) -> None:  # fmt: skip
    source = FORTRAN[module]
    program = tmp_path / Path(source).stem
    subprocess.run([FC[mpi], *FLAGS, "-o", program, HERE / source], check=True)
    job = f"sites-f-{module}-{mpi}-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, program, job)
    ops = ("MPI_Init", "MPI_Allreduce", "MPI_Send", "MPI_Recv", "MPI_Finalize")
    got = sites(pg_url, job, ops)
    # gfortran 12's line table puts the calls of MPI_Init and MPI_Finalize through Open MPI's
    # `use mpi` on the `program` statement (readelf and addr2line agree; the return address
    # is the program's call): there those two are checked for their file only
    for rank in got if (mpi, module) == ("openmpi", "mpi") else ():
        for op in ("MPI_Init", "MPI_Finalize"):
            (where,) = [path for o, path in got[rank] if o == op]
            assert [w.split(":")[0] for w in where] == [source], (rank, op, where)
            got[rank][(op, (at(source, op.removeprefix("MPI_").lower()),))] = got[rank].pop(
                (op, where)
            )
    expected = {
        ("MPI_Init", (at(source, "init"),)): [1, 0],
        ("MPI_Allreduce", (at(source, "small"),)): [3, 3 * 64],
        ("MPI_Allreduce", (at(source, "large"),)): [5, 5 * 4000],
        ("MPI_Send", (at(source, "send"),)): [2, 200],
        ("MPI_Recv", (at(source, "recv"),)): [2, 200],
        ("MPI_Finalize", (at(source, "finalize"),)): [1, 0],
    }
    assert sorted(got) == list(range(RANKS))
    for rank in range(RANKS):
        assert got[rank] == expected, rank
    assert_sites_are_the_op_table(pg_url, job, got, ops)
