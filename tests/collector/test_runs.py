"""Runs at the collector: every launch of a job is a run of its own, deduplicated on its own.

* Two MPI runs of one job id send the same (rank, seq) pairs: both are stored, exactly and
  apart (the old ledger key (job, rank, seq) took the second for resends of the first).
* Processes without MPI (wire run 0) share their job's one `processes` run, numbered by
  (host, pid, start time); a resend keeps its number and is stored once.
* Run statuses, and the job's status aggregated over them.
* Version 1 frames are refused; a run-0 frame must be world rank 0 of 1 with a start time.
"""

from __future__ import annotations

import asyncio

import numpy as np

from stacklens import wire
from tests.collector.test_ingest import T0, exchange
from tests.collector.test_rollups import roll_up
from tests.conftest import query

FINAL, KILLED = wire.FrameType.FINAL, wire.FrameType.KILLED


def mpi_frame(run: int, seq: int, rank: int, nbytes: int, *, job="job-R", frame_type=1,
              label: bytes = b"") -> bytes:  # fmt: skip
    """A frame of rank `rank` of a 2-rank MPI run sending `nbytes` to the other rank (the
    run's frames start at T0 + (run % 16) * 10 s)."""
    tables = {"p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": nbytes,
                                           "msgs_sent": 1}])}  # fmt: skip
    if seq == 0:
        tables["rank_info"] = wire.records(
            "rank_info", [{"command": f"./app {run}".encode(), "user": b"bob", "run_label": label}]
        )
    return wire.encode_frame(
        job_id=job, run_id=run, world_rank=rank, world_size=2, seq=seq, host=f"n{rank}",
        pid=10 + rank, interval_start_ns=T0 + run % 16 * 10**10 + seq * 10**9,
        interval_end_ns=T0 + run % 16 * 10**10 + (seq + 1) * 10**9, token="secret",
        frame_type=frame_type, tables=tables,
    )  # fmt: skip


def process_frame(pid: int, start: int, seq: int, nbytes: int, *, job="job-R", frame_type=1,
                  host="n0") -> bytes:  # fmt: skip
    """A frame of a process without MPI (run 0) that wrote `nbytes` to /scratch/out."""
    record = {"layer": 1, "writes": 1, "bytes_written": nbytes, "path": b"/scratch/out",
              "mount": b"/", "fstype": b"ext4"}  # fmt: skip
    io = wire.records("io", [record])
    return wire.encode_frame(
        job_id=job, run_id=0, proc_start_ns=start, world_rank=0, world_size=1, seq=seq,
        host=host, pid=pid, interval_start_ns=T0 + seq * 10**9,
        interval_end_ns=T0 + (seq + 1) * 10**9, token="secret", frame_type=frame_type,
        tables={"io": io},
    )  # fmt: skip


def send(collector, frames: list[bytes]) -> None:
    """Send frames on one connection; each must be acknowledged as committed."""
    acks = exchange(collector.address, b"".join(frames), acks=len(frames))
    assert [status for status, _ in acks] == [0] * len(frames)


def runs(pg_url: str, job: str = "job-R") -> list[tuple]:
    """(ordinal, kind, label, world size, status, command) of the job's runs."""
    return query(
        pg_url,
        "SELECT ordinal, kind, label, runs.world_size, runs.status, runs.command FROM runs "
        "JOIN jobs ON jobs.id = job_id WHERE job_key = %s ORDER BY ordinal",
        (job,),
    )


def sent_per_run(pg_url: str) -> dict[tuple[int, int], int]:
    """(run ordinal, rank) -> bytes sent, over job-R."""
    rows = query(
        pg_url,
        "SELECT ordinal, world_rank, sum(bytes_sent) FROM p2p_deltas d "
        "JOIN runs ON runs.id = d.run_id GROUP BY 1, 2",
    )
    return {(run, rank): int(total) for run, rank, total in rows}


