"""The collector against a real PostgreSQL: frames stored exactly once, bad frames rejected."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from stacklens import wire
from tests.conftest import query

T0 = 1_700_000_000_000_000_000


def frame(
    seq: int,
    *,
    rank: int = 0,
    token: str = "secret",
    frame_type=wire.FrameType.INTERVAL,
    p2p_rows=None,
    job: str = "job-A",
    abort_code: int | None = None,
    user: str = "alice",
) -> bytes:
    """A two-rank frame with point-to-point records and one op record (an abort record of
    abort_code, two's complement, if given; and, at seq 0, the rank information: its
    command and `user`)."""
    p2p_rows = (
        p2p_rows
        if p2p_rows is not None
        else [
            {
                "peer": 1 - rank,
                "bytes_sent": 1000 + seq,
                "msgs_sent": 1,
                "bytes_recv": 10,
                "msgs_recv": 2,
            }
        ]
    )
    tables = {
        "p2p": wire.records("p2p", p2p_rows),
        "op": wire.records("op", [{"op_id": 4, "calls": 5, "bytes": 640, "time_ns": 999}]),
    }
    if abort_code is not None:
        tables["abort"] = wire.records("abort", [{"errorcode": abort_code & 0xFFFFFFFF}])
    if seq == 0:
        tables["rank_info"] = wire.records(
            "rank_info", [{"command": b"./prog --size 8", "user": user.encode()}]
        )
    return wire.encode_frame(
        job_id=job,
        world_rank=rank,
        world_size=2,
        seq=seq,
        host=f"node{rank}",
        pid=100 + rank,
        interval_start_ns=T0 + seq * 10**9,
        interval_end_ns=T0 + (seq + 1) * 10**9,
        token=token,
        frame_type=frame_type,
        tables=tables,
    )


def exchange(address, payload: bytes, acks: int, timeout: float = 10.0) -> list[tuple[int, int]]:
    """Send `payload` and end the stream; read up to `acks` acks (fewer if the server closes)."""
    out: list[tuple[int, int]] = []
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        buf = b""
        while len(out) < acks:
            chunk = sock.recv(4096)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= wire.ACK_SIZE and len(out) < acks:
                out.append(wire.decode_ack(buf[: wire.ACK_SIZE]))
                buf = buf[wire.ACK_SIZE :]
    return out


def wait_for(predicate, timeout: float = 10.0) -> None:
    """Poll `predicate` until it is true (fail after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_frames_are_stored_and_acknowledged_after_commit(collector, pg_url):
    acks = exchange(collector.address, frame(0) + frame(1) + frame(0, rank=1), acks=3)
    assert acks == [(0, 0), (0, 1), (0, 0)]
    rows = query(
        pg_url,
        "SELECT world_rank, peer, bytes_sent, msgs_sent, bytes_recv, msgs_recv, t_start_ns "
        "FROM p2p_deltas ORDER BY world_rank, t_start_ns",
    )
    assert rows == [
        (0, 1, 1000, 1, 10, 2, T0),
        (0, 1, 1001, 1, 10, 2, T0 + 10**9),
        (1, 0, 1000, 1, 10, 2, T0),
    ]
    assert query(pg_url, 'SELECT job_key, world_size, command, "user", status FROM jobs') == [
        ("job-A", 2, "./prog --size 8", "alice", "running")
    ]
    assert query(pg_url, "SELECT world_rank, host, pid FROM ranks ORDER BY 1") == [
        (0, "node0", 100),
        (1, "node1", 101),
    ]
    assert query(
        pg_url,
        "SELECT name, sum(calls), sum(bytes), sum(time_ns) FROM op_deltas "
        "JOIN mpi_ops ON mpi_ops.id = op_id GROUP BY name",
    ) == [("MPI_Isend", 15, 1920, 2997)]


def test_resent_frames_are_stored_once(collector, pg_url):
    assert exchange(collector.address, frame(0) + frame(0), acks=2) == [(0, 0), (0, 0)]
    assert exchange(collector.address, frame(0) + frame(1), acks=2) == [(0, 0), (0, 1)]
    assert query(pg_url, "SELECT count(*), sum(bytes_sent) FROM p2p_deltas") == [(2, 2001)]
    assert collector.call(lambda: collector.service.writer.stats.frames_duplicate) == 2


def test_job_finishes_when_every_rank_sent_its_final_frame(collector, pg_url):
    final = wire.FrameType.FINAL
    exchange(collector.address, frame(0) + frame(1, frame_type=final), acks=2)
    assert query(pg_url, "SELECT status FROM jobs") == [("running",)]
    exchange(collector.address, frame(0, rank=1, frame_type=final), acks=1)
    assert query(pg_url, "SELECT status, finished_ns FROM jobs") == [("finished", T0 + 2 * 10**9)]


def test_job_is_killed_when_a_rank_ended_by_a_signal(collector, pg_url):
    """A final frame of type killed ends the job at once as 'killed' (the other ranks may
    never report: a launcher SIGKILLs them); a later normal final frame does not undo it,
    and an unknown frame type is still rejected."""
    exchange(collector.address, frame(0) + frame(0, rank=1), acks=2)
    exchange(collector.address, frame(1, frame_type=wire.FrameType.KILLED), acks=1)
    assert query(pg_url, "SELECT status, finished_ns FROM jobs") == [("killed", T0 + 2 * 10**9)]
    assert query(pg_url, "SELECT world_rank, finished, killed FROM ranks ORDER BY 1") == [
        (0, True, True), (1, False, False)
    ]  # fmt: skip
    exchange(collector.address, frame(1, rank=1, frame_type=wire.FrameType.FINAL), acks=1)
    assert query(pg_url, "SELECT status FROM jobs") == [("killed",)]
    unknown = max(wire.FrameType) + 1  # a frame type no sender makes
    [(status, _)] = exchange(collector.address, frame(2, frame_type=unknown), acks=1)
    assert status == wire.Status.BAD_BODY


def test_job_is_aborted_when_a_rank_called_mpi_abort(collector, pg_url):
    """A final frame of type aborted (with its abort record) ends the job as 'aborted' with
    the rank's error code; a killed frame of another rank after it does not undo that; an
    aborted frame without the record, or a record in another frame, is out of range."""
    aborted = wire.FrameType.ABORTED
    exchange(collector.address, frame(0) + frame(0, rank=1), acks=2)
    exchange(collector.address, frame(1, rank=1, frame_type=aborted, abort_code=-7), acks=1)
    assert query(pg_url, "SELECT status FROM jobs") == [("aborted",)]
    ranks = query(pg_url, "SELECT world_rank, finished, aborted, abort_code FROM ranks ORDER BY 1")
    assert ranks == [(0, False, False, None), (1, True, True, -7)]
    exchange(collector.address, frame(1, frame_type=wire.FrameType.KILLED), acks=1)
    assert query(pg_url, "SELECT status FROM jobs") == [("aborted",)]
    for bad in (frame(2, frame_type=aborted), frame(2, abort_code=3)):
        [(status, _)] = exchange(collector.address, bad, acks=1)
        assert status == wire.Status.OUT_OF_RANGE


def test_silent_running_job_is_lost_until_a_frame_arrives(collector, pg_url):
    """No frame for job_lost_after_s: a running job is lost (never a finished or killed
    one); its next frame makes it running again."""
    final = wire.FrameType.FINAL
    exchange(collector.address, frame(0) + frame(0, rank=1), acks=2)  # job-A ends T0 + 1 s
    ended = frame(0, job="job-B", frame_type=final) + frame(
        0, rank=1, job="job-B", frame_type=final
    )
    exchange(collector.address, ended, acks=2)
    service = collector.service
    service.job_lost_after_s = 600.0

    def mark_lost(now_ns: int) -> int:
        return asyncio.run_coroutine_threadsafe(
            service.mark_lost_once(now_ns), collector.loop
        ).result(30)

    def statuses() -> list[tuple]:
        return query(pg_url, "SELECT job_key, status FROM jobs ORDER BY 1")

    silent_since = T0 + 10**9
    assert mark_lost(silent_since + 600 * 10**9) == 0  # silent for exactly the limit
    assert statuses() == [("job-A", "running"), ("job-B", "finished")]
    assert mark_lost(silent_since + 600 * 10**9 + 1) == 1
    assert statuses() == [("job-A", "lost"), ("job-B", "finished")]
    exchange(collector.address, frame(1), acks=1)
    assert statuses() == [("job-A", "running"), ("job-B", "finished")]


def _stored_nothing(pg_url) -> None:
    for table in ("jobs", "ranks", "received_frames", "p2p_deltas", "op_deltas"):
        assert query(pg_url, f"SELECT count(*) FROM {table}") == [(0,)], table


def _rejections(collector) -> dict:
    return collector.call(lambda: dict(collector.service.ingest.stats.rejected))


def test_garbage_is_rejected_and_stores_nothing(collector, pg_url):
    garbage = bytes(range(256)) * 2
    assert exchange(collector.address, garbage, acks=1) == [(wire.Status.BAD_MAGIC, 0)]
    wait_for(lambda: _rejections(collector) == {"bad_magic": 1})
    _stored_nothing(pg_url)


def test_truncated_frame_is_rejected_and_stores_nothing(collector, pg_url):
    raw = frame(0)
    assert exchange(collector.address, raw[:-7], acks=1) == []
    assert exchange(collector.address, raw[:100], acks=1) == []
    wait_for(lambda: _rejections(collector) == {"bad_length": 2})
    _stored_nothing(pg_url)


def test_wrong_token_is_rejected_and_stores_nothing(collector, pg_url):
    acks = exchange(collector.address, frame(0, token="guess") + frame(1), acks=2)
    assert acks == [(wire.Status.BAD_TOKEN, 0)]
    wait_for(lambda: _rejections(collector) == {"bad_token": 1})
    _stored_nothing(pg_url)


def test_a_bad_frame_after_good_ones_keeps_the_good_ones(collector, pg_url):
    acks = exchange(collector.address, frame(0) + frame(1, token="guess"), acks=2)
    assert acks == [(0, 0), (wire.Status.BAD_TOKEN, 1)]
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(1,)]


