"""The fabric detail panel's figure: a link's counters per step with its events marked."""

from __future__ import annotations

from presentation import figures
from stacklens.api_models import FabricEvent, FabricSeries

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _series() -> FabricSeries:
    return FabricSeries(
        subject="link", name="a[1] - b[2]", link_id=7, guid=None, port=None,
        capacity_bytes_per_s=4_000_000_000, from_ns=T0, to_ns=T0 + 4 * S, step_ns=S,
        resolution="samples", metrics=["a_to_b_bytes_per_s", "b_to_a_bytes_per_s",
                                       "symbol_errors", "rcv_errors", "xmit_wait_per_s"],
        t_ns=[T0, T0 + S, T0 + 3 * S],
        columns={"a_to_b_bytes_per_s": [1e9, None, 2e9], "b_to_a_bytes_per_s": [0.0, 5.0, 6.0],
                 "symbol_errors": [0, 3, None], "rcv_errors": [0, 1, None],
                 "xmit_wait_per_s": [0.0, 7.0, None]},
    )  # fmt: skip


def test_series_draws_both_ways_errors_and_marks_each_event():
    burst = FabricEvent(id=1, kind="error_burst", subject="a[1]", start_ns=T0 + S,
                        end_ns=T0 + 2 * S, link_id=7, details={})  # fmt: skip
    down = FabricEvent(id=2, kind="link_down", subject="a[1] - b[2]", start_ns=T0 + 3 * S,
                       end_ns=None, link_id=7, details={})  # fmt: skip
    fig = figures.fabric_series(_series(), [burst, down])
    traces = {t.name: list(t.y) for t in fig.data}
    assert traces == {
        "a → b": [1e9, None, 2e9],  # unknown stays a gap, never 0
        "b → a": [0.0, 5.0, 6.0],
        "errors": [0.0, 4.0, None],  # every error counter summed; none known: unknown
        "xmit wait/s": [0.0, 7.0, None],
    }
    # Each event a band over both panels (bytes/s, errors).
    bands = [(s.x0.timestamp(), s.x1.timestamp()) for s in fig.layout.shapes]
    assert (
        bands
        == [((T0 + S) / S, (T0 + 2 * S) / S)] * 2
        + [
            ((T0 + 3 * S) / S, (T0 + 4 * S) / S)  # still open: to the window's end
        ]
        * 2
    )
    assert [a.text for a in fig.layout.annotations if a.text in ("error_burst", "link_down")] == [
        "error_burst",
        "link_down",
    ]


def test_an_empty_window_says_so():
    empty = _series().model_copy(update={"t_ns": [], "columns": {}})
    fig = figures.fabric_series(empty, [])
    assert [a.text for a in fig.layout.annotations] == ["No sample in this window."]
