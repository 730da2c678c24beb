"""Fuzzing the frame parsers and the live collector with random and mutated frames.

Every input must either be accepted as a well-formed frame or rejected with a FrameError
(never another exception), and the collector's compiled scanner (collector/codec.py) must
reach the same verdict, status for status, as the reference decoder (stacklens/wire.py);
the live collector must keep serving, answer each bad frame with a reject status, and
store exactly the frames it acknowledged.
"""

from __future__ import annotations

import socket
import time

import numpy as np

from collector import codec
from stacklens import wire
from tests.conftest import query

T0 = 1_700_000_000_000_000_000
MAX_BODY = 1 << 16


def valid_frame(rng: np.random.Generator, job: str = "fuzz") -> bytes:
    """A random well-formed frame with a few random tables."""
    size = int(rng.integers(1, 9))
    tables = {}
    if rng.random() < 0.8:
        p2p = np.zeros(int(rng.integers(0, size)), dtype=wire.SPEC.table("p2p").dtype)
        p2p["peer"] = rng.integers(0, size, len(p2p))
        p2p["bytes_sent"] = rng.integers(0, 1 << 40, len(p2p))
        p2p["msgs_sent"] = rng.integers(0, 1000, len(p2p))
        tables["p2p"] = p2p
    if rng.random() < 0.5:
        op = np.zeros(int(rng.integers(0, 4)), dtype=wire.SPEC.table("op").dtype)
        op["op_id"] = rng.integers(0, 8, len(op))
        op["calls"] = rng.integers(0, 100, len(op))
        tables["op"] = op
    if rng.random() < 0.2:
        tables["io"] = wire.records("io", [{"layer": 1, "path": b"/f", "bytes_read": 7}])
    seq = int(rng.integers(0, 1 << 20))
    return wire.encode_frame(
        job_id=job, world_rank=int(rng.integers(0, size)), world_size=size, seq=seq,
        interval_start_ns=T0 + seq, interval_end_ns=T0 + seq + 10, token="secret",
        tables=tables,
    )  # fmt: skip


def mutate(rng: np.random.Generator, raw: bytes) -> bytes:
    """One random mutation: bit flips, truncation, insertion, a header field, noise, or
    bytes in an id."""
    data = bytearray(raw)
    kind = int(rng.integers(0, 7))
    if kind == 0:
        for _ in range(int(rng.integers(1, 8))):
            i = int(rng.integers(0, len(data)))
            data[i] ^= 1 << int(rng.integers(0, 8))
    elif kind == 1:
        del data[int(rng.integers(0, len(data))) :]
    elif kind == 2:
        i = int(rng.integers(0, len(data)))
        data[i:i] = rng.bytes(int(rng.integers(1, 64)))
    elif kind == 3:  # a plausible but wrong header field
        offset = int(rng.choice([4, 6, 8, 12, 16, 24, 32, 40]))
        data[offset : offset + 4] = rng.bytes(4)
    elif kind == 4:  # a section header inside the body
        if len(data) > wire.HEADER_SIZE + 8:
            data[wire.HEADER_SIZE : wire.HEADER_SIZE + 8] = rng.bytes(8)
    elif kind == 5:
        data = bytearray(rng.bytes(int(rng.integers(0, 600))))
    else:  # an id (job id or host) with bytes that may break the id rule
        field = str(rng.choice(["job_id", "host"]))
        offset = wire.HEADER_DTYPE.fields[field][1] + int(rng.integers(0, 8))
        data[offset : offset + 3] = bytes(rng.choice(_ID_BYTES, 3))
    return bytes(data)


#: Bytes that make or break UTF-8 and the id rule: ASCII, controls, DEL, lead and
#: continuation bytes, overlong and surrogate leads, NUL.
_ID_BYTES = np.array([0x41, 0x7A, 0x00, 0x0A, 0x1F, 0x7F, 0x80, 0x85, 0xA0, 0xBF, 0xC0, 0xC2,
                      0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF], dtype=np.uint8)  # fmt: skip