def test_every_counter_table_is_stored(collector, pg_url):
    tables = {
        "hist": wire.records("hist", [{"op_id": 3, "bucket": 13, "count": 9}]),
        "coll": wire.records(
            "coll",
            [
                {
                    "op_id": 7,
                    "comm_id": 0xFFFFFFFF,
                    "comm_size": 2,
                    "root": 0xFFFFFFFF,
                    "calls": 2,
                    "bytes": 64,
                    "time_ns": 10,
                },
                {
                    "op_id": 7,
                    "comm_id": 5,
                    "comm_size": 2,
                    "root": 1,
                    "calls": 1,
                    "bytes": 8,
                    "time_ns": 3,
                },
            ],
        ),
        "rma": wire.records("rma", [{"target": 1, "op_id": 4, "calls": 3, "bytes": 300}]),
        "io": wire.records(
            "io",
            [
                {
                    "layer": 1,
                    "opens": 1,
                    "writes": 4,
                    "bytes_written": 16384,
                    "write_time_ns": 77,
                    "path": b"/scratch/out-\xff.dat",
                    "mount": b"/scratch",
                    "fstype": b"lustre",
                }
            ],
        ),
        "health": wire.records("health", [{"keys_dropped": 5, "frames_spooled": 2}]),
    }
    raw = wire.encode_frame(
        job_id="job-T",
        world_rank=0,
        world_size=2,
        seq=0,
        interval_start_ns=T0,
        interval_end_ns=T0 + 10**9,
        token="secret",
        tables=tables,
    )
    assert exchange(collector.address, raw, acks=1) == [(0, 0)]
    assert query(
        pg_url, "SELECT name, bucket, count FROM op_hist_deltas JOIN mpi_ops ON mpi_ops.id = op_id"
    ) == [("MPI_Send", 13, 9)]
    assert query(
        pg_url,
        "SELECT comm_id, comm_size, root, calls, bytes, time_ns FROM coll_deltas ORDER BY comm_id",
    ) == [(5, 2, 1, 1, 8, 3), (0xFFFFFFFF, 2, -1, 2, 64, 10)]
    assert query(pg_url, "SELECT target, op_id, calls, bytes FROM rma_deltas") == [(1, 4, 3, 300)]
    assert query(
        pg_url,
        "SELECT layer, path, mount, fstype, opens, writes, bytes_written, "
        "write_time_ns, t_start_ns, t_end_ns FROM io_deltas",
    ) == [(1, "/scratch/out-\ufffd.dat", "/scratch", "lustre", 1, 4, 16384, 77, T0, T0 + 10**9)]
    assert query(pg_url, "SELECT keys_dropped, frames_dropped, frames_spooled FROM ranks") == [
        (5, 0, 2)
    ]


