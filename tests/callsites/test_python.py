# tests/callsites/test_python.py — mpi4py call sites at their Python file and line, exact.
"""py_sites.py (mpi4py) under the real hooks on Open MPI and MPICH, 3 ranks (issue #26
points 2 and 5): mpi4py releases the GIL around its communication calls, and the hooks read
the calling thread's own Python frames (mpi_pmpi_hooks/src/pyframe.c). Every rank's sites of
the Allreduce, Send and Recv calls must be exactly the marked lines of py_sites.py (quality
`python`, the function named) with exactly the calls and bytes the program made, the sites
of each op adding up to the op table (a call from a Python thread and one from a generator
included); at STACKLENS_CALLSITE_DEPTH=2 each site is the line
and its Python caller's line, so one line reached from two callers is two sites. MPI's
initialisation, made by `from mpi4py import MPI`, is at that line (the import machinery's
frames are skipped); MPI_Finalize, which mpi4py registers to run after the interpreter has
ended (Py_AtExit), is called by libpython itself: its site is there, never a Python line.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from server.callsites import repository, resolution, summary
from server.jobs.repository import Scope
from stacklens.db import make_engine
from tests.callsites.test_languages import RANKS, at
from tests.conftest import query
from tests.hooks import jobs

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "py_sites.py"
MPIS = ["openmpi", "mpich"]


def python_sites(pg_url: str, job: str) -> dict[int, dict[tuple, list[int]]]:
    """rank -> {(op, ('file:line', ...), (function, ...)): [calls, bytes]} of the job's MPI
    sites read as Python frames, and (op, (label,), ()) for the others."""
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (job,))[0]
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        rows = repository.callsite_rows(session, Scope(job_id))
        resolved = resolution.resolve(session, job_id, (f for r in rows for f in r["frames"]))
    engine.dispose()
    out: dict[int, dict[tuple, list[int]]] = {}
    for r in rows:
        if r["layer"] != 0:
            continue
        assert r["site_id"] != summary.OVERFLOW_SITE, r
        frames = [resolved[summary.frame_key(f)] | f for f in r["frames"]]
        if all(f["quality"] == "python" for f in frames):
            assert frames[0]["file"] == str(PROGRAM), frames  # a thread's caller: threading.py
            assert all(f["resolved"] == "hooks" for f in frames), frames
            key = (r["op"], tuple(f"{Path(f['file']).name}:{f['line']}" for f in frames),
                   tuple(f["function"] for f in frames))  # fmt: skip
        else:
            key = (r["op"], tuple(summary.label(f) for f in frames), ())
        got = out.setdefault(r["rank"], {}).setdefault(key, [0, 0])
        got[0] += r["calls"]
        got[1] += r["bytes"]
    return out


def run(collector, mpi: str, job: str, abi: Path, **extra: str) -> None:
    """py_sites.py on RANKS ranks of mpi under the hooks, finished cleanly."""
    if mpi == "mpich":
        extra |= {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi)}
    result = jobs.run_job(collector, mpi, [sys.executable, str(PROGRAM)], job, ranks=RANKS,
                          interval_ms=50, timeout=180, **extra)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []


def op_names(mpi: str) -> tuple[str, str, str, str]:
    """Allreduce, Send, Recv and the initialisation as mpi4py calls them under mpi."""
    c = "_c" if mpi == "mpich" else ""
    return f"MPI_Allreduce{c}", f"MPI_Send{c}", f"MPI_Recv{c}", "MPI_Init_thread"


def at_py(marker: str) -> str:
    """'py_sites.py:line' of a marked line."""
    return at(PROGRAM.name, marker)


def assert_sites_are_the_op_table(pg_url: str, job: str, got: dict) -> None:
    """Per rank and op, the sites' calls and bytes add up to the op table's."""
    table = jobs.ops(pg_url, job)
    for rank in range(RANKS):
        for op in {o for o, _, _ in got[rank]}:
            mine = [v for (o, _, _), v in got[rank].items() if o == op]
            assert [sum(v[0] for v in mine), sum(v[1] for v in mine)] == list(table[(rank, op)])


@pytest.mark.parametrize("mpi", MPIS)
def test_mpi4py_calls_at_their_python_lines(collector, pg_url, api_client, mpich_abi_dir,
                                            mpi) -> None:  # fmt: skip
    pytest.importorskip("mpi4py")
    job = f"sites-py-{mpi}-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, job, mpich_abi_dir)
    allreduce, send, recv, init = op_names(mpi)
    got = python_sites(pg_url, job)
    assert sorted(got) == list(range(RANKS))
    for rank in range(RANKS):
        expected = {
            (init, (at_py("init"),), ("<module>",)): [1, 0],
            ("MPI_Barrier", (at_py("thread"),), ("barrier_in_thread.<locals>.<lambda>",)): [1, 0],
            ("MPI_Barrier", (at_py("generator"),), ("barriers",)): [1, 0],
            (allreduce, (at_py("small"),), ("reduce_all",)): [9, 9 * 64],
            (allreduce, (at_py("large"),), ("reduce_all",)): [15, 15 * 4000],
            (send, (at_py("send"),), ("exchange",)) if rank == 0
            else (recv, (at_py("recv"),), ("exchange",)): (
                [RANKS - 1, (RANKS - 1) * 100] if rank == 0 else [1, 100]
            ),
        }  # fmt: skip
        ops = (init, allreduce, send, recv, "MPI_Barrier")
        mine = {k: v for k, v in got[rank].items() if k[0] in ops}
        assert mine == expected, rank
        (finalize,) = [k for k in got[rank] if k[0] == "MPI_Finalize"]
        assert finalize[2] == () and PROGRAM.name not in finalize[1][0], finalize
    assert_sites_are_the_op_table(pg_url, job, got)
    # the API: each site labelled by its Python line, every rank's calls summed
    answer = api_client.get(f"/api/jobs/{job}/callsites").json()
    shown = {(s["op"], s["label"]): (s["calls"], s["bytes"], s["ranks"]) for s in answer["sites"]}
    assert shown[(allreduce, at_py("small"))] == (9 * RANKS, 9 * 64 * RANKS, RANKS)
    assert shown[(allreduce, at_py("large"))] == (15 * RANKS, 15 * 4000 * RANKS, RANKS)
    assert shown[(send, at_py("send"))] == (RANKS - 1, (RANKS - 1) * 100, 1)
    (frame,) = next(s for s in answer["sites"] if s["label"] == at_py("small"))["frames"]
    assert (frame["quality"], frame["function"], frame["file"], frame["resolved"]) == (
        "python", "reduce_all", str(PROGRAM), "hooks")  # fmt: skip


@pytest.mark.parametrize("mpi", MPIS)
def test_depth_two_keeps_the_python_caller(collector, pg_url, mpich_abi_dir, mpi) -> None:
    pytest.importorskip("mpi4py")
    job = f"sites-py2-{mpi}-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, job, mpich_abi_dir, STACKLENS_CALLSITE_DEPTH="2")
    allreduce, send, recv, _ = op_names(mpi)
    got = python_sites(pg_url, job)
    both = ("reduce_all", "main")
    for rank in range(RANKS):
        expected = {
            (allreduce, (at_py("small"), at_py("first")), both): [3, 3 * 64],
            (allreduce, (at_py("small"), at_py("second")), both): [6, 6 * 64],
            (allreduce, (at_py("large"), at_py("first")), both): [5, 5 * 4000],
            (allreduce, (at_py("large"), at_py("second")), both): [10, 10 * 4000],
            (send, (at_py("send"), at_py("exchange")), ("exchange", "main")) if rank == 0
            else (recv, (at_py("recv"), at_py("exchange")), ("exchange", "main")): (
                [RANKS - 1, (RANKS - 1) * 100] if rank == 0 else [1, 100]
            ),
        }  # fmt: skip
        mine = {k: v for k, v in got[rank].items() if k[0] in (allreduce, send, recv)}
        assert mine == expected, rank
    assert_sites_are_the_op_table(pg_url, job, got)