def parse(raw: bytes, whole: bool = True, now_ns: int = T0) -> wire.Frame:
    """Everything the collector does with a frame's bytes before storing it.

    With `whole`, bytes after the frame are an error (the parser test feeds one frame).
    """
    header = wire.decode_header(raw[: wire.HEADER_SIZE], MAX_BODY)
    wire.check_header(header, "secret", now_ns=now_ns)
    body = raw[wire.HEADER_SIZE : wire.HEADER_SIZE + header.body_len]
    frame = wire.decode_body(header, body)
    if whole and len(raw) != wire.HEADER_SIZE + header.body_len:
        raise wire.FrameError(wire.Status.BAD_LENGTH, "trailing bytes")
    return frame


def scan_verdict(raw: bytes, limits: codec.Limits) -> tuple[wire.Status, np.ndarray | None]:
    """What the compiled scanner makes of `raw` as one whole frame: a status, and the
    frame's record when accepted (a frame followed by more bytes is BAD_LENGTH, as above)."""
    batch, error = codec.scan(raw, limits)
    if len(batch):
        whole = int(batch.info["length"][0]) == len(raw)
        return (wire.Status.COMMITTED, batch.info[0]) if whole else (wire.Status.BAD_LENGTH, None)
    return (error.status if error is not None else wire.Status.BAD_LENGTH), None


def test_parsers_agree_on_100k_random_and_mutated_frames():
    rng = np.random.default_rng(20261129)
    limits = codec.limits("secret", MAX_BODY, now_ns=T0)
    accepted = rejected = 0
    for _ in range(100_000):
        raw = mutate(rng, valid_frame(rng)) if rng.random() < 0.9 else valid_frame(rng)
        status, info = scan_verdict(raw, limits)
        try:
            frame = parse(raw)
        except wire.FrameError as error:
            assert error.status != wire.Status.COMMITTED and error.reason
            assert status == error.status, (error.reason, raw.hex())
            rejected += 1
            continue
        assert status == wire.Status.COMMITTED, raw.hex()
        h = frame.header
        job = info["job"].decode("utf-8", "replace")
        assert (job, int(info["world_rank"]), int(info["seq"])) == (h.job_id, h.world_rank, h.seq)
        assert info["count"][wire.SPEC.table("p2p").id] == len(frame.tables.get("p2p", ()))
        accepted += 1
        # An accepted frame re-encodes to exactly the bytes that were parsed.
        again = wire.encode_frame(
            job_id=h.job_id, world_rank=h.world_rank, world_size=h.world_size, seq=h.seq,
            host=h.host, pid=h.pid, interval_start_ns=h.interval_start_ns,
            interval_end_ns=h.interval_end_ns, token="secret", frame_type=h.frame_type,
            tables=frame.tables,
        )  # fmt: skip
        assert len(again) == len(raw)
    assert accepted > 10_000 and rejected > 60_000


def test_live_collector_stores_exactly_what_it_acknowledged(collector, pg_url):
    rng = np.random.default_rng(7)
    acknowledged: dict[tuple[int, int], int] = {}
    for i in range(1500):
        raw = valid_frame(rng, job=f"fuzz-{i % 7}")
        if rng.random() < 0.7:
            raw = mutate(rng, raw)
        with socket.create_connection(collector.address, timeout=10) as sock:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := sock.recv(64):
                reply += chunk
        if len(reply) < wire.ACK_SIZE:
            continue  # truncated frames get no answer
        status, _ = wire.decode_ack(reply[: wire.ACK_SIZE])
        if status == wire.Status.COMMITTED:
            # What follows the frame is another frame; the collector checks against real time.
            frame = parse(raw, whole=False, now_ns=time.time_ns())
            key = (frame.header.job_id, frame.header.world_rank, frame.header.seq)
            p2p = frame.tables.get("p2p")
            acknowledged.setdefault(key, int(p2p["bytes_sent"].sum()) if p2p is not None else 0)
    stored = query(
        pg_url,
        "SELECT job_key, world_rank, seq FROM received_frames JOIN jobs ON jobs.id = job_id",
    )
    assert {tuple(row) for row in stored} == set(acknowledged)
    assert query(pg_url, "SELECT coalesce(sum(bytes_sent), 0) FROM p2p_deltas") == [
        (sum(acknowledged.values()),)
    ]
    assert collector.call(lambda: collector.service.writer.stats.write_errors) == 0
