"""The command line tells you what it did: `stacklens run` says the job id and page at the
start and one line of what was recorded at the end, forwards SIGTERM and SIGINT to its
command, every command warns once of a STACKLENS_* variable that is no setting, and
`eval "$(stacklens env)"` leaves the shell without the preload (only the launched ranks
get it). Real MPI jobs, a real collector and API, the real database."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from server.app import create_app
from stacklens.db import make_engine
from stacklens.paths import LIBRARIES
from stacklens_cli.attach import human_bytes
from tests.conftest import free_port, query, serving, stacklens_run
from tests.hooks import jobs
from tests.hooks.patterns import p2p_pattern

#: Ranks of the jobs here (this node has 2 cores).
RANKS = 2
#: The line `stacklens run` starts with, as root (the tests run as root) under Open MPI.
AS_ROOT = ("stacklens run: lets Open MPI run as root (OMPI_ALLOW_RUN_AS_ROOT=1 "
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; set them yourself to choose)")  # fmt: skip


def run_lines(stderr: str) -> list[str]:
    """The lines `stacklens run` itself wrote (not the hooks', not the program's)."""
    return [line for line in stderr.splitlines() if line.startswith("stacklens run: ")]


def user_env(collector_endpoint: str, **extra: str) -> dict[str, str]:
    """A user's environment with the collector set and no job id (no scheduler): as root,
    without Open MPI's allowances (`stacklens run` says it sets them)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STACKLENS_", "OMPI_", "SLURM_", "PBS_"))}  # fmt: skip
    env.pop("LD_PRELOAD", None)
    env.update(STACKLENS_COLLECTOR=collector_endpoint, STACKLENS_INGEST_TOKEN="secret",
               STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="100")  # fmt: skip
    return {**env, **extra}


def recorded(pg_url: str, job: str) -> tuple[int, int]:
    """(ranks and processes stored for the job, bytes its ranks sent)."""
    ((ranks,),) = query(pg_url, "SELECT count(*) FROM ranks JOIN jobs ON jobs.id = job_id "
                                "WHERE job_key = %s", (job,))  # fmt: skip
    sent, _ = jobs.p2p(pg_url, job)
    return ranks, sum(b for b, _ in sent.values())


@pytest.fixture
def api_port(pg_url):
    """The API (no dashboard) over the test database on a free port."""
    engine = make_engine(pg_url)
    app = create_app(engine)
    with serving(app) as port:
        yield port
    engine.dispose()