def job_status(pg_url: str, job: str = "job-R") -> str:
    return query(pg_url, "SELECT status FROM jobs WHERE job_key = %s", (job,))[0][0]


def test_two_runs_of_one_job_id_are_stored_apart_and_exactly(collector, pg_url):
    first = [mpi_frame(0xAAAA, seq, rank, 1000) for seq in (0, 1) for rank in (0, 1)]
    # The second launch: same job id, same ranks and sequence numbers, other bytes; its
    # run id has the top bit set (stored as a negative bigint).
    second_run = 0xF000_0000_0000_0001
    second = [mpi_frame(second_run, seq, rank, 7000, label=b"3") for seq in (0, 1, 2)
              for rank in (0, 1)]  # fmt: skip
    send(collector, first)
    send(collector, second)
    send(collector, second[:2])  # resent: duplicates of the second run, stored once

    assert sent_per_run(pg_url) == {(1, 0): 2000, (1, 1): 2000, (2, 0): 21000, (2, 1): 21000}
    assert runs(pg_url) == [
        (1, "mpi", None, 2, "running", "./app 43690"),
        (2, "mpi", "3", 2, "running", f"./app {second_run}"),
    ]
    assert query(pg_url, "SELECT run_key FROM runs ORDER BY ordinal") == [
        (0xAAAA,), (second_run - 2**64,)
    ]  # fmt: skip
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(10,)]
    assert collector.service.writer.stats.frames_duplicate == 2
    ranks = query(pg_url, "SELECT r.ordinal, world_rank FROM ranks JOIN runs r ON r.id = run_id")
    assert sorted(ranks) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    # Rollups are per run too.
    roll_up(collector)
    rolled = query(
        pg_url,
        "SELECT r.ordinal, world_rank, sum(bytes_sent) FROM p2p_minutes m "
        "JOIN runs r ON r.id = m.run_id GROUP BY 1, 2",
    )
    assert {(o, k): int(b) for o, k, b in rolled} == sent_per_run(pg_url)


def test_run_and_job_statuses(collector, pg_url):
    send(collector, [mpi_frame(1, 0, 0, 1), mpi_frame(1, 0, 1, 1)])
    send(collector, [mpi_frame(1, 1, 0, 1, frame_type=FINAL)])
    assert [r[4] for r in runs(pg_url)] == ["running"]
    send(collector, [mpi_frame(1, 1, 1, 1, frame_type=FINAL)])
    assert [r[4] for r in runs(pg_url)] == ["finished"] and job_status(pg_url) == "finished"
    # A second launch makes the job run again; its killed rank ends it 'killed'.
    send(collector, [mpi_frame(2, 0, 0, 1)])
    assert [r[4] for r in runs(pg_url)] == ["finished", "running"]
    assert job_status(pg_url) == "running"
    send(collector, [mpi_frame(2, 1, 0, 1, frame_type=KILLED)])
    assert [r[4] for r in runs(pg_url)] == ["finished", "killed"]
    assert job_status(pg_url) == "killed"
    assert query(pg_url, "SELECT finished_ns FROM jobs") == [(T0 + 2 * 10**10 + 2 * 10**9,)]


def test_a_silent_run_is_lost_and_so_is_its_job_unless_another_runs(collector, pg_url):
    service = collector.service
    service.job_lost_after_s = 600.0

    def mark_lost(now_ns: int) -> int:
        job = service.mark_lost_once(now_ns)
        return asyncio.run_coroutine_threadsafe(job, collector.loop).result(30)

    send(collector, [mpi_frame(1, 0, 0, 1), mpi_frame(1, 0, 1, 1)])  # ends T0 + 11 s
    send(collector, [mpi_frame(2, 0, 0, 1)])  # ends T0 + 21 s
    assert mark_lost(T0 + 11 * 10**9 + 600 * 10**9 + 1) == 1
    assert [r[4] for r in runs(pg_url)] == ["lost", "running"]
    assert job_status(pg_url) == "running"
    assert mark_lost(T0 + 21 * 10**9 + 600 * 10**9 + 1) == 1
    assert [r[4] for r in runs(pg_url)] == ["lost", "lost"] and job_status(pg_url) == "lost"
    send(collector, [mpi_frame(1, 1, 0, 1)])  # a late frame of run 1
    assert [r[4] for r in runs(pg_url)] == ["running", "lost"]
    assert job_status(pg_url) == "running"


