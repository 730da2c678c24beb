"""Numbers that stay exact and read right, on real MPI jobs under the hooks.

* No frame is dropped for one bad record: one file reopened 1,500 times is one I/O record,
  5,000 distinct files overflow into the layer's "<other>" record (a valid record), and in
  both every MPI call and byte arrives and the job finishes (mpi_pmpi_hooks/tests/files.c).
* A request handle the MPI library reuses after a completion the hooks could not see
  (PMPI_Wait called directly) is never counted as the earlier receive
  (mpi_pmpi_hooks/tests/reused.c).
* The size histogram counts messages, not buffers, and category totals say what they are
  (mpi_pmpi_hooks/tests/sizes.c).
* I/O before MPI_Init (an mpi4py program's imports) is start-up I/O, apart from the
  program's.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import mpi_env, query
from tests.hooks import jobs

HERE = Path(__file__).resolve().parent


def io_by_path(pg_url: str, job: str, under: Path) -> dict[tuple[int, int, str], tuple]:
    """(rank, phase, path) -> (opens, writes, bytes written) of the job's POSIX records
    whose path is under `under` or is the overflow record "<other>"."""
    rows = query(
        pg_url,
        "SELECT world_rank, phase, path, sum(opens), sum(writes), sum(bytes_written) "
        "FROM io_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s AND layer = 1 "
        "AND (path LIKE %s OR path = '<other>') GROUP BY 1, 2, 3",
        (job, f"{under.resolve()}/%"),
    )
    return {(r, phase, path): (o, w, b) for r, phase, path, o, w, b in rows}


def health(pg_url: str, job: str) -> list[tuple]:
    """[(rank, keys folded, frames lost)] of the job."""
    return query(
        pg_url,
        "SELECT world_rank, keys_dropped, frames_dropped FROM ranks JOIN jobs "
        "ON jobs.id = job_id WHERE job_key = %s ORDER BY 1",
        (job,),
    )


def test_one_file_reopened_is_one_record(collector, pg_url, tmp_path):
    job = f"reopen-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program("openmpi", "files"), "same", "1500", str(tmp_path)]
    result = jobs.run_job(collector, "openmpi", argv, job, interval_ms=50, timeout=180)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    files = io_by_path(pg_url, job, tmp_path)
    assert files == {
        (rank, 0, str((tmp_path / f"r{rank}").resolve())): (1500, 1500, 1500 * 64)
        for rank in (0, 1)
    }
    ops = jobs.ops(pg_url, job)
    assert [ops[(rank, "MPI_Barrier")][0] for rank in (0, 1)] == [1500, 1500]
    assert health(pg_url, job) == [(0, 0, 0), (1, 0, 0)]
    assert jobs.job_end(pg_url, job) == [("finished", 2, True, 0)]


def test_files_beyond_the_key_limit_fold_into_other(collector, pg_url, tmp_path):
    job = f"distinct-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program("openmpi", "files"), "distinct", "5000", str(tmp_path)]
    result = jobs.run_job(collector, "openmpi", argv, job, interval_ms=50, timeout=300)
    assert result.returncode == 0, result.stderr
    files = io_by_path(pg_url, job, tmp_path)
    for rank in (0, 1):
        mine = {path: v for (r, phase, path), v in files.items() if r == rank and phase == 0}
        named = [path for path in mine if path != "<other>"]
        # The table holds STACKLENS_MAX_KEYS (1024) files; those past it are counted in the
        # POSIX layer's overflow record, with every open and byte.
        assert len(named) <= 1024 and "<other>" in mine
        assert [sum(v[i] for v in mine.values()) for i in range(3)] == [5000, 5000, 5000 * 64]
    ops = jobs.ops(pg_url, job)
    assert [ops[(rank, "MPI_Barrier")][0] for rank in (0, 1)] == [5000, 5000]
    assert all(lost == 0 and folded >= 5000 - 1024 for _, folded, lost in health(pg_url, job))
    assert jobs.job_end(pg_url, job) == [("finished", 2, True, 0)]


def test_a_message_is_a_block_and_bytes_are_sent_once(collector, pg_url, api_client):
    job = f"sizes-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "openmpi", [jobs.program("openmpi", "sizes")], job, ranks=4)
    assert result.returncode == 0, result.stderr
    sizes = api_client.get(api_client.app.url_path_for("job_sizes", job=job)).json()["ops"]
    buckets = {o["op"]: {b["lower_bytes"]: b["count"] for b in o["buckets"]} for o in sizes}
    # Alltoall of 1 KiB per peer: 4 messages of 1 KiB per call and rank, not one of 4 KiB.
    assert buckets["MPI_Alltoall"] == {1024: 3 * 4 * 4}
    # Alltoallv: one message per destination block of 0, 100, 200 and 300 bytes.
    assert buckets["MPI_Alltoallv"] == {0: 8, 64: 8, 128: 8, 256: 8}
    assert buckets["MPI_Allreduce"] == {64: 5 * 4}
    assert buckets["MPI_Barrier"] == {0: 4}
    assert buckets["MPI_Send"] == {1024: 2} and buckets["MPI_Recv"] == {1024: 2}
    ops = api_client.get(api_client.app.url_path_for("job_ops", job=job)).json()
    totals = {c["category"]: c for c in ops["categories"]}
    # 2 KiB went from rank 0 to rank 1: sent once, received once, never 4 KiB "moved".
    assert (totals["mpi_p2p"]["bytes_sent"], totals["mpi_p2p"]["bytes_received"]) == (2048, 2048)
    coll = 3 * 4096 * 4 + 2 * 600 * 4 + 5 * 64 * 4
    assert (totals["mpi_coll"]["bytes_sent"], totals["mpi_coll"]["bytes_received"]) == (coll, 0)
    startup = totals["mpi_startup"]
    assert startup["calls"] == 8 and not startup["communication"]  # 4 x MPI_Init, MPI_Finalize


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_imports_before_mpi_init_are_startup_io(collector, api_client, mpi, tmp_path, request):
    pytest.importorskip("mpi4py")
    job = f"startup-{mpi}-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "result.bin"
    extra = {}
    if mpi == "mpich":
        abi = request.getfixturevalue("mpich_abi_dir")
        extra = {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi)}
    argv = [sys.executable, str(HERE / "py_startup.py"), str(out)]
    result = jobs.run_job(collector, mpi, argv, job, ranks=2, timeout=120, **extra)
    assert result.returncode == 0, result.stderr
    body = api_client.get(api_client.app.url_path_for("job_io", job=job)).json()
    program = {(f["layer"], f["path"]): f for f in body["files"]}
    # The program's own I/O after MPI_Init: exactly the file it wrote, once per rank.
    mine = program[("POSIX", str(out.resolve()))]
    assert (mine["ranks"], mine["opens"], mine["writes"], mine["bytes_written"]) == (2, 2, 2, 2048)
    assert not any(path.endswith(".py") for _, path in program)
    # Its imports (numpy, mpi4py) came before MPI_Init: start-up I/O, listed apart.
    url = api_client.app.url_path_for("job_io", job=job)
    listed = api_client.get(url, params={"phase": "startup", "limit": 10_000}).json()
    assert listed["page"]["next_cursor"] is None
    startup = {f["path"] for f in listed["files"]}
    assert any("/mpi4py/" in path for path in startup)
    assert any("/numpy/" in path for path in startup)


#: Creates argv[2] files of one byte each under argv[1].
MANY_FILES = """
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"f{i}"), "wb", buffering=0) as out:
        out.write(b"x")
