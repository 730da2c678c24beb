"""Every launch is its own run, under Open MPI and MPICH (real jobs, real collector).

* The same STACKLENS_JOB_ID launched twice: two runs of one job, each rank's bytes exact
  and separate (examples/ring_allreduce: rank R sends iterations x (bytes + R)).
* Two Slurm-like steps (SLURM_JOB_ID, SLURM_STEP_ID given to the ranks; SLURM_JOB_ID wins
  over STACKLENS_JOB_ID): one job named after SLURM_JOB_ID, runs labelled by the step.
* A batch-like shell script with the hooks exported that launches MPI twice between
  helpers: one job; its two MPI runs exact; one `processes` run holding the helpers that
  did file-system I/O (and the shell, which reads the script); no process, run or job for
  the helpers that did none; STACKLENS_DISABLE=processes leaves out the helpers entirely.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import query
from tests.hooks import jobs

MPIS = ["openmpi", "mpich"]


def ring(mpi: str, iterations: int, nbytes: int) -> list[str]:
    """examples/ring_allreduce with no pause: rank R sends iterations x (nbytes + R)."""
    return [jobs.example(mpi, "ring_allreduce"), str(iterations), str(nbytes), "0"]


def ring_sent(ranks: int, iterations: int, nbytes: int) -> dict[int, int]:
    """rank -> bytes it sends in ring(mpi, iterations, nbytes)."""
    return {r: iterations * (nbytes + r) for r in range(ranks)}


def sent_per_run(pg_url: str, job: str) -> dict[int, dict[int, int]]:
    """run ordinal -> {rank: bytes sent} of the job, from the stored p2p deltas."""
    rows = query(
        pg_url,
        "SELECT r.ordinal, d.world_rank, sum(d.bytes_sent) FROM p2p_deltas d "
        "JOIN runs r ON r.id = d.run_id JOIN jobs j ON j.id = d.job_id WHERE j.job_key = %s "
        "GROUP BY 1, 2",
        (job,),
    )
    out: dict[int, dict[int, int]] = {}
    for run, rank, total in rows:
        out.setdefault(run, {})[rank] = int(total)
    return out


def runs_of(pg_url: str, job: str) -> list[tuple]:
    """(ordinal, kind, label, world size, status) of the job's runs."""
    return query(
        pg_url,
        "SELECT ordinal, kind, label, r.world_size, r.status FROM runs r "
        "JOIN jobs j ON j.id = r.job_id WHERE j.job_key = %s ORDER BY ordinal",
        (job,),
    )


def job_keys(pg_url: str) -> list[str]:
    return [key for (key,) in query(pg_url, "SELECT job_key FROM jobs ORDER BY 1")]


@pytest.mark.parametrize("mpi", MPIS)
def test_one_job_id_launched_twice_is_two_exact_runs(collector, pg_url, mpi):
    job = f"twice-{uuid.uuid4().hex[:8]}"
    for iterations in (10, 30):
        done = jobs.run_job(collector, mpi, ring(mpi, iterations, 100_000), job, ranks=2)
        assert done.returncode == 0, done.stderr
        assert not jobs.library_warnings(done.stderr), done.stderr
    assert sent_per_run(pg_url, job) == {
        1: ring_sent(2, 10, 100_000),
        2: ring_sent(2, 30, 100_000),
    }
    assert runs_of(pg_url, job) == [
        (1, "mpi", None, 2, "finished"),
        (2, "mpi", None, 2, "finished"),
    ]
    assert query(pg_url, "SELECT status FROM jobs WHERE job_key = %s", (job,)) == [("finished",)]


def launch_with(mpi: str, ranks: int, argv: list[str], rank_env: dict[str, str]) -> list[str]:
    """The launch command, with `rank_env` given to the ranks only (the launchers must not
    see SLURM_* and go looking for srun)."""
    if mpi == "openmpi":
        extra = [arg for k, v in rank_env.items() for arg in ("-x", f"{k}={v}")]
        return ["mpirun", "-np", str(ranks), *extra, *argv]
    extra = [arg for k, v in rank_env.items() for arg in ("-genv", k, v)]
    return ["mpirun.mpich", "-np", str(ranks), "-genvall", *extra, *argv]


@pytest.mark.parametrize("mpi", MPIS)
def test_slurm_steps_are_runs_of_the_slurm_job(collector, pg_url, mpi):
    slurm_job = str(uuid.uuid4().int % 10**9)
    env = jobs.job_env(collector, mpi, job="not-this-one")
    for step, iterations in (("0", 5), ("1", 8)):
        cmd = launch_with(mpi, 2, ring(mpi, iterations, 50_000),
                          {"SLURM_JOB_ID": slurm_job, "SLURM_STEP_ID": step})  # fmt: skip
        done = jobs.finish(jobs.start(cmd, env), timeout=90)
        assert done.returncode == 0, done.stderr
    assert job_keys(pg_url) == [slurm_job]
    assert runs_of(pg_url, slurm_job) == [
        (1, "mpi", "0", 2, "finished"),
        (2, "mpi", "1", 2, "finished"),
    ]
    assert sent_per_run(pg_url, slurm_job) == {
        1: ring_sent(2, 5, 50_000),
        2: ring_sent(2, 8, 50_000),
    }


