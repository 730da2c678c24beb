"""The whole wrapped MPI surface under Open MPI with exact expected values.

examples/mpi_surface.c documents its pattern; the expectations below follow from it.
Also: the spool when the collector is down (delivered later, totals exact), and a
program without MPI (dd) profiled as a standalone job.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.conftest import free_port, mpi_env, query, stacklens_run
from tests.hooks.test_openmpi import run_under_hooks

RANKS = 4


def job_rows(pg_url: str, sql: str, job: str) -> list[tuple]:
    """Rows of sql (which has one %s: the job key) for job."""
    return query(pg_url, sql, (job,))


def by_name(pg_url: str, job: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(rank, op name) -> (calls, bytes) summed over the job."""
    rows = job_rows(
        pg_url,
        "SELECT world_rank, name, sum(calls), sum(bytes) FROM op_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2",
        job,
    )
    return {(r, n): (c, b) for r, n, c, b in rows}


def expected_p2p(size: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(src, dst) -> (bytes, msgs) of mpi_surface: uneven Isend plus the persistent pair."""
    out = {(r, p): (100 * (p + 1) + r, 1) for r in range(size) for p in range(size) if p != r}
    for r in (0, 1):
        b, m = out[(r, 1 - r)]
        out[(r, 1 - r)] = (b + 3 * 64, m + 3)
    return out


def check_surface(pg_url: str, job: str, files: Path) -> None:
    """Every table of a finished mpi_surface job holds the exact expected values."""
    sent = job_rows(
        pg_url,
        "SELECT world_rank, peer, sum(bytes_sent), sum(msgs_sent), sum(bytes_recv), "
        "sum(msgs_recv) FROM p2p_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "GROUP BY 1, 2",
        job,
    )
    exp = expected_p2p(RANKS)
    assert {(s, d): (b, m) for s, d, b, m, _, _ in sent if m} == exp
    # Receive bytes come from the status (posted count 4096), keyed by the source.
    assert {(s, d): (b, m) for d, s, _, _, b, m in sent if m} == exp

    ops = by_name(pg_url, job)
    for r in range(RANKS):
        assert ops[(r, "MPI_Isend")] == (3, sum(100 * (p + 1) + r for p in range(RANKS) if p != r))
        assert ops[(r, "MPI_Irecv")] == (3, sum(100 * (r + 1) + p for p in range(RANKS) if p != r))
        assert ops[(r, "MPI_Waitall")] == (1, 0)
        assert ops[(r, "MPI_Bcast")] == (1, 1000)
        assert ops[(r, "MPI_Alltoall")] == (1, 8 * RANKS)
        assert ops[(r, "MPI_Allreduce")] == (2, 40 + 8)
        assert ops[(r, "MPI_Put")] == (1, 16)
        assert ops[(r, "MPI_Get")] == (1, 8)
        assert ops[(r, "MPI_File_write_at_all")] == (1, 1000)
        if r < 2:
            assert ops[(r, "MPI_Send_init")] == (1, 192)
            assert ops[(r, "MPI_Recv_init")] == (1, 192)
            assert ops[(r, "MPI_Start")] == (6, 0)
            assert ops[(r, "MPI_Wait")] == (6, 0)

    hist = {
        (r, n, b): c
        for r, n, b, c in job_rows(
            pg_url,
            "SELECT world_rank, name, bucket, sum(count) FROM op_hist_deltas "
            "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
            "WHERE job_key = %s GROUP BY 1, 2, 3",
            job,
        )
    }
    assert hist[(0, "MPI_Barrier", 0)] == 1
    assert hist[(0, "MPI_Bcast", 10)] == 1  # 1000 bytes: [512, 1024)
    assert hist[(0, "MPI_Send_init", 7)] == 3  # 64 bytes: [64, 128)
    assert hist[(0, "MPI_Isend", 9)] == 2  # 300, 400 bytes
    assert hist[(0, "MPI_Isend", 8)] == 1  # 200 bytes

    coll = job_rows(
        pg_url,
        "SELECT world_rank, name, comm_id, comm_size, root, sum(calls), sum(bytes) "
        "FROM coll_deltas JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3, 4, 5",
        job,
    )
    world_ids = {c for _, n, c, s, _, _, _ in coll if s == RANKS}
    assert len(world_ids) == 1  # the same id on every member
    per_rank = {(r, n, s, root): (calls, b) for r, n, _, s, root, calls, b in coll}
    for r in range(RANKS):
        assert per_rank[(r, "MPI_Bcast", RANKS, 1)] == (1, 1000)
        assert per_rank[(r, "MPI_Barrier", RANKS, -1)] == (1, 0)
        assert per_rank[(r, "MPI_Allreduce", RANKS, -1)] == (1, 40)
        assert per_rank[(r, "MPI_Allreduce", 2, -1)] == (1, 8)
    half_ids = {(r % 2, c) for r, n, c, s, _, _, _ in coll if s == 2}
    assert len(half_ids) == 2 and len({c for _, c in half_ids}) == 2  # one id per half

    rma = job_rows(
        pg_url,
        "SELECT world_rank, target, name, sum(calls), sum(bytes) FROM rma_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3",
        job,
    )
    assert sorted(rma) == sorted(
        [(r, (r + 1) % RANKS, "MPI_Put", 1, 16) for r in range(RANKS)]
        + [(r, (r + 2) % RANKS, "MPI_Get", 1, 8) for r in range(RANKS)]
    )

    io = job_rows(
        pg_url,
        "SELECT world_rank, layer, path, sum(opens), sum(reads), sum(writes), "
        "sum(bytes_read), sum(bytes_written), min(fstype) FROM io_deltas "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1, 2, 3",
        job,
    )
    root = str(files.resolve())
    expected_io = []
    for r in range(RANKS):
        expected_io += [
            (r, 1, f"{root}/posix.{r}", 1, 1, 3, 12288, 12288),
            (r, 2, f"{root}/stdio.{r}", 1, 0, 1, 0, 500),
            (r, 3, f"{root}/mpiio.dat", 1, 0, 1, 0, 1000),
        ]
    # Only the application's files: nothing the MPI runtime read or wrote.
    assert sorted(row[:8] for row in io) == sorted(expected_io)
    assert all(row[8] for row in io)  # the file-system type is known


def test_whole_surface_exact(collector, pg_url, hook_library, examples_built, tmp_path):
    job = f"surface-{uuid.uuid4().hex[:8]}"
    result = run_under_hooks(collector, [str(examples_built / "mpi_surface"), str(tmp_path)], job)
    assert result.returncode == 0, result.stderr
    assert "stacklens:" not in result.stderr, result.stderr
    check_surface(pg_url, job, tmp_path)


def test_collector_down_spools_and_replays_exactly(
    collector, pg_url, hook_library, examples_built, tmp_path
):
    job = f"spool-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    env = mpi_env(
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="50",
        STACKLENS_JOB_ID=job,
        STACKLENS_SPOOL_DIR=str(spool),
    )
    result = stacklens_run(
        ["mpirun", "-np", str(RANKS), str(examples_built / "mpi_surface"), str(tmp_path)],
        env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in spool.glob(f"{job}.*.slf"))  # the ranks' (not the launch's)
    assert files and not list(spool.glob("*.tmp"))
    assert len(list(spool.glob("launch.*.slf"))) == 1  # stacklens run's launch record waits too
    # <job>.<run id, 16 hex digits>.<rank>.<seq>.<pid>.slf: one run, every rank.
    runs = {f.split(".")[1] for f in files}
    assert len(runs) == 1 and len(runs.pop()) == 16
    assert {f.split(".")[2] for f in files} == {f"{r:010d}" for r in range(RANKS)}
    replay = subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "replay", str(spool)],
        env={**env, "STACKLENS_COLLECTOR": collector.endpoint},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert f"replayed {len(files) + 1} frames" in replay.stdout  # and the launch record
    assert list(spool.iterdir()) == []
    check_surface(pg_url, job, tmp_path)


def test_program_without_mpi_is_a_process_of_its_job(collector, pg_url, hook_library, tmp_path):
    out = tmp_path / "dd.out"
    job = f"dd-{uuid.uuid4().hex[:8]}"
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_JOB_ID=job,
    )
    result = stacklens_run(
        ["dd", "if=/dev/zero", f"of={out}", "bs=4096", "count=25"], env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    rows = query(
        pg_url,
        "SELECT job_key, world_rank, layer, path, sum(opens), sum(writes), sum(bytes_written) "
        "FROM io_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "GROUP BY 1, 2, 3, 4",
        (job,),
    )
    # /dev/zero is not file-system I/O; the output file is, at the POSIX layer.
    assert [r[1:] for r in rows] == [(0, 1, str(out.resolve()), 1, 25, 25 * 4096)]


def test_spec_matches_installed_mpi_headers():
    """Every spec entry exists in mpi.h with the same argument types (Open MPI and MPICH)."""
    import re

    from contract import MPI_SPEC, generate

    entries = generate.parse_spec(MPI_SPEC)

    def protos(cc: str) -> tuple[dict[str, list[str]], int]:
        text = subprocess.run(
            [cc, "-E", "-dD", "-x", "c", "-"],
            input="#include <mpi.h>\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        version = int(re.search(r"#define MPI_VERSION\s+(\d+)", text).group(1))
        text = re.sub(r"^#.*$", "", text, flags=re.M)
        text = re.sub(r"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)", "", text)
        text = re.sub(r"\s+", " ", text)
        out = {}
        pattern = r"(?:(?<=[;}])|^)\s*(?:extern\s+)?int\s+(MPIX?_\w+)\s*\(([^()]*)\)\s*;"
        for m in re.finditer(pattern, text):
            args = [] if m.group(2).strip() in ("", "void") else m.group(2).split(",")
            out[m.group(1)] = [normalise(a) for a in args]
        return out, version

    def normalise(decl: str) -> str:
        decl = decl.strip()
        name = re.search(r"[A-Za-z_]\w*\s*(\[[^\]]*\]\s*)*$", decl)
        base = decl[: name.start()] if name and name.start() > 0 else decl
        suffix = "*" if name and "[" in name.group(0) else ""
        return re.sub(r"\s+", "", base) + suffix

    for cc in ("mpicc", "mpicc.mpich"):
        found, version = protos(cc)
        for e in entries:
            if e.mpi is not None and e.mpi[0] > version:
                continue
            assert e.name in found, f"{cc}: {e.name} is not in mpi.h"
            mine = [normalise(a.decl) for a in e.args]
            assert mine == found[e.name], f"{cc}: {e.name}: spec {mine} != mpi.h {found[e.name]}"


def test_disabled_io_layers_are_not_counted(collector, pg_url, hook_library, tmp_path):
    """STACKLENS_DISABLE takes the layer names of stacklens_wire.def's SL_IO_LAYER table in
    any case: the disabled layer's file has no record, the other layer's is exact."""
    program = (
        "import ctypes, os, sys\n"
        "d = sys.argv[1]\n"
        "fd = os.open(d + '/posix.out', os.O_WRONLY | os.O_CREAT, 0o644)\n"
        "os.write(fd, b'x' * 1000); os.close(fd)\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.fopen.restype = ctypes.c_void_p\n"
        "f = libc.fopen((d + '/stdio.out').encode(), b'w')\n"
        "libc.fwrite(b'y' * 700, 1, 700, ctypes.c_void_p(f)); libc.fclose(ctypes.c_void_p(f))\n"
    )
    counted = {}
    for disable in ("Stdio", "posix"):
        job = f"off-{uuid.uuid4().hex[:8]}"
        env = mpi_env(
            STACKLENS_COLLECTOR=collector.endpoint,
            STACKLENS_INGEST_TOKEN="secret",
            STACKLENS_INGEST_AUTH="trusted",
            STACKLENS_JOB_ID=job,
            STACKLENS_DISABLE=disable,
        )
        result = stacklens_run([sys.executable, "-c", program, str(tmp_path)], env, timeout=60)
        assert result.returncode == 0, result.stderr
        counted[disable] = query(
            pg_url,
            "SELECT layer, path, sum(opens), sum(writes), sum(bytes_written) FROM io_deltas "
            "JOIN jobs ON jobs.id = job_id WHERE job_key = %s AND path LIKE %s GROUP BY 1, 2",
            (job, f"{tmp_path.resolve()}/%"),
        )
    root = tmp_path.resolve()
    assert counted == {
        "Stdio": [(1, f"{root}/posix.out", 1, 1, 1000)],
        "posix": [(2, f"{root}/stdio.out", 1, 1, 700)],
    }
