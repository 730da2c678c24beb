"""Binary COPY encoding: the bytes PostgreSQL expects, checked by loading them for real."""

from __future__ import annotations

import numpy as np
import psycopg

from collector.store.copy import COPY_SIGNATURE, COPY_TRAILER, binary_copy


def test_binary_copy_loads_exact_values(pg_server):
    payload = binary_copy(
        [
            ("int8", np.array([1, -2, 2**62], dtype=np.int64)),
            ("int4", np.array([7, 8, 2**31 - 1], dtype=np.int64)),
            ("int2", np.array([-1, 0, 300], dtype=np.int64)),
        ]
    )
    with psycopg.connect(pg_server) as conn:
        conn.execute("CREATE TEMP TABLE t (a bigint, b int, c smallint)")
        with conn.cursor().copy("COPY t FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(payload)
        rows = conn.execute("SELECT a, b, c FROM t ORDER BY b").fetchall()
    assert rows == [(1, 7, -1), (-2, 8, 0), (2**62, 2**31 - 1, 300)]


def test_null_masks_become_sql_nulls(pg_server):
    payload = binary_copy(
        [
            ("int4", np.array([1, 2, 3])),
            ("int8", np.array([10, 20, 30]), np.array([False, True, False])),
            ("int8", np.array([7, 8, 9]), np.array([True, True, False])),
        ]
    )
    with psycopg.connect(pg_server) as conn:
        conn.execute("CREATE TEMP TABLE n (a int, b bigint, c bigint)")
        with conn.cursor().copy("COPY n FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(payload)
        rows = conn.execute("SELECT a, b, c FROM n ORDER BY a").fetchall()
    assert rows == [(1, 10, None), (2, None, None), (3, 30, 9)]


def test_array_rows_from_frames_split_counts_beyond_int4(pg_server):
    """The compiled encoder writes one row per frame, p2p's fields packed into two arrays;
    a message count beyond int4 becomes several elements of the same peer whose sum is
    exact."""
    from collector import codec
    from collector.store.tables import DELTA_TABLES
    from stacklens import wire

    huge = 5 * (2**31 - 1) + 3
    records = wire.records("p2p", [
        {"peer": 1, "bytes_sent": 2**40, "msgs_sent": huge, "bytes_recv": 8, "msgs_recv": 2},
        {"peer": 2, "bytes_sent": 16, "msgs_sent": 1, "bytes_recv": 0, "msgs_recv": 0},
    ])  # fmt: skip
    raw = wire.encode_frame(
        job_id="j", world_rank=0, world_size=3, seq=0, interval_start_ns=10**18,
        interval_end_ns=10**18 + 1, tables={"p2p": records},
    )  # fmt: skip
    batch, error = codec.scan(raw, codec.limits("", 1 << 20))
    assert error is None and len(batch) == 1
    p2p = next(t for t in DELTA_TABLES if t.wire == "p2p")
    rows = b"".join(map(bytes, codec.encode_arrays(
        wire.SPEC.table("p2p").id, p2p.columns, codec.frame_addresses([batch]), batch.info,
        np.array([42]), np.array([7]), np.array([2]),
    )))  # fmt: skip
    with psycopg.connect(pg_server) as conn:
        conn.execute(
            "CREATE TEMP TABLE f (job_id bigint, run_id bigint, world_rank int, t_start_ns bigint, "
            "t_end_ns bigint, peer_msgs int[], bytes bigint[])"
        )
        with conn.cursor().copy("COPY f FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(COPY_SIGNATURE + rows + COPY_TRAILER)
        row = conn.execute("SELECT * FROM f").fetchone()
    assert row[:5] == (42, 7, 2, 10**18, 10**18 + 1)
    # packed (stacklens.schema.P2P_PACKED): peer, msgs_sent, msgs_recv; bytes_sent, bytes_recv
    peer, msgs_sent, msgs_recv = row[5][:7], row[5][7:14], row[5][14:]
    bytes_sent, bytes_recv = row[6][:7], row[6][7:]
    assert len(row[5]) == 21 and len(row[6]) == 14
    assert peer == [1] * 6 + [2]
    assert bytes_sent == [2**40, 0, 0, 0, 0, 0, 16]
    assert msgs_sent == [2**31 - 1] * 5 + [3, 1]
    assert bytes_recv == [8, 0, 0, 0, 0, 0, 0]
    assert msgs_recv == [2, 0, 0, 0, 0, 0, 0]


def test_array_rows_in_pieces_are_the_rows_whole():
    """Encoded in pieces (each whole rows, each overwriting the last), the rows are the
    same bytes as in one piece, whatever the piece size: smaller than one row (the buffer
    grows for it), one row, or all rows."""
    from collector import codec
    from collector.store.tables import DELTA_TABLES
    from stacklens import wire

    def records(r: int) -> np.ndarray:
        return wire.records("p2p", [
            {"peer": p, "bytes_sent": 100 * r + p, "msgs_sent": 2**31 + p if r == 3 else p,
             "bytes_recv": 1, "msgs_recv": 2} for p in range(4)
        ])  # fmt: skip

    raw = b"".join(
        wire.encode_frame(
            job_id="j",
            world_rank=r,
            world_size=4,
            seq=r,
            interval_start_ns=10**18,
            interval_end_ns=10**18 + 1,
            tables={"p2p": records(r)},
        )  # fmt: skip
        for r in range(4)
    )
    batch, error = codec.scan(raw, codec.limits("", 1 << 20))
    assert error is None and len(batch) == 4
    p2p = next(t for t in DELTA_TABLES if t.wire == "p2p")

    def pieces(size: int) -> list[bytes]:
        return [bytes(piece) for piece in codec.encode_arrays(
            wire.SPEC.table("p2p").id, p2p.columns, codec.frame_addresses([batch]), batch.info,
            np.arange(4), np.arange(4), np.arange(4), piece=size,
        )]  # fmt: skip

    whole = pieces(1 << 20)
    # a row of 4 records: 106 B of fields and array headers + 4 x (3 x 8 + 2 x 12) B; the
    # last frame's counts beyond int4 split each record in two: 8 elements
    assert [len(p) for p in whole] == [3 * 298 + 490]
    for size, lengths in ((16, [298, 298, 298, 490]), (298, [298, 298, 298, 490]),
                          (3 * 298 + 489, [3 * 298, 490])):  # fmt: skip
        parts = pieces(size)
        assert [len(p) for p in parts] == lengths
        assert b"".join(parts) == whole[0]