BATCH_SCRIPT = """\
set -e
cat "$DATA" > /dev/null
true
/bin/echo helper without file I/O > /dev/null
sleep 0
uname > /dev/null
$LAUNCH {first}
cat "$DATA" > /dev/null
$LAUNCH {second}
"""


def batch(collector, mpi: str, tmp_path: Path, job: str, **extra: str):
    """Runs BATCH_SCRIPT with sh under the hooks (exported, as `eval $(stacklens env)` does
    in a batch script); returns (result, script path, data path)."""
    data = tmp_path / "input.dat"
    data.write_bytes(bytes(range(256)) * 16)  # 4,096 bytes
    launch = " ".join(jobs.mpirun(mpi, 2, [])) + " " + jobs.example(mpi, "ring_allreduce")
    script = tmp_path / "job.sh"
    script.write_text(BATCH_SCRIPT.format(first="4 1000 0", second="6 2000 0"))
    env = {**jobs.job_env(collector, mpi, job), "DATA": str(data), "LAUNCH": launch, **extra}
    done = jobs.finish(jobs.start(["sh", str(script)], env), timeout=120)
    return done, script, data


@pytest.mark.parametrize("mpi", MPIS)
def test_batch_script_is_one_job_with_its_mpi_runs_and_one_run_of_helpers(
    collector, pg_url, mpi, tmp_path
):
    job = f"batch-{uuid.uuid4().hex[:8]}"
    done, script, data = batch(collector, mpi, tmp_path, job)
    assert done.returncode == 0, done.stderr
    assert not jobs.library_warnings(done.stderr), done.stderr

    assert job_keys(pg_url) == [job]  # no job per helper
    runs = runs_of(pg_url, job)
    # The shell's first frame (it read the script) comes first: the processes run is run 1.
    assert runs == [
        (1, "processes", None, 3, "finished"),
        (2, "mpi", None, 2, "finished"),
        (3, "mpi", None, 2, "finished"),
    ]
    assert sent_per_run(pg_url, job) == {2: ring_sent(2, 4, 1000), 3: ring_sent(2, 6, 2000)}
    # The processes: the shell and the two cats; true, echo, sleep and uname did no
    # tracked I/O and sent nothing.
    processes = query(
        pg_url,
        "SELECT p.process, p.pid > 0, p.proc_start_ns > 0 FROM run_processes p "
        "JOIN runs r ON r.id = p.run_id WHERE r.ordinal = 1 ORDER BY 1",
    )
    assert processes == [(0, True, True), (1, True, True), (2, True, True)]
    io = query(
        pg_url,
        "SELECT path, count(DISTINCT world_rank), sum(opens), sum(bytes_read) FROM io_deltas d "
        "JOIN runs r ON r.id = d.run_id WHERE r.ordinal = 1 AND layer = 1 GROUP BY 1 ORDER BY 1",
    )
    expected = [(str(data), 2, 2, 2 * 4096), (str(script), 1, 1, script.stat().st_size)]
    assert sorted((p, n, int(o), int(b)) for p, n, o, b in io) == sorted(expected)
    assert query(pg_url, "SELECT status FROM jobs") == [("finished",)]


def test_helpers_can_be_switched_off(collector, pg_url, tmp_path):
    job = f"off-{uuid.uuid4().hex[:8]}"
    done, _, _ = batch(collector, "openmpi", tmp_path, job, STACKLENS_DISABLE="processes")
    assert done.returncode == 0, done.stderr
    assert [r[1] for r in runs_of(pg_url, job)] == ["mpi", "mpi"]


def test_a_program_without_mpi_or_job_id_is_a_job_of_its_own(collector, pg_url, tmp_path):
    data = tmp_path / "x"
    data.write_bytes(b"12345")
    env = jobs.job_env(collector, "openmpi", job="")
    env.pop("STACKLENS_JOB_ID")
    proc = subprocess.Popen(["cat", str(data)], env=env, stdout=subprocess.PIPE)
    assert proc.communicate(timeout=60)[0] == b"12345" and proc.returncode == 0
    keys = job_keys(pg_url)
    assert len(keys) == 1 and re.fullmatch(rf".+-{proc.pid}-\d+", keys[0]), keys
    assert runs_of(pg_url, keys[0]) == [(1, "processes", None, 1, "finished")]
