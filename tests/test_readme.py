"""The README's commands, run verbatim as a new user would on this machine (root, 2 cores).

Every ```sh block of README.md is taken from the file and run as it is written, in a
fresh directory where `.venv` and `examples` lead to this source tree (so the relative
paths of the README hold) and with an environment that keeps the test apart from other
runs (free ports, its own state and spool directories: settings the README documents),
never with Open MPI's run-as-root or oversubscription variables set beforehand.
`test_readme_blocks_are_all_run` fails when a block is added that no test here runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from stacklens.db import running_embedded_url
from stacklens.paths import SOURCE_ROOT
from tests.conftest import free_port, leftover_processes

README = SOURCE_ROOT / "README.md"
TOKEN = "readme-token"
#: examples/ring_allreduce.c's defaults: 20 iterations of bytes + rank to the next rank.
ITERATIONS, BYTES = 20, 65536
#: The first command of each README block, in order, and the test that runs the block.
BLOCKS = {
    "make demo": "test_readme_make_demo, test_readme_make_test(_short)",
    ".venv/bin/stacklens up": "test_readme_up_run_and_batch_scripts",
    "cp examples/build/ring_allreduce my_app": "test_readme_up_run_and_batch_scripts",
    'eval "$(.venv/bin/stacklens env)"': "test_readme_up_run_and_batch_scripts",
    "cp examples/build-mpich/ring_allreduce my_mpich_app": "test_readme_up_run_and_batch_scripts",
    ".venv/bin/stacklens config": "test_readme_config",
}


def readme_blocks() -> list[str]:
    """The text of every ```sh block of the README, in order."""
    return re.findall(r"^```sh\n(.*?)^```$", README.read_text(), flags=re.S | re.M)


def first_command(block: str) -> str:
    """A block's first line without its comment."""
    return block.splitlines()[0].split("  #")[0].strip()


def block(first: str) -> str:
    """The README block whose first command is `first`."""
    (found,) = [b for b in readme_blocks() if first_command(b) == first]
    return found


def test_readme_blocks_are_all_run():
    assert [first_command(b) for b in readme_blocks()] == list(BLOCKS)


def user_env(home: Path, **settings: str) -> dict[str, str]:
    """A new user's environment: no STACKLENS_* or OMPI_* variables but `settings`, TMPDIR
    in `home` (the hooks' default spool directory is there, apart from other runs) and the
    collector's Unix socket there too (not that of a `stacklens up` running on this node)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKLENS_", "OMPI_"))}
    env.pop("LD_PRELOAD", None)
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {**env, "TMPDIR": str(tmp), "STACKLENS_COLLECTOR_SOCKET": str(home / "ingest.sock"),
            **settings}  # fmt: skip


def user_dir(tmp_path: Path) -> Path:
    """A fresh working directory whose `.venv` and `examples` are this source tree's."""
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(SOURCE_ROOT / ".venv")
    (work / "examples").symlink_to(SOURCE_ROOT / "examples")
    return work


def run_block(text: str, cwd: Path, env: dict[str, str], timeout: float = 180):
    """Run a README block with bash (stopping at the first failing command)."""
    return subprocess.run(
        ["bash", "-e", "-c", text], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def ring_cells(ranks: int) -> list[dict[str, int]]:
    """The rank x rank matrix of examples/ring_allreduce with its default arguments."""
    return [
        {"src": r, "dst": (r + 1) % ranks, "bytes": ITERATIONS * (BYTES + r),
         "messages": ITERATIONS}
        for r in range(ranks)
    ]  # fmt: skip


def finished_matrix(base: str, job: str, timeout: float = 60) -> list[dict[str, int]]:
    """The matrix of `job`'s one MPI run once it has finished (every rank's final frame is
    in). In a batch script the launcher itself runs under the exported hooks: its file I/O
    makes a `processes` run beside it."""
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(f"{base}/api/jobs/{job}/runs", timeout=5)
        runs = answer.json()["runs"] if answer.status_code == 200 else []
        mpi = [(r["run"], r["status"]) for r in runs if r["kind"] == "mpi"]
        if len(mpi) == 1 and mpi[0][1] == "finished":
            break
        assert time.monotonic() < deadline, f"{job}: {answer.text}"
        time.sleep(0.3)
    matrix = httpx.get(f"{base}/api/jobs/{job}/matrix?run={mpi[0][0]}", timeout=5).json()
    return sorted(matrix["cells"], key=lambda c: (c["src"], c["dst"]))


@pytest.fixture
def readme_up(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, subprocess.Popen]]:
    """The README's `up` block, running as written on free ports with its own state."""
    port = free_port()
    env = user_env(
        tmp_path,
        STACKLENS_STATE_DIR=str(tmp_path / "state"),
        STACKLENS_HTTP_PORT=str(port),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INGEST_TOKEN=TOKEN,
    )
    log = tmp_path / "up.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-e", "-c", block(".venv/bin/stacklens up")], cwd=user_dir(tmp_path),
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while f"dashboard {base}/" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield env, base, proc
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        proc.wait(30)


def test_readme_up_run_and_batch_scripts(readme_up, tmp_path):
    env, base, up = readme_up
    work = tmp_path / "work"
    # stacklens run -- mpirun -np 4 ./my_app: as root, 4 ranks on 2 cores.
    result = run_block(
        block("cp examples/build/ring_allreduce my_app"), work,
        {**env, "STACKLENS_JOB_ID": "readme-run"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        "stacklens run: lets Open MPI run as root and start more ranks than the 2 cores of "
        "this node (OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
        "OMPI_MCA_rmaps_base_oversubscribe=1; set them yourself to choose)"
    )
    assert finished_matrix(base, "readme-run") == ring_cells(4)
    # A batch script with Open MPI: mpirun with no -np runs one rank per core (2 here);
    # the ranks get the token (else the collector refuses them) and the job id.
    result = run_block(block('eval "$(.venv/bin/stacklens env)"'), work,
                       {**env, "STACKLENS_JOB_ID": "readme-openmpi"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert finished_matrix(base, "readme-openmpi") == ring_cells(2)
    # The same with MPICH's launcher and -genvlist.
    result = run_block(
        block("cp examples/build-mpich/ring_allreduce my_mpich_app"), work,
        {**env, "STACKLENS_JOB_ID": "readme-mpich"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert finished_matrix(base, "readme-mpich") == ring_cells(4)
    assert up.poll() is None


def test_readme_config(tmp_path):
    env = user_env(tmp_path, STACKLENS_HTTP_PORT="8123")
    result = run_block(block(".venv/bin/stacklens config"), user_dir(tmp_path), env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.split(r"  +", lines[1]) == ["variable", "value", "source", "read by"]
    assert ["STACKLENS_HTTP_PORT", "8123", "env", "stacklens"] in [
        re.split(r"  +", line) for line in lines
    ]


def test_readme_make_demo(tmp_path):
    """`make demo` as written: it comes up, prints the URL, stages its incident on a
    simulated fabric (the detectors store it), and Ctrl-C stops everything it started."""
    port = free_port()
    state = tmp_path / "state"
    env = user_env(
        tmp_path,
        STACKLENS_STATE_DIR=str(state),
        STACKLENS_HTTP_PORT=str(port),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
    )
    (command,) = [line for line in block("make demo").splitlines() if line.startswith("make demo")]
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "-c", command.split("#")[0]], cwd=SOURCE_ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while demo_incidents(state) == 0:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in its terminal
        proc.wait(60)
    text = log.read_text()
    assert f"stacklens is up: dashboard {base}/  API docs {base}/docs" in text
    assert "fabric-sim: 32 hosts" in text
    assert "stacklens up: fabric discovery: started" in text
    assert re.search(r"^stacklens up: fabric discovery: mad: \d+ nodes found, swept every 1 s$",
                     text, flags=re.M), text  # fmt: skip
    assert "demo: incident: congesting spine" in text
    assert leftover_processes(str(state)) == []


def demo_incidents(state: Path) -> int:
    """Congestion incidents in the demo's embedded database (0 before it is up)."""
    url = running_embedded_url(state / "pg")
    if url is None:
        return 0
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute(
                "SELECT count(*) FROM incidents WHERE kind = 'congestion'"
            ).fetchone()[0]
    except psycopg.Error:  # not started or not migrated yet
        return 0


def make_test(pytest_args: str | None) -> subprocess.CompletedProcess:
    """`make test` in the source tree (with PYTEST_ARGS when given)."""
    extra = [] if pytest_args is None else [f"PYTEST_ARGS={pytest_args}"]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", "test", *extra], cwd=SOURCE_ROOT, env=env,
                          capture_output=True, text=True, timeout=3600)  # fmt: skip


def test_readme_make_test_short():
    """`make test` with one small test file: the packages, venv, builds and lint run as
    written (the whole suite is the slow form below)."""
    result = make_test("-p no:cacheprovider tests/test_constants.py")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    tests = len(re.findall(r"^def test_", (SOURCE_ROOT / "tests/test_constants.py").read_text(),
                           flags=re.M))  # fmt: skip
    assert re.search(rf"^=+ {tests} passed[ ,]", result.stdout, flags=re.M), result.stdout[-2000:]


@pytest.mark.slow
def test_readme_make_test():
    """`make test` as written: lint and every test that is not slow."""
    result = make_test(None)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
