"""Running a small MPI job under the hook library, under Open MPI or MPICH, and reading back
what the collector stored for it.

Every job runs in its own session (process group) and the whole group is killed if it
outlives its timeout, so a hung rank never outlives the test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from stacklens.paths import EXAMPLES_DIR, HOOKS_DIR, LIBRARIES
from tests.conftest import mpi_env, query

#: The test programs of mpi_pmpi_hooks/tests per MPI implementation.
PROGRAMS = {"openmpi": HOOKS_DIR / "tests" / "build", "mpich": HOOKS_DIR / "tests" / "build-mpich"}
#: The example workloads per MPI implementation.
EXAMPLES = {"openmpi": EXAMPLES_DIR / "build", "mpich": EXAMPLES_DIR / "build-mpich"}


def mpirun(mpi: str, ranks: int, argv: list[str]) -> list[str]:
    """The launch command: Open MPI's mpirun passes its environment on by itself,
    MPICH's Hydra is told to with -genvall."""
    if mpi == "openmpi":
        return ["mpirun", "-np", str(ranks), *argv]
    return ["mpirun.mpich", "-np", str(ranks), "-genvall", *argv]


def job_env(collector, mpi: str, job: str, interval_ms: int = 100, **extra: str) -> dict:
    """Environment of a job attached to `collector` with the library built for `mpi`
    (no spool directory unless `extra` sets STACKLENS_SPOOL_DIR: a test leaves no files
    behind)."""
    return mpi_env(
        **{
            "LD_PRELOAD": str(LIBRARIES[mpi]),
            "STACKLENS_SPOOL_DIR": "off",
            "STACKLENS_COLLECTOR": collector.endpoint,
            "STACKLENS_INGEST_TOKEN": "secret",
            "STACKLENS_INGEST_AUTH": "trusted",
            "STACKLENS_INTERVAL_MS": str(interval_ms),
            "STACKLENS_JOB_ID": job,
            **extra,
        }
    )


def user_env(collector, job: str, **extra: str) -> dict[str, str]:
    """The environment of a user who set only the collector, token and job id (and the
    Open MPI root variables): no hook library chosen, as `stacklens run`/`env` start from."""
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="100",
        STACKLENS_SPOOL_DIR="off",
        STACKLENS_JOB_ID=job,
        **extra,
    )
    for name in ("LD_PRELOAD", "STACKLENS_LIBRARY", "MPI4PY_MPIABI"):
        env.pop(name, None)
    return env


def start(cmd: list[str], env: dict) -> subprocess.Popen[str]:
    """Starts cmd in a new session (its own process group), output captured as text."""
    return subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> subprocess.CompletedProcess:
    """Waits for proc; on timeout kills its whole process group and fails."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args!r} timed out\n{out}\n{err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILLs every process of proc's session (it is its group leader)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_job(
    collector,
    mpi: str,
    argv: list[str],
    job: str,
    ranks: int = 2,
    interval_ms: int = 100,
    timeout: float = 90,
    **extra: str,
) -> subprocess.CompletedProcess:
    """Runs argv on `ranks` ranks of `mpi` under the hooks and waits for it, and for the
    collector's resolver to name its call sites."""
    env = job_env(collector, mpi, job, interval_ms, **extra)
    result = finish(start(mpirun(mpi, ranks, argv), env), timeout)
    if hasattr(collector, "settle_sites"):
        collector.settle_sites()  # the call sites named before the test reads them
    return result


def program(mpi: str, name: str) -> str:
    """Path of a built test program of mpi_pmpi_hooks/tests."""
    path = PROGRAMS[mpi] / name
    assert path.is_file(), f"{path} is not built: run `make hooks` (make test does)"
    return str(path)


def example(mpi: str, name: str) -> str:
    """Path of a built example workload."""
    path = EXAMPLES[mpi] / name
    assert path.is_file(), f"{path} is not built: run `make examples` (make test does)"
    return str(path)