def test_processes_share_the_jobs_one_non_mpi_run(collector, pg_url):
    # Three processes; two have the same pid on different hosts or at different times.
    send(collector, [process_frame(500, 111, 0, 10), process_frame(500, 222, 0, 20)])
    send(collector, [process_frame(500, 111, 0, 10, host="n1"), process_frame(500, 111, 1, 5)])
    send(collector, [process_frame(500, 222, 0, 20)])  # resent: stored once
    assert runs(pg_url) == [(1, "processes", None, 3, "running", None)]
    assert query(
        pg_url,
        "SELECT process, host, pid, proc_start_ns FROM run_processes ORDER BY process",
    ) == [(0, "n0", 500, 111), (1, "n0", 500, 222), (2, "n1", 500, 111)]
    written = query(
        pg_url,
        "SELECT world_rank, sum(bytes_written) FROM io_deltas GROUP BY 1 ORDER BY 1",
    )
    assert [(rank, int(total)) for rank, total in written] == [(0, 15), (1, 20), (2, 10)]
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(4,)]
    assert query(pg_url, "SELECT count(*) FROM jobs") == [(1,)]

    # Every process ended: the run is finished; a new process makes it run again.
    send(collector, [process_frame(500, 111, 2, 0, frame_type=FINAL),
                     process_frame(500, 222, 1, 0, frame_type=FINAL),
                     process_frame(500, 111, 1, 0, host="n1", frame_type=FINAL)])  # fmt: skip
    assert [r[4] for r in runs(pg_url)] == ["finished"] and job_status(pg_url) == "finished"
    send(collector, [process_frame(600, 333, 0, 1)])
    assert [(r[3], r[4]) for r in runs(pg_url)] == [(4, "running")]
    assert job_status(pg_url) == "running"


def test_mpi_runs_and_the_processes_run_of_one_job(collector, pg_url):
    send(collector, [process_frame(42, 1, 0, 3)])
    send(collector, [mpi_frame(7, 0, 0, 100), mpi_frame(7, 0, 1, 100)])
    send(collector, [process_frame(43, 1, 0, 4)])
    assert [r[:2] for r in runs(pg_url)] == [(1, "processes"), (2, "mpi")]
    assert query(pg_url, "SELECT world_size FROM jobs") == [(2,)]


def test_version_1_frames_are_refused(collector, pg_url):
    raw = bytearray(mpi_frame(1, 0, 0, 1))
    raw[4:6] = (1).to_bytes(2, "little")
    acks = exchange(collector.address, bytes(raw), acks=1)
    assert [status for status, _ in acks] == [wire.Status.BAD_VERSION]
    assert query(pg_url, "SELECT count(*) FROM runs") == [(0,)]


def test_a_run_0_frame_must_be_one_process_with_a_start_time(collector, pg_url):
    good = dict(job_id="j", run_id=0, world_rank=0, world_size=1, seq=0, token="secret",
                interval_start_ns=T0, interval_end_ns=T0 + 1, proc_start_ns=5)  # fmt: skip
    for bad in ({"world_size": 2}, {"proc_start_ns": 0}):
        acks = exchange(collector.address, wire.encode_frame(**{**good, **bad}), acks=1)
        assert [status for status, _ in acks] == [wire.Status.OUT_OF_RANGE]
    assert [s for s, _ in exchange(collector.address, wire.encode_frame(**good), acks=1)] == [0]
    assert np.array_equal(query(pg_url, "SELECT kind FROM runs"), [("processes",)])