def test_out_of_range_values_are_rejected(collector, pg_url):
    bad = [
        {"p2p": wire.records("p2p", [{"peer": 0, "bytes_sent": 2**63}])},
        {"rma": wire.records("rma", [{"target": 2}])},
        {"coll": wire.records("coll", [{"op_id": 7, "comm_size": 2, "root": 9}])},
        {"io": wire.records("io", [{"layer": 4, "path": b"/x"}])},
        {"hist": wire.records("hist", [{"op_id": 3, "bucket": 65}])},
    ]
    for tables in bad:
        raw = wire.encode_frame(
            job_id="job-R",
            world_rank=0,
            world_size=2,
            seq=0,
            interval_start_ns=T0,
            interval_end_ns=T0 + 1,
            token="secret",
            tables=tables,
        )
        assert exchange(collector.address, raw, acks=1) == [(wire.Status.OUT_OF_RANGE, 0)]
    wait_for(lambda: _rejections(collector) == {"out_of_range": len(bad)})
    _stored_nothing(pg_url)


def test_a_value_the_database_refuses_rejects_only_that_frame(collector, pg_url):
    """A frame that passed validation but that PostgreSQL refuses cannot block the others;
    an atomic batch (HTTP ingest) holding it is refused whole."""
    import asyncio

    from collector import codec

    writer = collector.service.writer
    limits = collector.call(collector.service.ingest.limits)

    def batch_of(*seqs: int) -> codec.FrameBatch:
        batch, error = codec.scan(b"".join(frame(s) for s in seqs), limits)
        assert error is None and len(batch) == len(seqs)
        batch.info["pid"][0] = 2**31  # valid on the wire, out of range for int4
        return batch

    def store(batch, atomic=False):
        coro = writer.store(batch, atomic=atomic)
        return asyncio.run_coroutine_threadsafe(coro, collector.loop).result(30)

    with pytest.raises(wire.FrameError, match="database refused a value") as refused:
        store(batch_of(3, 4), atomic=True)
    assert refused.value.status == wire.Status.BAD_BODY
    assert query(pg_url, "SELECT seq FROM received_frames") == []

    results = store(batch_of(0, 1))
    assert list(results) == [0]
    assert results[0].status == wire.Status.BAD_BODY
    assert "database refused a value" in results[0].reason
    assert query(pg_url, "SELECT seq FROM received_frames") == [(1,)]
    assert collector.call(lambda: writer.stats.data_errors) == 2