def p2p(pg_url: str, job: str) -> tuple[dict, dict]:
    """(sent, received): (rank, peer) -> (bytes, msgs) summed over the job, zero rows left out."""
    rows = query(
        pg_url,
        "SELECT world_rank, peer, sum(bytes_sent), sum(msgs_sent), sum(bytes_recv), "
        "sum(msgs_recv) FROM p2p_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "GROUP BY 1, 2",
        (job,),
    )
    sent = {(r, p): (b, m) for r, p, b, m, _, _ in rows if m}
    recv = {(r, p): (b, m) for r, p, _, _, b, m in rows if m}
    return sent, recv


def ops(pg_url: str, job: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(rank, op name) -> (calls, bytes) summed over the job."""
    rows = query(
        pg_url,
        "SELECT world_rank, name, sum(calls), sum(bytes) FROM op_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2",
        (job,),
    )
    return {(r, n): (c, b) for r, n, c, b in rows}


def coll(pg_url: str, job: str) -> dict[tuple[int, str, int], tuple[int, int]]:
    """(rank, op name, root world rank or -1) -> (calls, bytes) summed over the job."""
    rows = query(
        pg_url,
        "SELECT world_rank, name, root, sum(calls), sum(bytes) FROM coll_deltas "
        "JOIN jobs ON jobs.id = job_id JOIN mpi_ops ON mpi_ops.id = op_id "
        "WHERE job_key = %s GROUP BY 1, 2, 3",
        (job,),
    )
    return {(r, n, root): (c, b) for r, n, root, c, b in rows}


def io(pg_url: str, job: str) -> dict[tuple[int, int, str], tuple[int, int, int, int, int]]:
    """(rank, layer, path) -> (opens, reads, writes, bytes read, bytes written) over the job."""
    rows = query(
        pg_url,
        "SELECT world_rank, layer, path, sum(opens), sum(reads), sum(writes), sum(bytes_read), "
        "sum(bytes_written) FROM io_deltas JOIN jobs ON jobs.id = job_id WHERE job_key = %s "
        "GROUP BY 1, 2, 3",
        (job,),
    )
    return {(r, layer, path): tuple(v) for r, layer, path, *v in rows}


def job_end(pg_url: str, job: str) -> list[tuple]:
    """[(job status, rank count, all ranks finished, ranks killed by a signal)] of the job's
    MPI runs (with the hooks in its environment, `stacklens run` itself is a process of the
    job's run of processes without MPI)."""
    return query(
        pg_url,
        "SELECT min(jobs.status), count(*), bool_and(finished), count(*) FILTER (WHERE killed) "
        "FROM ranks JOIN jobs ON jobs.id = ranks.job_id JOIN runs ON runs.id = ranks.run_id "
        "WHERE job_key = %s AND runs.kind = 'mpi'",
        (job,),
    )


def library_warnings(stderr: str) -> list[str]:
    """The library's own warning lines in a job's stderr."""
    return [line for line in stderr.splitlines() if line.startswith("stacklens:")]


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants, parents first (from the parent pids in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
    tree, i = [pid], 0
    while i < len(tree):
        tree.extend(children.get(tree[i], []))
        i += 1
    return tree


def wait_dead(pids: list[int], timeout: float) -> None:
    """Waits until none of pids runs any more (gone, or a zombie not yet reaped)."""
    deadline = time.monotonic() + timeout

    def running(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # gone before or while read
            return False
        return stat[stat.rindex(")") + 2] != "Z"

    while any(running(pid) for pid in pids):
        assert time.monotonic() < deadline, f"processes {pids} still run"
        time.sleep(0.01)


def rank_pids(proc: subprocess.Popen, directory, ranks: int, timeout: float = 60) -> list[int]:
    """The pids the ranks of a test program wrote to directory/pid.<rank> once ready
    (waits for them; fails if the job ends first)."""
    pids = []
    deadline = time.monotonic() + timeout
    for r in range(ranks):
        path = directory / f"pid.{r}"
        while not path.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "ranks did not get ready"
            time.sleep(0.05)
        pids.append(int(path.read_text()))
    return pids
