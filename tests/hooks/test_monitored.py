"""Monitored traffic (wire table 11 `monitored`, `monitored_deltas`,
server/traffic/monitored.py): under Open MPI the hooks switch its monitoring component on and
store, per rank and peer, exactly what the component itself counts (compared with its own
dump at MPI_Finalize); under MPICH, or with STACKLENS_MONITOR_TRAFFIC=off (or its old name
STACKLENS_MEASURE_WIRE, still read with a warning), nothing is stored and the run reads as
not monitored (None), never as zeros."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from server.traffic.monitored import monitored_bytes
from stacklens.db import make_engine
from tests.conftest import query
from tests.hooks import jobs

RANKS = 4
#: The whole of time, as a window.
EVER = (0, 2**62)


def monitoring_dump(prefix: Path, ranks: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, peer) -> (bytes, messages) sent, from the point-to-point section of the files
    Open MPI's monitoring component writes at MPI_Finalize (`<prefix>.<rank>.prof`; with
    pml_monitoring_enable=1 every PML message is in it, collective internals included)."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for rank in range(ranks):
        section = None
        for line in Path(f"{prefix}.{rank}.prof").read_text().splitlines():
            if line.startswith("#"):
                section = line
                continue
            fields = line.split("\t")
            if section == "# POINT TO POINT" and fields[0] in ("E", "I"):
                key = (int(fields[1]), int(fields[2]))
                size, msgs = int(fields[3].split()[0]), int(fields[4].split()[0])
                old = out.get(key, (0, 0))
                out[key] = (old[0] + size, old[1] + msgs)
    return out


def stored_bytes(pg_url: str, job: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(rank, peer) -> (bytes, messages) stored in monitored_deltas for the job."""
    rows = query(
        pg_url,
        "SELECT world_rank, peer, sum(bytes), sum(msgs) FROM monitored_deltas "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s GROUP BY 1, 2",
        (job,),
    )
    return {(r, p): (int(b), int(m)) for r, p, b, m in rows}


def run_ids(pg_url: str, job: str) -> tuple[int, int]:
    """(jobs.id, runs.id) of the job's MPI run."""
    [(job_id, run_id)] = query(
        pg_url,
        "SELECT jobs.id, runs.id FROM jobs JOIN runs ON runs.job_id = jobs.id "
        "WHERE job_key = %s AND runs.kind = 'mpi'",
        (job,),
    )
    return job_id, run_id


def monitored(pg_url: str, job: str) -> dict[tuple[int, int], int] | None:
    """monitored_bytes of the job's MPI run over all time."""
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            return monitored_bytes(session, *run_ids(pg_url, job), *EVER)
    finally:
        engine.dispose()


