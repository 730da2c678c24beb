# tests/compare/test_exe_path_truth.py — a program is its executable, not argv[0] (#28 point 1).
"""phases.c built twice, in two directories (the second with other flags: another binary),
and run under the real hooks (Open MPI, MPICH): twice the first binary — once found on
PATH as `phases`, once named by its absolute path — then the second, found on PATH as
`phases` too (the very same command line as the first run). Each run stores exactly the
path its ranks' /proc/self/exe names; the first binary's two runs are one program's history
and the comparison of the second with the median of its history finds none; the history
and comparison answers name the executable. Two Python scripts run by one interpreter
(mpi4py; /proc/self/exe is the interpreter) are two programs: their arguments tell them
apart, and a script's second run joins its first."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from tests.compare.test_sites_truth import COMPILERS, HERE, ITERATIONS
from tests.conftest import query
from tests.hooks import jobs

MPIS = ["openmpi", "mpich"]


def _stored_paths(pg_url: str, job_keys: list[str]) -> list[str | None]:
    """runs.exe_path of each job's one run, in the order of `job_keys`."""
    rows = dict(query(pg_url, "SELECT job_key, runs.exe_path FROM runs JOIN jobs ON jobs.id = "
                              "runs.job_id WHERE job_key = ANY(%s)", (job_keys,)))  # fmt: skip
    return [rows[k] for k in job_keys]


def _history(api_client, job: str) -> dict:
    answer = api_client.get("/api/compare/history", params={"job": job})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _run(collector, mpi: str, argv: list[str], job: str, **env: str) -> None:
    result = jobs.run_job(collector, mpi, argv, job, ranks=2, interval_ms=50, timeout=120,
                          **env)  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("mpi", MPIS)
def test_one_binary_is_one_program_and_a_namesake_is_not(collector, api_client, pg_url,
                                                        tmp_path, mpi: str) -> None:  # fmt: skip
    first, second = tmp_path / "one" / "phases", tmp_path / "two" / "phases"
    for program, flags in ((first, "-O2"), (second, "-O0")):
        program.parent.mkdir()
        subprocess.run([COMPILERS[mpi], "-g", flags, "-o", program, HERE / "phases.c"],
                       check=True)  # fmt: skip
    tag = uuid.uuid4().hex[:8]
    on_path, by_path, namesake = (f"exe-{tag}-{n}" for n in ("path", "abs", "other"))
    search = os.environ["PATH"]
    quick = {"PHASES_SLOW_MS": "0"}
    _run(collector, mpi, ["phases", str(ITERATIONS)], on_path,
         PATH=f"{first.parent}:{search}", **quick)  # fmt: skip
    _run(collector, mpi, [str(first), str(ITERATIONS)], by_path, **quick)
    _run(collector, mpi, ["phases", str(ITERATIONS)], namesake,
         PATH=f"{second.parent}:{search}", **quick)  # fmt: skip

    exe_first, exe_second = os.path.realpath(first), os.path.realpath(second)
    assert _stored_paths(pg_url, [on_path, by_path, namesake]) == [
        exe_first, exe_first, exe_second]  # fmt: skip
    commands = dict(query(pg_url, "SELECT job_key, runs.command FROM runs JOIN jobs ON jobs.id = "
                                  "runs.job_id"))  # fmt: skip
    # the namesake's command line is the first run's: only the executable tells them apart
    assert commands[namesake] == commands[on_path] != commands[by_path]

    history = _history(api_client, by_path)
    assert history["exe_path"] == exe_first
    assert [r["job"] for r in history["runs"]] == [by_path, on_path]
    other = _history(api_client, namesake)
    assert other["exe_path"] == exe_second
    assert [r["job"] for r in other["runs"]] == [namesake]

    median = api_client.get("/api/compare", params={"b": by_path})
    assert median.status_code == 200, median.text
    body = median.json()
    assert (body["a"]["runs"], body["a"]["exe_path"], body["b"]["exe_path"]) == (
        1, exe_first, exe_first)  # fmt: skip
    alone = api_client.get("/api/compare", params={"b": namesake})
    assert alone.status_code == 404
    assert "no earlier run of the same program" in alone.text
    pair = api_client.get("/api/compare", params={"a": on_path, "b": namesake}).json()
    assert (pair["a"]["exe_path"], pair["b"]["exe_path"]) == (exe_first, exe_second)


@pytest.mark.parametrize("mpi", MPIS)
def test_two_scripts_of_one_interpreter_are_two_programs(collector, api_client, pg_url,
                                                         tmp_path, mpi: str,
                                                         request) -> None:  # fmt: skip
    pytest.importorskip("mpi4py")
    extra: dict[str, str] = {}
    if mpi == "mpich":
        abi = request.getfixturevalue("mpich_abi_dir")
        extra = {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi)}
    scripts = [tmp_path / "solve.py", tmp_path / "train.py"]
    for script in scripts:
        script.write_text("from mpi4py import MPI\n\nMPI.COMM_WORLD.Barrier()\n")
    tag = uuid.uuid4().hex[:8]
    solve_1, train, solve_2 = (f"py-{tag}-{n}" for n in ("solve1", "train", "solve2"))
    for job, script in ((solve_1, scripts[0]), (train, scripts[1]), (solve_2, scripts[0])):
        _run(collector, mpi, [sys.executable, str(script)], job, **extra)

    interpreter = os.path.realpath(sys.executable)
    assert _stored_paths(pg_url, [solve_1, train, solve_2]) == [interpreter] * 3
    assert [r["job"] for r in _history(api_client, solve_2)["runs"]] == [solve_2, solve_1]
    assert [r["job"] for r in _history(api_client, train)["runs"]] == [train]
