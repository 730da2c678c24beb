"""The compiled scanner on whole receive buffers: many frames, a partial tail, a bad frame."""

from __future__ import annotations

from collector import codec
from stacklens import wire

T0 = 1_700_000_000_000_000_000


def frame(seq: int, peers: int = 1, job: str = "job-C") -> bytes:
    p2p = wire.records("p2p", [{"peer": p % 4, "bytes_sent": seq} for p in range(peers)])
    return wire.encode_frame(
        job_id=job, world_rank=seq % 4, world_size=4, seq=seq, interval_start_ns=T0,
        interval_end_ns=T0 + 1, tables={"p2p": p2p},
    )  # fmt: skip


LIMITS = codec.limits("", 1 << 20, now_ns=T0)


def test_a_buffer_of_more_frames_than_one_call_holds():
    frames = [frame(s, peers=s % 3) for s in range(600)]
    data = b"".join(frames)
    batch, error = codec.scan(data, LIMITS)
    assert error is None and len(batch.data) == len(data)
    assert batch.info["seq"].tolist() == list(range(600))
    starts = [sum(len(f) for f in frames[:i]) for i in range(600)]
    assert batch.info["offset"].tolist() == starts
    assert batch.info["count"][:, wire.SPEC.table("p2p").id].tolist() == [s % 3 for s in range(600)]
    assert batch.records(599, "p2p")["bytes_sent"].tolist() == [599, 599]
    assert set(batch.info["job"].tolist()) == {b"job-C"}


def test_an_incomplete_tail_waits_and_a_bad_frame_stops_the_scan():
    good = frame(0) + frame(1)
    batch, error = codec.scan(good + frame(2)[:-3], LIMITS)
    assert (len(batch), len(batch.data), error) == (2, len(good), None)

    bad = bytearray(frame(3))
    bad[0] ^= 0xFF  # the magic
    batch, error = codec.scan(good + bytes(bad), LIMITS)
    assert (len(batch), len(batch.data)) == (2, len(good))
    assert error is not None and error.status == wire.Status.BAD_MAGIC and error.seq is None
    assert "bad magic" in error.reason

    batch, error = codec.scan(good + frame(4, job=""), LIMITS)
    assert len(batch) == 2
    assert (error.status, error.seq, error.reason) == (wire.Status.OUT_OF_RANGE, 4, "empty job id")
