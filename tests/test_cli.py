"""The `stacklens` command as a person meets it: --version, help with a purpose and examples
for every subcommand, `status` (running or not), `up`'s progress, and one clear line for a
port in use, a missing MPI or a missing simulator."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import stacklens
from collector.fabric.service import FabricSampler
from collector.fabric.sysfs import SysfsSource
from stacklens.db import head_revision
from stacklens_cli import build_parser
from tests.conftest import free_port, running_up, stacklens_run
from tests.hooks import jobs

SYSFS_FIXTURE = Path(__file__).parent / "fabric" / "fixtures" / "sysfs"


def stacklens_cli(*args: str, env: dict[str, str], timeout: float = 120):
    """`stacklens ARGS` in a child process; the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "stacklens_cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def clean_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """No STACKLENS_* settings but `settings`, a state directory and TMPDIR of the test's
    own, and ports where nothing listens."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_STATE_DIR=str(tmp_path / "state"),
        STACKLENS_HTTP_PORT=str(free_port()),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        TMPDIR=str(tmp_path),
    )
    return {**env, **settings}


def test_version():
    result = stacklens_cli("--version", env=dict(os.environ))
    assert (result.returncode, result.stdout) == (0, f"stacklens {stacklens.__version__}\n")


def subcommands() -> dict[str, str]:
    """Each subcommand's full --help text."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "cmd"]
    return {name: p.format_help() for name, p in sub.choices.items()}


def test_every_subcommand_has_a_purpose_and_examples():
    helps = subcommands()
    assert set(helps) == {"up", "collector", "run", "env", "demo", "migrate", "replay",
                          "fabric-sim", "config", "status", "token", "report"}  # fmt: skip
    for name, text in helps.items():
        description = text.split("\n\n")[1]  # after the usage lines
        assert re.fullmatch(r"[A-Z][^\n]*(\n[^\n]+)*\.", description), (name, description)
        examples = text.split("examples:\n", 1)[1].splitlines()
        assert examples and all(f"stacklens {name}" in line for line in examples), name
    result = stacklens_cli("status", "--help", env=dict(os.environ))
    assert result.returncode == 0 and result.stdout == helps["status"]


def test_status_when_nothing_runs(tmp_path):
    env = clean_env(tmp_path)
    result = stacklens_cli("status", env=env)
    assert result.returncode == 3, result.stderr
    http, collector = env["STACKLENS_HTTP_PORT"], env["STACKLENS_COLLECTOR"]
    assert result.stdout.splitlines() == [
        f"stacklens {stacklens.__version__} on {socket.gethostname()}",
        f"database    embedded PostgreSQL in {tmp_path}/state/pg: not running "
        "(`stacklens up` starts it)",
        f"collector   {collector}: nothing listens (`stacklens up` or `collector` starts one)",
        f"API         http://127.0.0.1:{http}/: nothing answers (`stacklens up` serves it)",
        "modes       ingest proven, auth none (this node's settings); users sending unknown",
        "fabric-sim  not running",
        "fabric      unknown (the database is not reachable)",
        "frames      unknown (the database is not reachable)",
        f"spool       {tmp_path}/stacklens-spool-{os.geteuid()}: none (nothing waits)",
        "RDMA        no RDMA device (pyverbs: Failed to get devices list), none in "
        "/sys/class/infiniband: the local-HCA sampler has nothing to read here",
    ]
    assert result.stderr == ""


def test_up_prints_its_progress_and_status_sees_it_all(pg_url, tmp_path, examples_built):
    spool = tmp_path / "spool"
    (spool / "rejected").mkdir(parents=True)
    for name, size in (("j.1.0.0.1.slf", 300), ("j.1.1.0.2.slf", 200), ("rejected/x.slf", 7)):
        (spool / name).write_bytes(b"\0" * size)
    # Another user's default spool on this node (status runs as root: it says so too).
    other = tmp_path / "stacklens-spool-65534"
    other.mkdir()
    (other / "k.1.0.0.9.slf").write_bytes(b"\0" * 64)
    os.chown(other, 65534, 65534)
    with running_up(pg_url, tmp_path / "state", STACKLENS_SPOOL_DIR=str(spool)) as up:
        job = f"status-{uuid.uuid4().hex[:8]}"
        env = {**up, "STACKLENS_JOB_ID": job, "STACKLENS_SPOOL_DIR": "off"}
        env = {k: v for k, v in env.items() if k not in ("base", "pid", "log")}
        result = stacklens_run(["mpirun", "-np", "2", jobs.example("openmpi", "p2p_pattern")],
                               {**env, "STACKLENS_INTERVAL_MS": "100"})  # fmt: skip
        assert result.returncode == 0, result.stderr
        sampler = FabricSampler(pg_url, SysfsSource(SYSFS_FIXTURE), 1.0, 60.0)
        sampler.step()  # one sweep of a node's HCA ports (the fixture tree: one complete)
        sampler.store.close()
        status = stacklens_cli(
            "status", env={**env, "STACKLENS_SPOOL_DIR": str(spool), "TMPDIR": str(tmp_path)}
        )
        log = Path(up["log"]).read_text()
    assert status.returncode == 0, status.stdout + status.stderr
    lines = status.stdout.splitlines()
    assert lines[1:5] == [
        f"database    external PostgreSQL: reachable, schema {head_revision()}",
        f"collector   {up['STACKLENS_COLLECTOR']}: listening",
        f"API         {up['base']}/ answers (stacklens {stacklens.__version__})",
        "modes       ingest trusted, auth none (the server's); 1 user sent runs in the last 24 h",
    ]
    assert re.fullmatch(r"fabric      0 nodes, 1 ports; last sweep \d+ s ago", lines[6]), lines
    assert re.fullmatch(rf"frames      last received \d+ s ago \(job {job}\); 1 jobs", lines[7])
    assert lines[8:10] == [
        f"spool       {spool}: 2 frames waiting (500 bytes), 1 rejected (`stacklens replay` "
        "delivers them)",
        f"spool       {other}: 1 frames waiting (64 bytes), 0 rejected (`stacklens replay` "
        "delivers them)",
    ]
    port = up["STACKLENS_COLLECTOR"].rpartition(":")[2]
    steps = [line for line in log.splitlines() if line.startswith("stacklens up: ")]
    assert steps[0] == "stacklens up: database: external PostgreSQL"
    assert re.fullmatch(r"stacklens up: database: ready \(\d+\.\d s\)", steps[1])
    assert re.fullmatch(rf"stacklens up: migrations: schema at {head_revision()} \(\d+\.\d s\)",
                        steps[2])  # fmt: skip
    assert steps[3:] == [
        "stacklens up: fabric discovery: started (it samples a `stacklens fabric-sim` or local "
        "HCA it finds, now or later)",
        f"stacklens up: collector: listening on 127.0.0.1:{port}",
        "stacklens up: modes: ingest trusted, auth none (stacklens status, the dashboard's "
        "footer and /metrics say them too)",
        "stacklens up: incidents: detecting on every sweep",
        f"stacklens up: API and dashboard: serving on {up['base']}",
    ]
    assert f"stacklens is up: dashboard {up['base']}/" in log


@pytest.mark.parametrize(
    ("command", "which"),
    [("up", "STACKLENS_HTTP_PORT"), ("up", "STACKLENS_COLLECTOR"),
     ("collector", "STACKLENS_COLLECTOR")],
)  # fmt: skip
def test_a_port_in_use_is_one_line(tmp_path, command, which):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        value = str(port) if which == "STACKLENS_HTTP_PORT" else f"127.0.0.1:{port}"
        result = stacklens_cli(command, env=clean_env(tmp_path, **{which: value}))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"stacklens: port {port} on 127.0.0.1 ({which}) is already in use (another "
        f"`stacklens up`?): stop what uses it, or set {which} to a free port\n"
    )


def test_a_missing_mpi_is_one_line(tmp_path):
    env = clean_env(tmp_path, PATH=str(tmp_path / "empty"))
    mpi = ("is not installed: install Open MPI or MPICH (`make setup` does; or apt-get install "
           "openmpi-bin mpich), or put their bin directory on PATH\n")  # fmt: skip
    result = stacklens_cli("run", "--", "mpirun", "-np", "2", "./my_app", env=env)
    assert (result.returncode, result.stdout) == (127, "")
    assert result.stderr == f"stacklens run: mpirun {mpi}"
    result = stacklens_cli("demo", "--no-fabric", "--for", "5", env=env)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"stacklens: mpirun {mpi}")
    # A program that is not there is just that.
    result = stacklens_cli("run", "--", "./no_such_app", env=env)
    assert (result.returncode, result.stderr) == (127, "stacklens run: command not found: "
                                                       "./no_such_app\n")  # fmt: skip


def test_a_missing_simulator_is_one_line(tmp_path):
    env = clean_env(tmp_path, PATH=str(tmp_path / "empty"))
    result = stacklens_cli("fabric-sim", "--for", "5", env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "stacklens: fabric-sim: ibsim and opensm not installed: install the InfiniBand "
        "simulator (`make setup` does; or apt-get install ibsim-utils opensm libumad2sim0)\n"
    )
    result = stacklens_cli("fabric-sim", "--console", 'Unlink "leaf02"[9]', env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "stacklens: fabric-sim: no simulated fabric is running (start one with "
        "`stacklens fabric-sim --hosts 32`)\n"
    )
