"""Attaching the right hook library with no settings: `stacklens run` and `stacklens env`
choose the build for the command's MPI, and a library preloaded into a program of the
other MPI leaves the job running, unprofiled, with one warning line."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from stacklens.paths import LIBRARIES
from stacklens_cli import mpikind
from tests.conftest import query, stacklens_run
from tests.hooks import jobs
from tests.hooks.patterns import p2p_pattern

HERE = Path(__file__).resolve().parent
RANKS = 3


def script(directory: Path, name: str, body: str) -> Path:
    """An executable shell script directory/name."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_command_mpi_from_launcher_program_or_mpi4py(tmp_path):
    bin_dir = tmp_path / "bin"
    # A launcher of a site's own (not named like any known one): its --version tells.
    script(bin_dir, "mpiexec", 'exec mpiexec.hydra "$@"')
    # A scheduler's launcher (srun): the program it runs tells.
    script(bin_dir, "srun", 'while [ "${1#-}" != "$1" ]; do shift 2; done; exec "$@"')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("MPI4PY_MPIABI", None)
    ompi, mpich = jobs.example("openmpi", "p2p_pattern"), jobs.example("mpich", "p2p_pattern")
    cases = {
        ("mpirun", "-np", "2", "prog"): "openmpi",  # Debian's alternative: Open MPI
        ("mpirun.openmpi", "prog"): "openmpi",
        ("mpirun.mpich", "-np", "2", "prog"): "mpich",
        ("mpiexec.hydra", "prog"): "mpich",
        ("mpiexec", "-n", "2", "prog"): "mpich",  # the script above, by its --version
        ("srun", "-n", "2", mpich): "mpich",
        ("srun", "-n", "2", ompi): "openmpi",
        (mpich,): "mpich",
        (ompi,): "openmpi",
        (sys.executable, "app.py"): "openmpi",  # nothing tells: the mpirun on PATH
    }
    assert {cmd: mpikind.command_mpi(cmd, env) for cmd in cases} == cases
    for abi, mpi in (("mpich", "mpich"), ("openmpi", "openmpi"), ("MPICH", "mpich")):
        assert mpikind.command_mpi([sys.executable, "app.py"], {**env, "MPI4PY_MPIABI": abi}) == mpi
    # An MPI launcher decides over MPI4PY_MPIABI: the program runs under that MPI.
    launched = ["mpirun.mpich", sys.executable, "app.py"]
    assert mpikind.command_mpi(launched, {**env, "MPI4PY_MPIABI": "openmpi"}) == "mpich"


@pytest.mark.parametrize("launcher", ["mpirun.mpich", "mpiexec.hydra", "srun"])
def test_stacklens_run_with_mpich_needs_no_settings(collector, pg_url, tmp_path, launcher):
    job = f"run-mpich-{uuid.uuid4().hex[:8]}"
    bin_dir = tmp_path / "bin"
    # srun as a scheduler runs it: options, then the program (here on MPICH's launcher).
    script(bin_dir, "srun", f'shift 2; exec mpirun.mpich -np {RANKS} "$@"')
    env = jobs.user_env(collector, job, PATH=f"{bin_dir}:{os.environ['PATH']}")
    command = [launcher, "-n", str(RANKS), jobs.example("mpich", "p2p_pattern")]
    result = stacklens_run(command, env)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    sent, recv = jobs.p2p(pg_url, job)
    assert sent == p2p_pattern(RANKS)
    assert {(s, d): v for (d, s), v in recv.items()} == p2p_pattern(RANKS)
    assert jobs.job_end(pg_url, job) == [("finished", RANKS, True, 0)]


@pytest.mark.parametrize(
    ("program_mpi", "library_mpi"), [("mpich", "openmpi"), ("openmpi", "mpich")]
)
def test_library_of_the_other_mpi_leaves_the_job_unprofiled(
    collector, pg_url, program_mpi, library_mpi
):
    job = f"mismatch-{program_mpi}-{uuid.uuid4().hex[:8]}"
    argv = [jobs.example(program_mpi, "p2p_pattern")]
    result = jobs.run_job(
        collector, program_mpi, argv, job, RANKS, LD_PRELOAD=str(LIBRARIES[library_mpi])
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"p2p_pattern: {RANKS} ranks, 22016 bytes sent, 22016 received, 22016 expected: ok"
    ]
    names = {"openmpi": "Open MPI", "mpich": "MPICH"}
    ours, theirs = names[library_mpi], names[program_mpi]
    assert jobs.library_warnings(result.stderr) == [
        f"stacklens: {LIBRARIES[library_mpi].resolve()} is built for {ours} but this program "
        f"uses {theirs}: the job runs unprofiled (preload the library built for {theirs}; "
        "`stacklens run` chooses it)"
    ]
    assert query(pg_url, "SELECT count(*) FROM jobs WHERE job_key = %s", (job,)) == [(0,)]


