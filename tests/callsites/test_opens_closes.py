# tests/callsites/test_opens_closes.py — opens and closes at their call sites, exact, to file:line.
"""opener.c (a PIE, 3 ranks, under Open MPI and MPICH) opens and closes files from known lines
with open, creat, close, fopen, fdopen, freopen, fclose, MPI_File_open and MPI_File_close:
under the hooks every rank's sites of those calls arrive with exactly the calls the program
made, no bytes and some time, resolved to those lines; /dev/null and a failed open are at no
site, and so is a close inside MPI (a generalized request's free function in MPI_Wait),
which still forgets its descriptor; each layer's opens at the sites equal the opens the I/O
table counted for the program's files; a write after freopen is the new file's; the API
sums every site across the ranks (issue #26 point 1)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from server.callsites import repository, resolution, summary
from server.jobs.repository import Scope
from stacklens.db import make_engine
from tests.callsites.test_end_to_end import COMPILERS, line_of
from tests.conftest import query
from tests.hooks import jobs

HERE = Path(__file__).resolve().parent
SOURCE = "opener.c"
RANKS = 3
N = 3
LAYERS = {0: "mpi", 1: "posix", 2: "stdio"}
#: (layer, function, marker) -> calls per rank (opener.c's header comment).
EXPECTED = {
    ("posix", "open", "open_write"): N,
    ("posix", "close", "close_write"): N,
    ("posix", "open", "open_read"): 2 * N,
    ("posix", "close", "close_read"): 2 * N,
    ("posix", "creat", "creat"): 1,
    ("posix", "close", "close_creat"): 1,
    ("posix", "open", "open_fdopen"): 1,
    ("posix", "open", "open_in_mpi"): 1,
    ("stdio", "fopen", "fopen_write"): N,
    ("stdio", "fclose", "fclose_write"): N,
    ("stdio", "fopen", "fopen_read"): 2 * N,
    ("stdio", "fclose", "fclose_read"): 2 * N,
    ("stdio", "fdopen", "fdopen"): 1,
    ("stdio", "fclose", "fclose_fdopen"): 1,
    ("stdio", "fopen", "fopen_freopen"): 1,
    ("stdio", "freopen", "freopen"): 1,
    ("stdio", "fwrite", "fwrite_freopen"): 1,
    ("stdio", "fclose", "fclose_freopen"): 1,
    ("mpi", "MPI_File_open", "mpi_open"): N,
    ("mpi", "MPI_File_close", "mpi_close"): N,
    ("mpi", "MPI_Wait", "wait"): 1,
    ("mpi", "MPI_Init", "init"): 1,
    ("mpi", "MPI_Finalize", "finalize"): 1,
}
#: The open functions per I/O layer (MPI_File_open is counted as an MPI call at its site).
OPENS = {
    "posix": ("open", "creat"),
    "stdio": ("fopen", "fdopen", "freopen"),
    "mpi": ("MPI_File_open",),
}
#: The one call of EXPECTED that moves bytes: fwrite of 100 bytes after freopen.
WRITE = ("stdio", "fwrite", "fwrite_freopen")
#: The I/O table's layers (1 POSIX, 2 stdio, 3 MPI-IO) by the name of their opens' site layer.
IO_LAYERS = {1: "posix", 2: "stdio", 3: "mpi"}


def build(out: Path, mpi: str) -> Path:
    """opener.c built for mpi as a PIE with its line tables, no sibling calls."""
    program = out / "opener"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-fno-optimize-sibling-calls", "-fPIE", "-pie",
                    "-o", program, HERE / SOURCE], check=True)  # fmt: skip
    return program


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_opens_and_closes_at_their_lines_exact_per_rank(collector, pg_url, api_client, tmp_path,
                                                        mpi: str) -> None:  # fmt: skip
    job = f"opens-{uuid.uuid4().hex[:8]}"
    program = build(tmp_path, mpi)
    files = tmp_path / "files"
    files.mkdir()
    result = jobs.run_job(collector, mpi, [str(program), str(files), str(N)], job, ranks=RANKS,
                          interval_ms=50, timeout=180)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    (job_id,) = query(pg_url, "SELECT id FROM jobs WHERE job_key = %s", (job,))[0]
    engine = make_engine(pg_url)
    with Session(engine) as session, session.begin():
        rows = repository.callsite_rows(session, Scope(job_id))
        resolved = resolution.resolve(session, job_id, (f for r in rows for f in r["frames"]))
    engine.dispose()
    marker_of = {line_of(SOURCE, m): m for _, _, m in EXPECTED}
    io = jobs.io(pg_url, job)
    for rank in range(RANKS):
        got: dict[tuple[str, str, str], int] = {}
        for r in rows:
            if r["rank"] != rank or r["site_id"] == summary.OVERFLOW_SITE:
                continue
            (frame,) = r["frames"]
            if frame["module"] != str(program):  # the MPI library's or libc's own calls
                continue
            f = resolved[summary.frame_key(frame)]
            assert (f["quality"], f["file"]) == ("line", str(HERE / SOURCE)), f
            key = (LAYERS[r["layer"]], r["op"], marker_of.get(f["line"], f"line {f['line']}"))
            assert key not in got, key  # one row per site: no communicator, no size but 0
            got[key] = r["calls"]
            if r["layer"] != 0:
                size = 100 if key == WRITE else 0
                bucket = size.bit_length()  # the hooks' log2 size bucket
                assert (r["bytes"], r["buckets"]) == (size, {bucket: r["calls"]}), r
                assert r["time_ns"] > 0, r
        assert got == EXPECTED, rank
        # each layer's opens at the sites are the opens the I/O table counted on its files
        counted = dict.fromkeys(IO_LAYERS.values(), 0)
        for (rk, layer, path), (opens, *_) in io.items():
            if rk == rank and path.startswith(f"{files}/"):
                counted[IO_LAYERS[layer]] += opens
        at_sites = {
            name: sum(c for (_, op, _), c in got.items() if op in OPENS[name])
            for name in IO_LAYERS.values()
        }
        assert counted == at_sites == {"posix": 3 * N + 3, "stdio": 3 * N + 3, "mpi": N}, rank
        # the write after freopen went to the new file, not to the stream's first one
        written = {path: v[4] for (rk, layer, path), v in io.items() if rk == rank and layer == 2}
        assert written[f"{files}/freopen.{rank}"] == 100
        assert written[f"{files}/stdio.{rank}"] == 0
        # closed inside MPI: forgotten all the same, the pipe's byte is not the file's
        assert io[(rank, 1, f"{files}/inmpi.{rank}")] == (1, 0, 0, 0, 0)
    # the API: each site once, every rank's calls summed
    answer = api_client.get(f"/api/jobs/{job}/callsites").json()
    shown = {(s["layer"], s["op"], s["label"]): (s["calls"], s["bytes"], s["ranks"])
             for s in answer["sites"]}  # fmt: skip
    for (kind, op, marker), calls in EXPECTED.items():
        where = f"{SOURCE}:{line_of(SOURCE, marker)}"
        size = 100 if (kind, op, marker) == WRITE else 0
        assert shown[(kind, op, where)] == (calls * RANKS, size * RANKS, RANKS), marker
    untracked = ("untracked_open", "untracked_close", "failed_open", "untracked_fopen",
                 "untracked_fclose", "close_in_mpi")  # fmt: skip
    labels = {label for _, _, label in shown}
    assert not labels & {f"{SOURCE}:{line_of(SOURCE, m)}" for m in untracked}
