"""The wire format as Python reads it from the .def file: sizes, round trips, rejections."""

from __future__ import annotations

import numpy as np
import pytest

from stacklens import wire

T0 = 1_700_000_000_000_000_000


def test_layout_matches_the_c_structs():
    assert wire.HEADER_SIZE == 256
    assert wire.ACK_SIZE == 16
    sizes = {t.name: t.dtype.itemsize for t in wire.SPEC.tables.values()}
    assert sizes == {
        "rank_info": 760,
        "p2p": 40,
        "op": 32,
        "hist": 16,
        "coll": 40,
        "rma": 24,
        "io": 488,
        "health": 24,
        "hca": 136,
        "abort": 8,
        "monitored": 24,
        "comm": 272,
        "comm_p2p": 40,
        "callsite": 48,
        "callsite_frame": 328,
        "launch": 4624,
        "site_symbol": 840,
    }
    assert wire.Status.COMMITTED == 0 and wire.Status.BAD_TOKEN == 4


def test_frame_round_trip():
    p2p = wire.records("p2p", [{"peer": 1, "bytes_sent": 4096, "msgs_sent": 2}])
    raw = wire.encode_frame(
        job_id="job-1",
        world_rank=0,
        world_size=2,
        seq=7,
        interval_start_ns=T0,
        interval_end_ns=T0 + 10**9,
        host="node01",
        token="secret",
        tables={"p2p": p2p},
    )
    header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=1 << 20)
    wire.check_header(header, "secret", now_ns=T0)
    frame = wire.decode_body(header, raw[wire.HEADER_SIZE :])
    assert (header.job_id, header.host, header.seq, header.world_size) == ("job-1", "node01", 7, 2)
    assert frame.tables["p2p"]["bytes_sent"].tolist() == [4096]
    assert frame.tables["p2p"]["msgs_sent"].tolist() == [2]


def _header(**overrides):
    fields = dict(
        job_id="j",
        world_rank=0,
        world_size=2,
        seq=0,
        interval_start_ns=T0,
        interval_end_ns=T0 + 1,
        token="secret",
    )
    fields.update(overrides)
    raw = wire.encode_frame(**fields)
    return raw


@pytest.mark.parametrize(
    ("mutate", "status"),
    [
        (lambda raw: b"XXXX" + raw[4:], wire.Status.BAD_MAGIC),
        (lambda raw: raw[:4] + (9).to_bytes(2, "little") + raw[6:], wire.Status.BAD_VERSION),
        (lambda raw: raw[:8] + (1 << 30).to_bytes(4, "little") + raw[12:], wire.Status.BAD_LENGTH),
    ],
)
def test_header_rejections(mutate, status):
    raw = mutate(_header())
    with pytest.raises(wire.FrameError) as err:
        wire.decode_header(raw[: wire.HEADER_SIZE], max_body=1 << 20)
    assert err.value.status == status


@pytest.mark.parametrize(
    ("overrides", "token", "status"),
    [
        ({}, "other", wire.Status.BAD_TOKEN),
        ({"world_rank": 2}, "secret", wire.Status.OUT_OF_RANGE),
        ({"interval_end_ns": T0 - 1}, "secret", wire.Status.OUT_OF_RANGE),
        ({"interval_end_ns": T0 + 10**18}, "secret", wire.Status.OUT_OF_RANGE),
    ],
)
def test_check_rejections(overrides, token, status):
    raw = _header(**overrides)
    header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=1 << 20)
    with pytest.raises(wire.FrameError) as err:
        wire.check_header(header, token, now_ns=T0)
    assert err.value.status == status


def test_body_rejections():
    p2p = wire.records("p2p", [{"peer": 5}])
    raw = _header(tables={"p2p": p2p})
    header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=1 << 20)
    with pytest.raises(wire.FrameError) as err:
        wire.decode_body(header, raw[wire.HEADER_SIZE :])
    assert err.value.status == wire.Status.OUT_OF_RANGE
    with pytest.raises(wire.FrameError) as err:
        wire.decode_body(header, raw[wire.HEADER_SIZE : -1])
    assert err.value.status == wire.Status.BAD_LENGTH
    bad_op = _header(tables={"op": wire.records("op", [{"op_id": 10_000}])})
    bad_op_header = wire.decode_header(bad_op[: wire.HEADER_SIZE], max_body=1 << 20)
    with pytest.raises(wire.FrameError) as err:
        wire.decode_body(bad_op_header, bad_op[wire.HEADER_SIZE :])
    assert err.value.status == wire.Status.OUT_OF_RANGE
    bad_table = bytearray(raw[wire.HEADER_SIZE :])
    bad_table[0] = 99
    with pytest.raises(wire.FrameError) as err:
        wire.decode_body(header, bytes(bad_table))
    assert err.value.status == wire.Status.BAD_BODY


def test_ack_round_trip():
    assert wire.decode_ack(wire.encode_ack(wire.Status.BAD_TOKEN, 42)) == (4, 42)
    assert np.frombuffer(wire.encode_ack(0, 1)[:4], "<u4")[0] == wire.ACK_MAGIC
