"""Counter semantics: words → bytes once, saturation flags, reset detection, unknown deltas."""

from __future__ import annotations

import numpy as np

from collector.fabric.counters import (
    FLAG_EXTENDED,
    PORT_COUNTERS,
    RESET_SHIFT,
    DeltaTracker,
    RawSweep,
    merge_sweeps,
)

XB = PORT_COUNTERS.index("xmit_bytes")
RB = PORT_COUNTERS.index("rcv_bytes")
XW = PORT_COUNTERS.index("xmit_wait")
SYM = PORT_COUNTERS.index("symbol_errors")


def sweep(rows: list[list[int]], extended: list[bool], t: int) -> RawSweep:
    """A two-port sweep from raw counter rows (data counters in words)."""
    n = len(rows)
    return RawSweep.from_words(
        guids=[0x10 + i for i in range(n)],
        ports=[1] * n,
        values=np.array(rows, dtype=np.uint64),
        extended=np.array(extended),
        answered=np.ones(n, dtype=bool),
        t_start_ns=t - 5,
        t_end_ns=t,
    )


def row(xmit_words=0, rcv_words=0, wait=0, sym=0) -> list[int]:
    r = [0] * len(PORT_COUNTERS)
    r[XB], r[RB], r[XW], r[SYM] = xmit_words, rcv_words, wait, sym
    return r


def test_words_become_bytes_once():
    s = sweep([row(xmit_words=1000, rcv_words=3)], [True], 100)
    assert s.value(0x10, 1, "xmit_bytes") == 4000
    assert s.value(0x10, 1, "rcv_bytes") == 12
    assert not s.saturated.any()


def test_unanswered_port_is_absent_not_zero():
    s = RawSweep.from_words(
        guids=[1, 2],
        ports=[1, 1],
        values=np.zeros((2, len(PORT_COUNTERS)), dtype=np.uint64),
        extended=np.array([True, True]),
        answered=np.array([True, False]),
        t_start_ns=0,
        t_end_ns=1,
    )
    assert len(s) == 1 and s.guids.tolist() == [1]


def test_32bit_saturation_is_flagged_only_for_basic_counters():
    full32 = 0xFFFFFFFF
    s = sweep(
        [row(xmit_words=full32, wait=full32, sym=0xFFFF), row(xmit_words=full32)], [False, True], 1
    )
    assert s.saturated[0, XB] and s.saturated[0, XW] and s.saturated[0, SYM]
    assert not s.saturated[1, XB]  # a 64-bit counter at 2^32-1 is just a value
    assert s.value(0x10, 1, "xmit_bytes") == full32 * 4


def test_deltas_first_unknown_then_exact():
    tr = DeltaTracker()
    d0 = tr.update(sweep([row(xmit_words=10)], [True], 1_000))
    assert d0.delta(0x10, 1, "xmit_bytes") is None
    assert d0.dt_ns.tolist() == [0]
    d1 = tr.update(sweep([row(xmit_words=35, sym=2)], [True], 3_000))
    assert d1.delta(0x10, 1, "xmit_bytes") == 100
    assert d1.delta(0x10, 1, "symbol_errors") == 2
    assert d1.dt_ns.tolist() == [2_000]
    assert d1.flags.tolist() == [FLAG_EXTENDED]


def test_decrease_is_a_reset_with_unknown_delta():
    tr = DeltaTracker()
    tr.update(sweep([row(xmit_words=500, rcv_words=7)], [True], 1))
    d = tr.update(sweep([row(xmit_words=20, rcv_words=9)], [True], 2))
    assert d.delta(0x10, 1, "xmit_bytes") is None
    assert d.delta(0x10, 1, "rcv_bytes") == 8
    assert d.flags[0] == FLAG_EXTENDED | (1 << (RESET_SHIFT + XB))


def test_saturated_delta_is_flagged_and_unknown():
    """A pegged counter no longer counts: its delta is unknown (never 0 ticks/s), flagged."""
    tr = DeltaTracker()
    tr.update(sweep([row(wait=0xFFFFFFF0, sym=7)], [False], 1))
    d = tr.update(sweep([row(wait=0xFFFFFFFF, sym=8)], [False], 2))
    assert d.delta(0x10, 1, "xmit_wait") is None and d.delta(0x10, 1, "symbol_errors") == 1
    assert d.flags[0] == 1 << XW
    d = tr.update(sweep([row(wait=0xFFFFFFFF, sym=8)], [False], 3))
    assert d.delta(0x10, 1, "xmit_wait") is None and d.flags[0] == 1 << XW
    assert d.delta(0x10, 1, "symbol_errors") == 0


def test_switch_between_basic_and_extended_gives_unknown_deltas():
    tr = DeltaTracker()
    tr.update(sweep([row(xmit_words=5)], [True], 1))
    d = tr.update(sweep([row(xmit_words=6)], [False], 2))
    assert not d.known.any()


def test_merged_sweeps_span_both_intervals_with_exact_totals():
    """A store behind merges a waiting sweep into the next (collector/fabric/writer.py): each
    port's sample spans both intervals and its deltas are their sums; a port with no base
    in the newer sweep, or none in the older, keeps the newer row as it is; a reset in the
    older interval leaves that counter unknown and flagged."""
    tr = DeltaTracker()
    tr.update(sweep([row(xmit_words=10, sym=1), row(xmit_words=7)], [True, True], 1_000))
    older = tr.update(sweep([row(xmit_words=35, sym=3), row(xmit_words=2)], [True, True], 3_000))
    # a third port appears in the newer sweep only (no base: dt 0)
    newer = tr.update(
        sweep([row(xmit_words=60, sym=4), row(xmit_words=9), row(xmit_words=5)], [True] * 3, 4_500)
    )
    merged = merge_sweeps(older, newer)
    assert merged.raw is newer.raw
    assert merged.delta(0x10, 1, "xmit_bytes") == (60 - 10) * 4
    assert merged.delta(0x10, 1, "symbol_errors") == 4 - 1
    assert merged.dt_ns.tolist() == [3_500, 3_500, 0]
    # port 0x11 was reset in the older interval (7 -> 2 words): unknown over both, flagged
    assert merged.delta(0x11, 1, "xmit_bytes") is None
    assert merged.flags[1] >> (RESET_SHIFT + XB) & 1 == 1
    assert merged.delta(0x12, 1, "xmit_bytes") is None  # no base: as in `newer`
    assert merged.flags.tolist()[2] == newer.flags.tolist()[2]
    # the tracker is untouched: its next delta is against the newer sweep's values
    assert tr.update(sweep([row(xmit_words=61)], [True], 5_000)).delta(0x10, 1, "xmit_bytes") == 4