@pytest.mark.parametrize("user_setting", [{}, {"OMPI_MCA_pml_monitoring_enable": "2"}])
def test_openmpi_monitored_bytes_equal_the_monitoring_components_own(
    collector, pg_url, tmp_path, user_setting
):
    """The hooks switch the component on, or leave the user's own setting (2: the dump
    splits internal from user messages; every message is monitored all the same)."""
    job = f"mon-{uuid.uuid4().hex[:8]}"
    prefix = tmp_path / "prof"
    result = jobs.run_job(
        collector, "openmpi", [jobs.program("openmpi", "monitored_pattern")], job, RANKS,
        OMPI_MCA_pml_monitoring_enable_output="3",
        OMPI_MCA_pml_monitoring_filename=str(prefix), **user_setting,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []

    expected = monitoring_dump(prefix, RANKS)
    stored = stored_bytes(pg_url, job)
    assert stored == expected
    # The ring's point-to-point messages are part of it, on every rank (80 (r + 1) bytes
    # to the next rank), and so are the collectives' (the bcast root sends to others).
    for r in range(RANKS):
        assert stored[(r, (r + 1) % RANKS)][0] >= 80 * (r + 1)
    assert sum(b for (src, _), (b, _) in stored.items() if src == 0) > 80 + 800
    # Every frame of every rank says "monitored", the empty ones too (absent != 0).
    [(frames, monitored_rows)] = query(
        pg_url,
        "SELECT (SELECT count(*) FROM received_frames f JOIN jobs ON jobs.id = f.job_id "
        "WHERE job_key = %s), (SELECT count(*) FROM monitored_frames w JOIN jobs ON "
        "jobs.id = w.job_id WHERE job_key = %s)",
        (job, job),
    )
    assert monitored_rows == frames > RANKS
    # The server reads the same figures, bytes per (src, dst).
    assert monitored(pg_url, job) == {k: b for k, (b, _) in expected.items() if b}


def test_openmpi_default_counts_without_the_components_recording_exactly(
    collector, pg_url, tmp_path
):
    """By default (monitoring switched on by the hooks, nobody reading the component's
    counts) the hooks count at its recording call but skip the component's own
    recording (monitored.h): the stored bytes and messages per (rank, peer) are exactly
    what the component dumps in the same program's run where its output is asked for."""
    prefix = tmp_path / "prof"
    argv = [jobs.program("openmpi", "monitored_pattern")]
    dumped = f"mon-dump-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "openmpi", argv, dumped, RANKS,
        OMPI_MCA_pml_monitoring_enable_output="3", OMPI_MCA_pml_monitoring_filename=str(prefix),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = f"mon-default-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "openmpi", argv, job, RANKS)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []

    expected = monitoring_dump(prefix, RANKS)
    assert stored_bytes(pg_url, dumped) == expected
    assert stored_bytes(pg_url, job) == expected
    assert monitored(pg_url, job) == {k: b for k, (b, _) in expected.items() if b}


def test_openmpi_monitored_counts_of_many_threads_are_exact(collector, pg_url, tmp_path):
    """20 threads per rank in 2 waves send at once (MPI_THREAD_MULTIPLE): the hooks'
    per-thread counter rows (16 counter blocks, handed back at thread exit and claimed again
    by the next wave; the threads beyond 16 share a row with atomic adds) sum to exactly
    the component's dump, in a run that asks for it and in a default run."""
    prefix = tmp_path / "prof"
    argv = [jobs.program("openmpi", "threads"), "20", "2", "5"]
    dumped = f"mon-thr-dump-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(
        collector, "openmpi", argv, dumped, 2,
        OMPI_MCA_pml_monitoring_enable_output="3", OMPI_MCA_pml_monitoring_filename=str(prefix),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = f"mon-thr-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "openmpi", argv, job, 2)
    assert result.returncode == 0, result.stderr

    expected = monitoring_dump(prefix, 2)
    # each rank sends 2 waves x sum over t < 20 of 5 (t + 1) messages of 100 (t + 1) + r bytes
    for r in (0, 1):
        b, m = expected[(r, 1 - r)]
        assert m >= 2 * sum(5 * (t + 1) for t in range(20))
        assert b >= 2 * sum(5 * (t + 1) * (100 * (t + 1) + r) for t in range(20))
    assert stored_bytes(pg_url, dumped) == expected
    assert stored_bytes(pg_url, job) == expected


def test_openmpi_a_blocked_sends_bytes_are_never_monitored_ahead_of_it(collector, pg_url):
    """Rank 0's MPI_Send of 8 MiB blocks ~800 ms until rank 1 receives (late_receiver.py):
    the MPI monitors the message as it is posted, and the hooks count it as posted too
    (before the call, and a frame reads the monitored counters before the peer table), so
    frame by frame the monitored bytes rank 0 sent rank 1 never run ahead of its
    point-to-point bytes by the message (counted when the call returned, it was in several
    frames' monitored bytes beyond their point-to-point bytes: collective traffic that
    the emulator moved on the fabric, then the message once more)."""
    pytest.importorskip("mpi4py")
    job = f"mon-late-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, str(Path(__file__).parent / "late_receiver.py")]
    result = jobs.run_job(collector, "openmpi", argv, job, 2)
    assert result.returncode == 0, result.stderr
    frames = query(
        pg_url,
        "SELECT f.t_end_ns, coalesce((SELECT sum(bytes_sent) FROM p2p_deltas p WHERE "
        "p.job_id = f.job_id AND p.run_id = f.run_id AND p.world_rank = 0 AND p.peer = 1 "
        "AND p.t_end_ns = f.t_end_ns), 0), coalesce(sum(m.bytes), 0) FROM monitored_frames f "
        "JOIN jobs ON jobs.id = f.job_id LEFT JOIN monitored_deltas m ON m.job_id = f.job_id "
        "AND m.run_id = f.run_id AND m.world_rank = 0 AND m.peer = 1 "
        "AND m.t_end_ns = f.t_end_ns WHERE job_key = %s AND f.world_rank = 0 "
        "GROUP BY f.job_id, f.run_id, f.t_end_ns ORDER BY f.t_end_ns",
        (job,),
    )
    p2p = monitored = ahead = 0
    for _, sent, counted in frames:
        p2p, monitored = p2p + int(sent), monitored + int(counted)
        ahead = max(ahead, monitored - p2p)
    size = 8 << 20
    assert len(frames) >= 8  # the send was blocked over several frames
    assert p2p == size and monitored >= size
    assert ahead < size, frames  # the collectives' own messages (the barriers') at most


def test_mpich_stores_no_monitored_records_and_reads_as_unmonitored(collector, pg_url):
    job = f"mon-mpich-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program("mpich", "monitored_pattern")]
    result = jobs.run_job(collector, "mpich", argv, job, RANKS)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert query(pg_url, "SELECT count(*) FROM monitored_frames") == [(0,)]
    assert monitored(pg_url, job) is None
    # the rest of the job is stored as ever: the ring's p2p bytes, exactly
    sent, _ = jobs.p2p(pg_url, job)
    assert {k: v for k, v in sent.items()} == {
        (r, (r + 1) % RANKS): (80 * (r + 1), 1) for r in range(RANKS)
    }


@pytest.mark.parametrize(
    "setting", [{"STACKLENS_MONITOR_TRAFFIC": "off"}, {"OMPI_MCA_pml_monitoring_enable": "0"}]
)
def test_off_or_the_users_own_0_leaves_open_mpi_unmonitored(collector, pg_url, setting):
    job = f"mon-off-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program("openmpi", "monitored_pattern")]
    result = jobs.run_job(collector, "openmpi", argv, job, RANKS, **setting)
    assert result.returncode == 0, result.stderr
    assert query(pg_url, "SELECT count(*) FROM monitored_frames") == [(0,)]
    assert monitored(pg_url, job) is None


def test_monitor_traffic_on_under_mpich_says_why_once(collector, pg_url):
    job = f"mon-on-{uuid.uuid4().hex[:8]}"
    argv = [jobs.program("mpich", "monitored_pattern")]
    result = jobs.run_job(collector, "mpich", argv, job, RANKS, STACKLENS_MONITOR_TRAFFIC="on")
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == [
        "stacklens: STACKLENS_MONITOR_TRAFFIC=on but this MPI has no active monitoring component "
        "(Open MPI's pml_monitoring_enable); its traffic is not monitored"
    ]
    assert monitored(pg_url, job) is None


def test_the_old_name_is_still_read_with_one_warning_per_process(collector, pg_url):
    """STACKLENS_MEASURE_WIRE (the setting's name before STACKLENS_MONITOR_TRAFFIC) still
    switches the monitoring off, and each rank's process says once that it was renamed;
    the new name, when set, wins without a word."""
    argv = [jobs.program("openmpi", "monitored_pattern")]
    job = f"mon-old-{uuid.uuid4().hex[:8]}"
    result = jobs.run_job(collector, "openmpi", argv, job, RANKS, STACKLENS_MEASURE_WIRE="off")
    assert result.returncode == 0, result.stderr
    assert (
        jobs.library_warnings(result.stderr)
        == [
            "stacklens: STACKLENS_MEASURE_WIRE is now called STACKLENS_MONITOR_TRAFFIC: read as "
            "it (rename it; the old name will go)"
        ]
        * RANKS
    )
    assert monitored(pg_url, job) is None
    both = f"mon-both-{uuid.uuid4().hex[:8]}"
    old_and_new = {"STACKLENS_MEASURE_WIRE": "off", "STACKLENS_MONITOR_TRAFFIC": "auto"}
    result = jobs.run_job(collector, "openmpi", argv, both, RANKS, **old_and_new)
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    assert monitored(pg_url, both) is not None
