"""A launch whose rank crashes before its first frame still leaves a run (issue #32 point 3).

A launch none of whose processes ever starts (the program is missing) is told by the
launch record of `stacklens run` alone: a run `failed`, with the command, the ranks asked,
the launcher's exit status and last lines, on the jobs list, the job page and the report.

mpi_pmpi_hooks/tests/crasher.c: rank 1 dies of SIGSEGV (or abort()) 600 ms after MPI_Init,
a window allocation, 3 barriers and 2 messages to rank 0, with a reporting interval of an
hour: no rank sends a frame before the crash. Under `stacklens run`, the ranks keep crash
snapshots in a directory of its own under /dev/shm (stacklens_cli/snapshots.py); the crashed
rank's snapshot becomes its final frame (killed), so the run is listed `killed` with what the
rank counted up to its last snapshot: its exact calls and bytes. The other ranks are ended by
the launcher (their own final frame, or their snapshot when that did not arrive). Nothing is
left in /dev/shm. Real MPI (Open MPI and MPICH), a real collector, API and database.
"""

from __future__ import annotations

import html
import re
import uuid
from pathlib import Path

import pytest

from presentation import cards
from stacklens.api_models import JobRuns
from stacklens_cli.snapshots import SHM
from tests.conftest import free_port, query, stacklens_replay, stacklens_run
from tests.hooks import jobs
from tests.test_cli_run import run_lines, user_env

#: What each rank counted before rank 1 died (crasher.c): (rank, op) -> (calls, bytes).
COUNTED = {
    (0, "MPI_Init"): (1, 0), (0, "MPI_Barrier"): (3, 0), (0, "MPI_Recv"): (2, 2000),
    (1, "MPI_Init"): (1, 0), (1, "MPI_Barrier"): (3, 0), (1, "MPI_Send"): (2, 2000),
}  # fmt: skip


def _snapshot_dirs() -> set[Path]:
    return set(SHM.glob("stacklens-*"))


@pytest.mark.parametrize(
    ("mpi", "how"),
    [("openmpi", "segv"), ("mpich", "segv"), ("openmpi", "abort"), ("mpich", "abort")],
)
def test_a_rank_that_crashes_before_its_first_frame_leaves_a_killed_run(
    collector, pg_url, api_client, tmp_path, mpi, how
):
    job = f"crash-{mpi}-{how}-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="3600000",
                   STACKLENS_SPOOL_DIR=str(tmp_path / "spool"))  # fmt: skip
    before = _snapshot_dirs()
    launch = ["mpirun", "-np", "2"] if mpi == "openmpi" else ["mpirun.mpich", "-np", "2"]
    result = stacklens_run([*launch, jobs.program(mpi, "crasher"), how], env, timeout=120)
    assert result.returncode != 0
    assert _snapshot_dirs() == before  # the launch's directory is gone
    lines = run_lines(result.stderr)
    assert any(line.endswith("crash snapshots are sent as their last frame (killed)")
               for line in lines), result.stderr  # fmt: skip
    assert query(
        pg_url,
        "SELECT r.status, r.world_size FROM runs r JOIN jobs j "
        "ON j.id = r.job_id WHERE j.job_key = %s",
        (job,),
    ) == [("killed", 2)]
    # the launch record joined the run its ranks made: the ranks asked, the exit status
    assert [row[3:6] for row in _runs(pg_url, job)] == [(2, result.returncode, None)]
    ops = jobs.ops(pg_url, job)
    assert {key: ops.get(key) for key in COUNTED} == COUNTED
    assert ops[(1, "MPI_Win_allocate")][0] == ops[(0, "MPI_Win_allocate")][0] == 1
    sent, received = jobs.p2p(pg_url, job)
    assert (sent[(1, 0)], received[(0, 1)]) == ((2000, 2), (2000, 2))
    ranks = {r["rank"]: r for r in api_client.get(
        api_client.app.url_path_for("job_ranks", job=job)).json()["ranks"]}  # fmt: skip
    assert ranks[1]["status"] == "killed"
    listed = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
    assert [(j["status"], j["command"]) for j in listed if j["job"] == job] == [
        ("killed", f"{jobs.program(mpi, 'crasher')} {how}")
    ]
    assert list((tmp_path / "spool").glob("*.slf")) == []  # all delivered


def test_without_a_spool_the_snapshots_are_sent_directly(collector, pg_url, tmp_path):
    """STACKLENS_SPOOL_DIR=off: the snapshots go from a folder of the launch's own."""
    job = f"crash-nospool-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job, STACKLENS_INTERVAL_MS="3600000",
                   STACKLENS_SPOOL_DIR="off")  # fmt: skip
    result = stacklens_run(["mpirun.mpich", "-np", "2", jobs.program("mpich", "crasher"), "segv"],
                           env, timeout=120)  # fmt: skip
    assert result.returncode != 0
    ops = jobs.ops(pg_url, job)
    assert {key: ops.get(key) for key in COUNTED} == COUNTED, result.stderr


#: What each launcher says, among its last lines, when it cannot start the program.
CANNOT_START = {
    "openmpi": "2 total processes failed to start",
    "mpich": "execvp error on file /nonexistent/prog (No such file or directory)",
}
LAUNCHERS = {"openmpi": ["mpirun", "-np", "2"], "mpich": ["mpirun.mpich", "-np", "2"]}


