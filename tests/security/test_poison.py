"""Poison frames (issue #24 point 4): frames that pass validation but make storing raise.
A sender that bypasses the hooks can send counters close to 2^63; each passes the wire's
bounds, but their sums do not fit the stored columns. Such a frame must cost its sender
alone: the writer refuses the frame that fails on its own (counted, logged with its key)
and stores the rest of its stream and everyone else's, and the rollup pass quarantines the
run whose sums do not fit (counted, logged; its minutes read from the raw deltas) instead
of failing every pass for every user. Before, one such frame stopped every rollup for good
(bigint out of range in each pass). The read side answers for both jobs, exactly."""

from __future__ import annotations

import asyncio
import socket

from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine
from tests.collector.test_ingest import T0
from tests.conftest import query

HUGE = (1 << 62) + 5  # within the wire's bound (2^63), but two of them overflow a bigint


def frame(job: str, seq: int, bytes_sent: int = 7, keys_dropped: int = 0, t0: int = T0) -> bytes:
    """Frame `seq` of rank 0 of `job`: `bytes_sent` to rank 1 in one message, all in the
    minute after `t0`, and `keys_dropped` in its health record."""
    tables = {"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": bytes_sent, "msgs_sent": 1}]),
              "health": wire.records("health", [{"keys_dropped": keys_dropped}])}  # fmt: skip
    return wire.encode_frame(job_id=job, world_rank=0, world_size=2, seq=seq,
                             interval_start_ns=t0 + seq * 10**9,
                             interval_end_ns=t0 + (seq + 1) * 10**9, token="secret",
                             tables=tables)  # fmt: skip


def stream(address, frames: list[bytes]) -> list[tuple[int, int]]:
    """Send `frames` on one connection, end it, read the acks until the collector closes."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(b"".join(frames))
        sock.shutdown(socket.SHUT_WR)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    return [wire.decode_ack(raw[i : i + wire.ACK_SIZE]) for i in range(0, len(raw), wire.ACK_SIZE)]


def test_a_poison_frame_is_refused_alone_and_the_rest_of_the_stream_is_stored(pg_url):
    committed, bad = wire.Status.COMMITTED, wire.Status.BAD_BODY
    with BackgroundCollector(pg_url, token="secret") as collector:
        # Frame 1's keys dropped, added to frame 0's in the rank's row, do not fit: it fails
        # on its own. The collector acks frame 0, refuses frame 1 and ends the connection;
        # the frames after it are stored, and their resend on a new connection is acked.
        poison = [frame("p", 0, keys_dropped=HUGE), frame("p", 1, keys_dropped=HUGE),
                  frame("p", 2), frame("p", 3)]  # fmt: skip
        acks = stream(collector.address, poison)
        resent = stream(collector.address, poison[2:])
        other = stream(collector.address, [frame("v", 0), frame("v", 1)])
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert acks == [(committed, 0), (bad, 1)]
    assert resent == [(committed, 2), (committed, 3)]
    assert other == [(committed, 0), (committed, 1)]
    assert rejected == {"bad_body": 1}
    stored = query(pg_url, "SELECT j.job_key, f.seq FROM received_frames f JOIN jobs j "
                   "ON j.id = f.job_id ORDER BY 1, 2")  # fmt: skip
    assert stored == [("p", 0), ("p", 2), ("p", 3), ("v", 0), ("v", 1)]
    assert query(pg_url, "SELECT keys_dropped FROM ranks r JOIN jobs j ON j.id = r.job_id "
                 "WHERE j.job_key = 'p'") == [(HUGE,)]  # fmt: skip


def test_sums_out_of_range_quarantine_their_run_s_rollups_and_every_other_run_is_rolled_up(
    pg_url, control_socket
):
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running:
        # Two frames of "poison" in one minute whose bytes to rank 1 sum past 2^63, and a
        # victim's job in the same minute.
        ok = [(wire.Status.COMMITTED, s) for s in range(3)]
        assert stream(running.address, [frame("poison", s, HUGE) for s in range(3)]) == ok
        assert stream(running.address, [frame("victim", s) for s in range(3)]) == ok

        def roll() -> int:
            future = running.service.roll_up_once()
            return asyncio.run_coroutine_threadsafe(future, running.loop).result(60)

        assert roll() > 0
        assert running.service.rollups_quarantined == 1
        assert roll() == 0  # a quarantined run is not tried again
        engine = make_engine(pg_url)
        app = create_app(engine, collector=running.link)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            answers = {job: client.get(f"/api/jobs/{job}") for job in ("poison", "victim")}
            matrix = client.get("/api/jobs/poison/matrix")
            overview = client.get("/api/overview")
            metrics = client.get("/metrics").text
        engine.dispose()
    # The victim's minute is rolled up; the poison's stays dirty, quarantined, read raw.
    rolled = query(pg_url, "SELECT j.job_key, sum(m.bytes_sent) FROM p2p_minutes m "
                   "JOIN jobs j ON j.id = m.job_id GROUP BY 1")  # fmt: skip
    assert rolled == [("victim", 21)]
    dirty = query(pg_url, "SELECT j.job_key, d.quarantined FROM rollup_dirty d "
                  "JOIN jobs j ON j.id = d.job_id")  # fmt: skip
    assert dirty == [("poison", True)]
    for response in (*answers.values(), matrix, overview):
        assert response.status_code == 200, response.text
    assert answers["victim"].json()["bytes_sent"] == 21
    assert answers["poison"].json()["bytes_sent"] == 3 * HUGE  # exact, from the raw deltas
    assert matrix.json()["cells"] == [{"src": 0, "dst": 1, "bytes": 3 * HUGE, "messages": 3}]
    assert "stacklens_rollups_quarantined_total 1.0" in metrics
