# tests/callsites/test_end_to_end.py — call sites of a real MPI job, exact, to file:line.
"""solver.c (a PIE, run under ASLR on 4 ranks) and its shared library halo.c make MPI calls
from known lines; under the hooks every rank's sites arrive, resolve to exactly those
lines, and their calls and bytes per rank equal what the program did and what the op
table counts; the API's sites sum them across ranks (issue #26 points 1, 2, 3 and 5)."""

from __future__ import annotations

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
RANKS = 4
ITERATIONS = 10
COMPILERS = {"openmpi": "mpicc", "mpich": "mpicc.mpich"}


def line_of(source: str, marker: str) -> int:
    """The line of `source` (in this folder) holding `/* site:<marker> */`."""
    lines = (HERE / source).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"/* site:{marker} */" in text)


def build(out: Path, mpi: str) -> Path:
    cc = [COMPILERS[mpi], "-g", "-O2", "-fno-optimize-sibling-calls"]
    subprocess.run([*cc, "-fPIC", "-shared", "-o", out / "libhalo.so", HERE / "halo.c"],
                   check=True)  # fmt: skip
    program = out / "solver"
    subprocess.run([*cc, "-fPIE", "-pie", "-o", program, HERE / "solver.c", f"-L{out}",
                    "-lhalo", f"-Wl,-rpath,{out}"], check=True)  # fmt: skip
    return program


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_every_rank_every_site_exact_to_its_line(collector, pg_url, api_client, tmp_path,
                                                 mpi: str) -> None:  # fmt: skip
    job = f"sites-{uuid.uuid4().hex[:8]}"
    program = build(tmp_path, mpi)
    result = jobs.run_job(collector, mpi, [str(program), str(ITERATIONS)], job, ranks=RANKS,
                          interval_ms=50, timeout=180)  # fmt: skip
    assert result.returncode == 0, result.stderr
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (job,))[0]
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        rows = repository.callsite_rows(session, Scope(job_id))
        resolved = resolution.resolve(session, job_id, (f for r in rows for f in r["frames"]))
    engine.dispose()
    expected = {
        ("MPI_Allreduce", "solver.c", line_of("solver.c", "small"), "solve"): ITERATIONS,
        ("MPI_Allreduce", "solver.c", line_of("solver.c", "big"), "solve"): ITERATIONS // 2,
        ("MPI_Bcast", "solver.c", line_of("solver.c", "bcast"), "main"): 1,
        ("MPI_Sendrecv_replace", "halo.c", line_of("halo.c", "halo"), "exchange"): 3,
        ("MPI_Init", "solver.c", line_of("solver.c", "init"), "main"): 1,
        ("MPI_Finalize", "solver.c", line_of("solver.c", "finalize"), "main"): 1,
    }
    ops = jobs.ops(pg_url, job)
    for rank in range(RANKS):
        mine = [r for r in rows if r["rank"] == rank and r["layer"] == 0]
        got: dict[tuple, list[int]] = {}
        for r in mine:
            if r["site_id"] == summary.OVERFLOW_SITE:
                continue
            f = resolved[summary.frame_key(r["frames"][0])]
            assert f["quality"] == "line" and f["file"].startswith(str(HERE)), f
            key = (r["op"], Path(f["file"]).name, f["line"], f["function"])
            calls, nbytes = got.get(key, [0, 0])
            got[key] = [calls + r["calls"], nbytes + r["bytes"]]
        assert {k: v[0] for k, v in got.items()} == expected, rank
        # per op, the sites' calls and bytes are the op table's
        for op in ("MPI_Allreduce", "MPI_Bcast", "MPI_Sendrecv_replace"):
            assert [sum(v[0] for k, v in got.items() if k[0] == op),
                    sum(v[1] for k, v in got.items() if k[0] == op)] == list(ops[(rank, op)]), (
                rank, op)  # fmt: skip
        small = got[("MPI_Allreduce", "solver.c", line_of("solver.c", "small"), "solve")]
        big = got[("MPI_Allreduce", "solver.c", line_of("solver.c", "big"), "solve")]
        assert (small[1], big[1]) == (ITERATIONS * 8, ITERATIONS // 2 * 4096)
    # the API: the same sites across ranks, every rank's calls summed
    answer = api_client.get(f"/api/jobs/{job}/callsites").json()
    shown = {(s["op"], s["label"]): (s["calls"], s["ranks"]) for s in answer["sites"]}
    for (op, source, line, _), calls in expected.items():
        assert shown[(op, f"{source}:{line}")] == (calls * RANKS, RANKS)
    csv = api_client.get(f"/api/jobs/{job}/callsites", params={"format": "csv"})
    assert csv.status_code == 200 and f"solver.c:{line_of('solver.c', 'big')}" in csv.text