def _runs(pg_url: str, job: str) -> list[tuple]:
    """The job's runs: status, kind, world size, ranks asked, exit status, signal, command,
    ranks stored."""
    return query(
        pg_url,
        "SELECT r.status, r.kind, r.world_size, r.ranks_expected, r.exit_code, r.exit_signal, "
        "r.command, (SELECT count(*) FROM ranks k WHERE k.run_id = r.id) "
        "FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.job_key = %s ORDER BY r.ordinal",
        (job,),
    )


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_launch_whose_ranks_never_start_is_a_failed_run_with_the_launchers_words(
    collector, pg_url, api_client, tmp_path, mpi
):
    """The program is not there: no process ever loads the hooks. The launch record of
    `stacklens run` is the run: failed, the command, 2 ranks asked, the launcher's exit
    status and its last lines, on the jobs list and among the job's runs."""
    job = f"nostart-{mpi}-{uuid.uuid4().hex[:6]}"
    env = user_env(collector.endpoint, STACKLENS_JOB_ID=job,
                   STACKLENS_SPOOL_DIR=str(tmp_path / "spool"))  # fmt: skip
    command = [*LAUNCHERS[mpi], "/nonexistent/prog"]
    result = stacklens_run(command, env, timeout=120)
    assert result.returncode not in (0, 1)
    said = CANNOT_START[mpi]
    assert said in result.stdout + result.stderr  # passed on to the terminal as it came
    assert _runs(pg_url, job) == [
        ("failed", "mpi", 2, 2, result.returncode, None, " ".join(command), 0)
    ], result.stderr
    listed = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
    assert [j["status"] for j in listed if j["job"] == job] == ["failed"]
    runs = api_client.get(f"/api/jobs/{job}").json()["runs"]
    assert [(r["status"], r["ranks_seen"], r["exit_code"], r["exit_signal"])
            for r in runs] == [("failed", 0, result.returncode, None)]  # fmt: skip
    assert said in runs[0]["launch_output"]
    assert list((tmp_path / "spool").glob("*.slf")) == []  # the record was delivered
    # the job page's runs card and the job report: the run, how it ended, the words
    ended = f"exit {result.returncode}"
    shown = cards.BY_KEY["runs"].render(JobRuns(job=job, runs=runs))["table"]
    assert f"| 1 | mpi | 0 / 2 | failed | {ended} |" in shown
    assert "**Run 1: the launcher's last lines**" in shown and said in shown
    report = api_client.get(f"/api/reports/jobs/{job}", params={"format": "html"})
    assert report.status_code == 200, report.text
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", report.text)).split())
    assert f"1 mpi 0 / 2 failed {ended}" in text
    assert "Run 1: the launcher's last lines" in text and said in text


@pytest.mark.parametrize("first", ["ranks", "launch"])
def test_a_launch_record_stored_before_its_ranks_frames_is_the_same_one_run(
    collector, pg_url, tmp_path, first
):
    """The crasher under MPICH and `stacklens run` with no collector answering: the ranks'
    frames, their crash snapshots and the launch record all wait in the spool. Delivered in
    either order — the ranks' files then the launch record (as `stacklens replay` sorts
    them), or the launch record alone first (another node's spool replayed later) — the
    launch is one run, ordinal 1: killed, 2 ranks asked, the launcher's exit status and
    words, both ranks with exactly what they counted."""
    job = f"order-{first}-{uuid.uuid4().hex[:6]}"
    spool = tmp_path / "spool"
    env = user_env(f"127.0.0.1:{free_port()}", STACKLENS_JOB_ID=job,
                   STACKLENS_INTERVAL_MS="3600000", STACKLENS_SPOOL_DIR=str(spool),
                   STACKLENS_FINALIZE_TIMEOUT_MS="300",
                   STACKLENS_HTTP_PORT=str(free_port()))  # fmt: skip
    result = stacklens_run([*LAUNCHERS["mpich"], jobs.program("mpich", "crasher"), "segv"], env,
                           timeout=120)  # fmt: skip
    assert result.returncode != 0
    parts = {"launch": tmp_path / "launch", "ranks": tmp_path / "ranks"}
    for folder in parts.values():
        folder.mkdir(mode=0o700)
    for path in spool.glob("*.slf"):
        path.rename(parts["launch" if path.name.startswith("launch.") else "ranks"] / path.name)
    assert len(list(parts["launch"].iterdir())) == 1 and list(parts["ranks"].iterdir())
    for name in (first, "ranks" if first == "launch" else "launch"):
        replayed = stacklens_replay(collector.endpoint, parts[name])
        assert replayed.returncode == 0, replayed.stderr
        assert list(parts[name].glob("*.slf")) == [], replayed.stderr
    rows = query(
        pg_url,
        "SELECT r.ordinal, r.status, r.kind, r.world_size, r.ranks_expected, r.exit_code, "
        "r.exit_signal, (SELECT count(*) FROM ranks k WHERE k.run_id = r.id), "
        "r.launch_output IS NOT NULL FROM runs r JOIN jobs j ON j.id = r.job_id "
        "WHERE j.job_key = %s",
        (job,),
    )
    assert rows == [(1, "killed", "mpi", 2, 2, result.returncode, None, 2, True)]
    ops = jobs.ops(pg_url, job)
    assert {key: ops.get(key) for key in COUNTED} == COUNTED
    [(status,)] = query(pg_url, "SELECT status FROM jobs WHERE job_key = %s", (job,))
    assert status == "killed"
