"""Binary COPY encoding: the bytes PostgreSQL expects, checked by loading them for real."""

from __future__ import annotations

import numpy as np
import psycopg

from collector.store.copy import binary_copy


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


def test_array_columns_of_different_lengths(pg_server):
    payload = binary_copy(
        [
            ("int8", np.array([1, 2, 3])),
            ("int4[]", [np.array([5]), np.array([6, 7, -1]), np.array([2**31 - 1, 0])]),
            ("int8[]", [np.array([2**62]), np.array([0, 1, 2]), np.array([-5, 9])]),
            ("int2[]", [np.array([3]), np.array([1, 2, 3]), np.array([300, 4])]),
        ]
    )
    with psycopg.connect(pg_server) as conn:
        conn.execute("CREATE TEMP TABLE a (k bigint, x int[], y bigint[], z smallint[])")
        with conn.cursor().copy("COPY a FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(payload)
        rows = conn.execute("SELECT k, x, y, z FROM a ORDER BY k").fetchall()
    assert rows == [
        (1, [5], [2**62], [3]),
        (2, [6, 7, -1], [0, 1, 2], [1, 2, 3]),
        (3, [2**31 - 1, 0], [-5, 9], [300, 4]),
    ]
