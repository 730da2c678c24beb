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


def verdicts(tables: dict, frame_type=wire.FrameType.INTERVAL) -> tuple:
    """(compiled status, reference status) of one frame carrying `tables` (0 = valid)."""
    raw = wire.encode_frame(
        job_id="job-B", world_rank=0, world_size=4, seq=0, interval_start_ns=T0,
        interval_end_ns=T0 + 1, frame_type=frame_type, tables=tables,
    )  # fmt: skip
    _, error = codec.scan(raw, LIMITS)
    try:
        header = wire.decode_header(raw[: wire.HEADER_SIZE], 1 << 20)
        wire.check_header(header, "", now_ns=T0)
        wire.decode_body(header, raw[wire.HEADER_SIZE :])
        reference = 0
    except wire.FrameError as exc:
        reference = int(exc.status)
    return (0 if error is None else int(error.status)), reference


def test_overflow_records_are_valid_and_the_bounds_are_the_def_s():
    """The hooks' overflow records (one per op in coll: comm_id overflow_comm, size 0; one
    per I/O layer and phase: "<other>") pass both validators, which reject one step past
    each bound of stacklens_wire.def alike."""
    bounds, out = wire.BOUNDS, int(wire.Status.OUT_OF_RANGE)
    overflow = {"op_id": 5, "comm_id": bounds["overflow_comm"], "comm_size": 0,
                "root": bounds["no_rank"], "calls": 3}  # fmt: skip
    assert verdicts({"coll": wire.records("coll", [overflow])}) == (0, 0)
    assert verdicts({"coll": wire.records("coll", [{**overflow, "comm_id": 7}])}) == (out, out)
    for layer, phase in [(1, 0), (3, 1)]:
        other = {"layer": layer, "phase": phase, "path": b"<other>", "opens": 5000}
        assert verdicts({"io": wire.records("io", [other])}) == (0, 0)
    past = [
        ("io", {"layer": bounds["max_io_layer"] + 1}),
        ("io", {"layer": 1, "phase": bounds["max_io_phase"] + 1}),
        ("hist", {"bucket": bounds["max_bucket"] + 1}),
        ("p2p", {"peer": 1, "msgs_sent": 1 << bounds["max_msgs_bits"]}),
        ("op", {"op_id": 1, "calls": 1 << bounds["max_counter_bits"]}),
        ("coll", {**overflow, "comm_id": 1, "comm_size": bounds["max_world_size"] + 1}),
    ]
    for table, record in past:
        assert verdicts({table: wire.records(table, [record])}) == (out, out), table
    # Communicator descriptions and messages: valid, overflow, and one step past each bound.
    made = {"comm_id": 9, "made": 2, "comm_size": 2, "comm_rank": 1, "name": b"tp"}
    cp2p = {"comm_id": 9, "op_id": 3, "peer": 1, "msgs": 2, "bytes": 8}
    cp2p_overflow = {**cp2p, "comm_id": bounds["overflow_comm"], "peer": bounds["no_rank"]}
    for table, record in [("comm", made), ("comm_p2p", cp2p), ("comm_p2p", cp2p_overflow)]:
        assert verdicts({table: wire.records(table, [record])}) == (0, 0), table
    for table, record in [
        ("comm", {**made, "made": 0}),
        ("comm", {**made, "made": bounds["max_comm_made"] + 1}),
        ("comm", {**made, "comm_rank": 2}),
        ("comm", {**made, "comm_size": 0, "comm_rank": 0}),
        ("comm", {**made, "comm_id": bounds["overflow_comm"]}),
        ("comm_p2p", {**cp2p, "peer": 4}),
        ("comm_p2p", {**cp2p, "peer": bounds["no_rank"]}),
        ("comm_p2p", {**cp2p_overflow, "peer": 0}),
        ("comm_p2p", {**cp2p, "msgs": 1 << bounds["max_msgs_bits"]}),
        ("comm_p2p", {**cp2p, "op_id": 10_000}),
        ("comm_p2p", {**cp2p, "received": 2}),
    ]:
        assert verdicts({table: wire.records(table, [record])}) == (out, out), (table, record)
    # An aborted frame carries exactly one abort record, and only it does.
    abort = {"abort": wire.records("abort", [{"errorcode": 3}])}
    assert verdicts(abort, wire.FrameType.ABORTED) == (0, 0)
    assert verdicts({}, wire.FrameType.ABORTED) == (out, out)
    assert verdicts(abort, wire.FrameType.FINAL) == (out, out)


def test_site_symbols_in_launch_frames_only_with_a_known_quality():
    """Call sites resolved on a node (table site_symbol) travel in launch frames only, beside
    the launch record, with quality 1 (line) or 2 (function+offset): the compiled scanner
    and the reference decoder agree."""

    def launch(symbols: list[dict], frame_type=wire.FrameType.LAUNCH, record: bool = True):
        tables = {"site_symbol": wire.records("site_symbol", symbols)}
        if record:
            tables["launch"] = wire.records("launch", [{"command": b"mpirun"}])
        raw = wire.encode_frame(
            job_id="job-L", world_rank=0, world_size=1, seq=0, interval_start_ns=T0,
            interval_end_ns=T0 + 1, run_id=7, frame_type=frame_type, tables=tables,
        )  # fmt: skip
        _, error = codec.scan(raw, LIMITS)
        try:
            header = wire.decode_header(raw[: wire.HEADER_SIZE], 1 << 20)
            wire.decode_body(header, raw[wire.HEADER_SIZE :])
            reference = 0
        except wire.FrameError as exc:
            reference = int(exc.status)
        return (0 if error is None else int(error.status)), reference

    line = {"quality": 1, "line": 12, "site_offset": 0x1234, "build_id": b"ab" * 20,
            "function": b"solve", "file": b"/src/solver.c"}  # fmt: skip
    out = int(wire.Status.OUT_OF_RANGE)
    assert launch([line, {**line, "quality": 2, "line": 0, "file": b""}]) == (0, 0)
    assert launch([{**line, "quality": 3}]) == (out, out)
    assert launch([line], wire.FrameType.INTERVAL, record=False) == (out, out)