"""


@pytest.fixture
def tmpfs_dir(tmp_path: Path) -> Iterator[Path]:
    """A private tmpfs mounted on a directory for the test (creating 40,000 files on the
    development VM's disk takes a minute), unmounted after."""
    path = tmp_path / "tmpfs"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "sltest", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_records_past_the_body_bound_go_in_the_next_frame(collector, pg_url, hook_library,
                                                          tmpfs_dir):  # fmt: skip
    """40,000 files in one interval: their I/O records (488 B each, 19.5 MB) do not fit one
    frame body (max_body_bytes, 16 MiB): the final flush sends them in two frames, and
    every open and byte arrives, with the mount the files are on."""
    job, tmp_path = f"bound-{uuid.uuid4().hex[:8]}", tmpfs_dir
    env = mpi_env(
        LD_PRELOAD=str(hook_library),
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="3600000",  # everything in the final flush
        STACKLENS_SPOOL_DIR="off",
        STACKLENS_MAX_KEYS="65536",
        STACKLENS_JOB_ID=job,
    )
    proc = jobs.start([sys.executable, "-c", MANY_FILES, str(tmp_path), "40000"], env)
    result = jobs.finish(proc, timeout=300)
    assert result.returncode == 0, result.stderr
    like = (job, f"{tmp_path.resolve()}/f%")
    rows = query(
        pg_url,
        "SELECT count(DISTINCT path), sum(opens), sum(bytes_written), min(mount), max(fstype) "
        "FROM io_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s AND path LIKE %s",
        like,
    )
    assert rows == [(40000, 40000, 40000, str(tmp_path.resolve()), "tmpfs")]
    frames = query(
        pg_url,
        "SELECT count(*), bool_and(finished), max(keys_dropped + frames_dropped) FROM "
        "received_frames r JOIN jobs ON jobs.id = r.job_id JOIN ranks ON ranks.job_id = jobs.id "
        "WHERE job_key = %s",
        like[:1],
    )
    assert frames == [(2, True, 0)]


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_reused_request_handle_is_not_the_old_receive(collector, pg_url, mpi):
    job = f"reused-{mpi}-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, mpi, [jobs.program(mpi, "reused")], job, timeout=120)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    sent, received = jobs.p2p(pg_url, job)
    assert sent == {(1, 0): (80_000, 200)}
    # Rank 0's Irecvs completed in PMPI_Wait, which the hooks do not see: nothing of them
    # is counted, and above all not the Iallreduces that got their handles.
    assert received == {}
    ops = jobs.ops(pg_url, job)
    assert [ops[(rank, "MPI_Iallreduce")] for rank in (0, 1)] == [(200, 8_000)] * 2
    assert ops[(0, "MPI_Irecv")] == (200, 0)
    assert [ops[(rank, "MPI_Wait")] for rank in (0, 1)] == [(200, 0)] * 2
    assert jobs.job_end(pg_url, job) == [("finished", 2, True, 0)]