def test_run_says_the_job_its_page_and_what_was_recorded(collector, pg_url, api_port,
                                                         examples_built):  # fmt: skip
    env = user_env(collector.endpoint, STACKLENS_HTTP_PORT=str(api_port),
                   STACKLENS_SPOOL_DIR="off")  # fmt: skip
    result = stacklens_run(["mpirun", "-np", str(RANKS), jobs.example("openmpi", "p2p_pattern")],
                           env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = run_lines(result.stderr)
    assert lines[0] == AS_ROOT
    made = re.fullmatch(r"stacklens run: job (\S+): (\S+)", lines[1])
    assert made, lines
    job, page = made.groups()
    assert re.fullmatch(rf"{re.escape(socket.gethostname())}-\d+-\d+", job)
    assert page == f"http://127.0.0.1:{api_port}/jobs/{job}"
    ranks, sent = recorded(pg_url, job)
    assert sent == sum(b for b, _ in p2p_pattern(RANKS).values())
    assert ranks == RANKS
    assert lines[2:] == [f"stacklens run: job {job} ended (exit 0); {ranks} ranks, "
                         f"{human_bytes(sent)} sent, status finished"]  # fmt: skip
    assert jobs.job_end(pg_url, job) == [("finished", RANKS, True, 0)]
    # its launch record joined the one run its ranks made
    runs = httpx.get(f"http://127.0.0.1:{api_port}/api/jobs/{job}").json()["runs"]
    assert [(r["ranks_expected"], r["exit_code"], r["exit_signal"], r["forwarded_signal"])
            for r in runs] == [(RANKS, 0, None, None)]  # fmt: skip


def test_run_of_a_script_counts_its_shell_as_a_process_not_a_rank(
    collector, pg_url, api_port, tmp_path, examples_built
):
    """`stacklens run -- bash script.sh` whose script launches `mpirun -np 2`: the shell
    reports as the job's processes run, the ranks as its MPI run; the summary says 2 ranks
    and 1 process, never 3 ranks."""
    job = f"script-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "script.sh"
    program = jobs.example("openmpi", "p2p_pattern")
    script.write_text(f"mpirun --allow-run-as-root -np {RANKS} {program}\n")
    env = user_env(collector.endpoint, STACKLENS_HTTP_PORT=str(api_port), STACKLENS_JOB_ID=job,
                   STACKLENS_SPOOL_DIR="off")  # fmt: skip
    result = stacklens_run(["bash", str(script)], env)
    assert result.returncode == 0, result.stderr
    runs = httpx.get(f"http://127.0.0.1:{api_port}/api/jobs/{job}").json()["runs"]
    assert sorted((r["kind"], r["ranks_seen"]) for r in runs) == [("mpi", RANKS),
                                                                   ("processes", 1)]  # fmt: skip
    _, sent = recorded(pg_url, job)
    assert sent == sum(b for b, _ in p2p_pattern(RANKS).values())
    assert run_lines(result.stderr)[-1] == (
        f"stacklens run: job {job} ended (exit 0); {RANKS} ranks, 1 process, "
        f"{human_bytes(sent)} sent, status finished"
    )


def test_run_says_where_frames_wait_when_nothing_answers(tmp_path, examples_built):
    spool = tmp_path / "spool"
    collector = f"127.0.0.1:{free_port()}"
    http = free_port()
    env = user_env(collector, STACKLENS_HTTP_PORT=str(http), STACKLENS_SPOOL_DIR=str(spool),
                   STACKLENS_FINALIZE_TIMEOUT_MS="300", STACKLENS_JOB_ID="down-1")  # fmt: skip
    result = stacklens_run(["mpirun", "-np", str(RANKS), jobs.example("openmpi", "p2p_pattern")],
                           env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    waiting = len(list(spool.glob("*.slf")))
    assert waiting >= RANKS  # at least every rank's final frame
    assert run_lines(result.stderr) == [
        AS_ROOT,
        f"stacklens run: job down-1: http://127.0.0.1:{http}/jobs/down-1",
        f"stacklens run: delivered 0 spooled frames to {collector}; 0 rejected, {waiting} left "
        f"in {spool}",
        f"stacklens run: job down-1 ended (exit 0); the server at http://127.0.0.1:{http} does "
        f"not answer: nothing to say of what it recorded; {waiting} frames wait in {spool} (the "
        f"collector at {collector} did not take them; `stacklens replay` delivers them)",
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_run_reaches_the_job_which_is_recorded_killed(
    collector, pg_url, api_port, tmp_path, signum
):
    """SIGTERM or SIGINT to `stacklens run`'s own pid (not the group: a batch system or a
    user's `kill`) is forwarded to the launcher, which ends the ranks; the ranks' final
    frames say killed; `stacklens run` waits for all that and says so."""
    job = f"sig-{signum.name}-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_HTTP_PORT=str(api_port), STACKLENS_JOB_ID=job,
                   STACKLENS_SPOOL_DIR=str(tmp_path / "spool"),
                   STACKLENS_INTERVAL_MS="3600000")  # fmt: skip
    command = ["mpirun", "-np", "2", jobs.program("openmpi", "sigterm"), str(tmp_path)]
    proc = jobs.start([sys.executable, "-m", "stacklens_cli", "run", "--", *command], env)
    try:
        pids = jobs.rank_pids(proc, tmp_path, 2)
        os.kill(proc.pid, signum)
        result = jobs.finish(proc, timeout=60)
        jobs.wait_dead(pids, timeout=10)
    finally:
        jobs.kill_group(proc)
    assert jobs.job_end(pg_url, job)[0][0] == "killed", result.stderr
    code = result.returncode
    assert code != 0
    ranks, sent = recorded(pg_url, job)
    assert sent == 3885 * 3  # 5 messages of 777 and 5 of 1554 bytes: nothing lost
    assert run_lines(result.stderr)[-1] == (
        f"stacklens run: job {job} ended (exit {code} after {signum.name} (forwarded to the "
        f"command)); {ranks} ranks, {human_bytes(sent)} sent, status killed"
    )
    runs = httpx.get(f"http://127.0.0.1:{api_port}/api/jobs/{job}").json()["runs"]
    assert [(r["status"], r["ranks_expected"], r["forwarded_signal"]) for r in runs] == [
        ("killed", 2, signum.name)
    ]


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`stacklens ARGS` in a child process."""
    return subprocess.run([sys.executable, "-m", "stacklens_cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_every_command_warns_once_of_an_unknown_setting(tmp_path):
    env = user_env(f"127.0.0.1:{free_port()}", STACKLENS_INTERVL_MS="50",
                   STACKLENS_STATE_DIR=str(tmp_path / "state"), STACKLENS_SPOOL_DIR="off",
                   STACKLENS_HTTP_PORT=str(free_port()), TMPDIR=str(tmp_path))  # fmt: skip
    warning = ("stacklens: not a setting, ignored: STACKLENS_INTERVL_MS (env; did you mean "
               "STACKLENS_INTERVAL_MS?)")  # fmt: skip
    for args in (["status"], ["env"], ["run", "--", "true"], ["replay"]):
        result = cli(*args, env=env)
        warned = [line for line in result.stderr.splitlines() if "not a setting" in line]
        assert warned == [warning], (args, result.stderr)
    # `config` lists it among the settings instead, once
    result = cli("config", env=env)
    assert result.stderr == ""
    assert result.stdout.splitlines()[-1] == warning.removeprefix("stacklens: ")


def test_env_in_an_interactive_shell_preloads_only_the_ranks(collector, pg_url, examples_built):
    """`eval "$(stacklens env)"` in an interactive shell: the shell and the commands it runs
    get no LD_PRELOAD (no job of their own), the ranks launched with $stacklens_forward do."""
    job = f"env-{uuid.uuid4().hex[:8]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_SPOOL_DIR="off")
    program = jobs.example("openmpi", "p2p_pattern")
    script = (f'eval "$({sys.executable} -m stacklens_cli env)"\n'
              'echo "preload in the shell: ${LD_PRELOAD:-none}"\n'
              'sh -c \'echo "preload in a command: ${LD_PRELOAD:-none}"\'\n'
              f"mpirun $stacklens_forward -np {RANKS} {program}\n")  # fmt: skip
    result = subprocess.run(["bash", "-i", "-c", script], env=env, capture_output=True,
                            text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["preload in the shell: none", "preload in a command: none"]
    total = sum(b for b, _ in p2p_pattern(RANKS).values())
    assert lines[2:] == [f"p2p_pattern: {RANKS} ranks, {total} bytes sent, {total} received, "
                         f"{total} expected: ok"]  # fmt: skip
    # the ranks only: no process of the shell, not the launcher
    assert recorded(pg_url, job) == (RANKS, total)
    assert jobs.job_end(pg_url, job) == [("finished", RANKS, True, 0)]


def test_a_mismatch_under_run_advises_its_mpi_option(collector, pg_url, examples_built):
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=f"mm-{uuid.uuid4().hex[:6]}",
                   STACKLENS_SPOOL_DIR="off")  # fmt: skip
    command = jobs.mpirun("mpich", RANKS, [jobs.example("mpich", "p2p_pattern")])
    result = cli("run", "--mpi", "openmpi", "--", *command, env=env)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == [
        f"stacklens: {LIBRARIES['openmpi'].resolve()} is built for Open MPI but this program "
        "uses MPICH: the job runs unprofiled (preload the library built for MPICH; "
        "`stacklens run --mpi mpich` attaches it)"
    ]


def test_the_simulator_waits_quietly_for_a_database_not_migrated_yet(pg_server, caplog):
    """`stacklens demo` starts the simulated fabric before `up` migrates a new database:
    the job feed finds no job tables and says nothing above debug (it said "relation
    p2p_deltas does not exist")."""
    from stacklens.settings import Settings
    from stacklens_cli.fabric_sim import _JobFeed

    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        fresh = urlsplit(pg_server)._replace(path=f"/{name}").geturl()
        feed = _JobFeed(Settings(database_url=fresh), ["h1"], [])
        with caplog.at_level("DEBUG", logger="stacklens_cli.fabric_sim"):
            assert feed.poll() == [] and feed.poll() == []
        feed.close()
        assert [r.levelname for r in caplog.records] == ["DEBUG", "DEBUG"]
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_collector_says_stopped(tmp_path, pg_url):
    env = user_env(f"127.0.0.1:{free_port()}", STACKLENS_DATABASE_URL=pg_url,
                   STACKLENS_COLLECTOR_SOCKET="off")  # fmt: skip
    log = tmp_path / "collector.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "stacklens_cli", "collector"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "stacklens collector on" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    assert log.read_text().splitlines()[-1] == "stacklens collector: stopped"