def test_library_of_the_other_mpi_not_preloaded_by_variable_stays_off(collector, pg_url):
    """Loaded by ld.so's --preload, not LD_PRELOAD, the library cannot take itself out by
    executing the program again: its wrappers stay off from MPI_Init on (an Open MPI build
    in an MPICH program; before, MPICH aborted every rank with "Invalid communicator")."""
    job = f"mismatch-ldso-{uuid.uuid4().hex[:8]}"
    env = jobs.user_env(collector, job)
    argv = ["/lib64/ld-linux-x86-64.so.2", "--preload", str(LIBRARIES["openmpi"])]
    argv.append(jobs.example("mpich", "p2p_pattern"))
    result = jobs.finish(jobs.start(jobs.mpirun("mpich", RANKS, argv), env), timeout=90)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("22016 expected: ok\n")
    assert len(jobs.library_warnings(result.stderr)) == 1
    assert query(pg_url, "SELECT count(*) FROM jobs WHERE job_key = %s", (job,)) == [(0,)]


def env_lines(env: dict[str, str], *args: str) -> list[str]:
    """The lines `stacklens env ARGS` prints."""
    return subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "env", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()


def test_env_chooses_by_the_mpirun_on_path_or_the_option(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKLENS_", "OMPI_"))}
    env.pop("LD_PRELOAD", None)
    env.update(STACKLENS_STATE_DIR=str(tmp_path), STACKLENS_JOB_ID="j1", TMPDIR=str(tmp_path))
    env["STACKLENS_INGEST_TOKEN"] = "tok$en;"  # quoted for the shell
    env["STACKLENS_MAX_KEYS"] = "64"  # a hook setting that is set is passed on too
    spool = tmp_path / f"stacklens-spool-{os.geteuid()}"  # the per-user default
    tail = [
        "export STACKLENS_COLLECTOR=127.0.0.1:7451",
        "export STACKLENS_INTERVAL_MS=1000",
        f"export STACKLENS_SPOOL_DIR={spool}",
        "export STACKLENS_INGEST_TOKEN='tok$en;'",
        "export STACKLENS_JOB_ID=j1",
        "export STACKLENS_MAX_KEYS=64",
    ]
    names = "STACKLENS_COLLECTOR STACKLENS_INTERVAL_MS STACKLENS_SPOOL_DIR "
    names += "STACKLENS_INGEST_TOKEN STACKLENS_JOB_ID STACKLENS_MAX_KEYS"
    x_options = f"-x LD_PRELOAD={LIBRARIES['openmpi']} "
    x_options += " ".join(f"-x {n}" for n in names.split())
    ranks_only = "preload the hooks in the ranks only (this shell gets no LD_PRELOAD; another "
    ranks_only += "launcher: LD_PRELOAD=$stacklens_preload)"
    openmpi = [
        *tail,
        # as root (the tests run as root), Open MPI's mpirun needs these
        "export OMPI_ALLOW_RUN_AS_ROOT=1",
        "export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
        f"stacklens_preload={LIBRARIES['openmpi']}",
        f"stacklens_forward='{x_options}'",
        "# stacklens: lets Open MPI run as root (OMPI_ALLOW_RUN_AS_ROOT=1 "
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; set them yourself to choose)",
        f"# openmpi: the launcher options {x_options} {ranks_only}",
    ]
    genvlist = f"-genv LD_PRELOAD {LIBRARIES['mpich']} -genvlist " + ",".join(names.split())
    mpich = [
        *tail,
        f"stacklens_preload={LIBRARIES['mpich']}",
        f"stacklens_forward='{genvlist}'",
        f"# mpich: the launcher options {genvlist} {ranks_only}",
    ]
    assert env_lines(env) == openmpi  # Debian's mpirun is Open MPI's
    assert env_lines(env, "--mpi", "mpich") == mpich
    assert env_lines(env, "--", "mpirun.mpich", "-np", "2", "./app") == mpich
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mpirun").symlink_to("/usr/bin/mpirun.mpich")
    assert env_lines({**env, "PATH": f"{bin_dir}:{env['PATH']}"}) == mpich
    assert env_lines({**env, "PATH": f"{bin_dir}:{env['PATH']}"}, "--mpi", "openmpi") == openmpi
    # What the user set already is left alone.
    allowed = {**env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert env_lines(allowed) == [line for line in openmpi if "OMPI_" not in line]


def test_open_mpi_allowances_follow_the_command():
    """As root (the tests run as root): the run-as-root pair always; oversubscription only
    for more ranks than this node's cores (2 here) started here, not under a scheduler."""
    from stacklens_cli.attach import node_cores, open_mpi_allowances

    assert node_cores() == 2
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    over = {"OMPI_MCA_rmaps_base_oversubscribe": "1"}
    cases = {
        ("mpirun", "-np", "2", "./a"): root,
        ("mpirun", "-np", "3", "./a"): {**root, **over},
        ("mpirun", "-n", "1", "./a", ":", "-n", "2", "./b"): {**root, **over},
        ("mpirun", "--host", "n1,n2", "-np", "4", "./a"): root,
        ("mpirun", "--allow-run-as-root", "-np", "4", "./a"): over,
        ("mpirun", "--oversubscribe", "-np", "4", "./a"): root,
        ("./a",): root,
    }
    assert {cmd: open_mpi_allowances(cmd, {}) for cmd in cases} == cases
    assert open_mpi_allowances(["mpirun", "-np", "4", "./a"], {"SLURM_JOB_ID": "7"}) == root
    assert open_mpi_allowances(["mpirun", "-np", "4", "./a"], {**root, **over}) == {}