def test_the_same_frames_written_by_two_workers_at_once_are_stored_once(collector, pg_url):
    """Two writer transactions in flight with the same new job and the same frames (a
    resend racing the original): one stores them, the other waits and skips them."""
    import asyncio

    from collector import codec
    from collector.store.writer import FrameWriter

    limits = collector.call(collector.service.ingest.limits)
    raw = b"".join(frame(s, job="job-race") for s in range(50))

    async def twice():
        writer = FrameWriter(pg_url, max_batch=50)  # one submission per transaction
        await writer.start()
        try:
            first, _ = codec.scan(raw, limits)
            second, _ = codec.scan(raw, limits)
            results = await asyncio.gather(writer.submit(first), writer.submit(second))
            return results, writer.stats
        finally:
            await writer.stop()

    results, stats = asyncio.run_coroutine_threadsafe(twice(), collector.loop).result(30)
    assert results == [{}, {}]
    assert (stats.batches, stats.frames_committed, stats.frames_duplicate) == (2, 50, 50)
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(50,)]
    assert query(pg_url, "SELECT count(*), sum(bytes_sent) FROM p2p_deltas") == [
        (50, sum(1000 + s for s in range(50)))
    ]
    assert query(pg_url, "SELECT job_key FROM jobs") == [("job-race",)]


def test_message_counts_beyond_int4_are_stored_exactly(collector, pg_url):
    """Counts are int4 on disk; a larger one is split over elements of the same peer."""
    huge = 3 * 2**31 + 5
    rows = [{"peer": 1, "bytes_sent": 7, "msgs_sent": huge, "bytes_recv": 9,
             "msgs_recv": 2**31}]  # fmt: skip
    assert exchange(collector.address, frame(0, p2p_rows=rows), acks=1) == [(0, 0)]
    assert query(
        pg_url,
        "SELECT peer, sum(bytes_sent), sum(msgs_sent), sum(bytes_recv), sum(msgs_recv), "
        "count(*) FROM p2p_deltas GROUP BY peer",
    ) == [(1, 7, huge, 9, 2**31, 4)]


def test_a_slow_database_pushes_back_on_senders_and_loses_nothing(collector, pg_url):
    """While PostgreSQL cannot write (a table lock held elsewhere), the collector queues up
    to its bound and then stops reading: the sender's writes block (TCP pushes back). Once
    the database moves again, every frame is stored exactly once and acknowledged."""
    import threading

    import numpy as np
    import psycopg

    collector.call(lambda: setattr(collector.service.writer, "max_backlog", 256))
    rows = [{"peer": 1, "bytes_sent": 1, "msgs_sent": 1}] * 64
    frames = [frame(s, p2p_rows=rows, job="job-slow") for s in range(6000)]
    payload = b"".join(frames)
    sent = threading.Event()

    with psycopg.connect(pg_url) as blocker:
        blocker.execute("LOCK TABLE received_frames IN ACCESS EXCLUSIVE MODE")
        sock = socket.create_connection(collector.address, timeout=60)

        def send() -> None:
            sock.sendall(payload)
            sent.set()

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(2.0)
        backlog = collector.call(lambda: collector.service.writer.backlog)
        assert not sent.is_set(), "the collector kept reading while the database was stuck"
        assert backlog <= 256 + 64  # the bound, plus at most one received chunk
        blocker.rollback()  # release the lock

    sender.join(60)
    assert sent.is_set()
    buf = b""
    while len(buf) < len(frames) * wire.ACK_SIZE:
        buf += sock.recv(1 << 16)
    sock.close()
    statuses = np.frombuffer(buf, dtype=wire.ACK_DTYPE)
    assert (statuses["status"] == 0).all()
    assert statuses["seq"].tolist() == list(range(6000))
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(6000,)]
    assert query(pg_url, "SELECT count(*), sum(bytes_sent) FROM p2p_deltas") == [
        (6000 * 64, 6000 * 64)
    ]


def _monitored_frame(seq: int, records: list[dict]) -> bytes:
    """A frame of rank 0 of 4 carrying the monitored section with `records` (may be empty)."""
    return wire.encode_frame(
        job_id="job-W", world_rank=0, world_size=4, seq=seq, interval_start_ns=T0 + seq,
        interval_end_ns=T0 + seq + 1, token="secret",
        tables={"monitored": wire.records("monitored", records)},
    )  # fmt: skip


def test_monitored_records_are_stored_and_an_empty_section_says_monitored(collector, pg_url):
    records = [{"peer": 1, "bytes": 8000, "msgs": 1}, {"peer": 3, "bytes": 24, "msgs": 2}]
    first = _monitored_frame(0, records)
    empty = _monitored_frame(1, [])
    assert exchange(collector.address, first + empty, acks=2) == [(0, 0), (0, 1)]
    assert query(pg_url, "SELECT peer, bytes, msgs FROM monitored_deltas ORDER BY peer") == [
        (1, 8000, 1), (3, 24, 2)
    ]  # fmt: skip
    # the empty section is a row of empty arrays: monitored, nothing sent
    assert query(
        pg_url, "SELECT t_end_ns - %s, cardinality(peer) FROM monitored_frames ORDER BY 1", (T0,)
    ) == [(1, 2), (2, 0)]


@pytest.mark.parametrize(
    ("record", "reason"),
    [({"peer": 4, "bytes": 1, "msgs": 1}, "monitored peer rank out of range"),
     ({"peer": 1, "bytes": 1, "msgs": 2**40}, "monitored message count out of range"),
     ({"peer": 1, "bytes": 2**63, "msgs": 1}, "a counter is negative or too large")],
)  # fmt: skip
def test_monitored_records_out_of_bounds_are_rejected_and_counted(
    collector, pg_url, record, reason
):
    acks = exchange(collector.address, _monitored_frame(0, [record]), acks=1)
    assert acks == [(wire.Status.OUT_OF_RANGE, 0)]
    wait_for(lambda: _rejections(collector) == {"out_of_range": 1})
    raw = _monitored_frame(0, [record])
    header = wire.decode_header(raw, 1 << 24)
    with pytest.raises(wire.FrameError, match=reason):  # the reference decoder agrees
        wire.decode_body(header, raw[wire.HEADER_SIZE :])
    assert query(pg_url, "SELECT count(*) FROM monitored_frames") == [(0,)]
