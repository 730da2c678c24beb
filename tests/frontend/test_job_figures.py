"""The job page's pure figure builders: the timeline and the rank x time heat map draw
exactly the values of the API answers they are given."""

from __future__ import annotations

from presentation import figures
from stacklens.api_models import (
    HistoryRun,
    RankShare,
    RunHistory,
    Series,
    SeriesPoint,
    SlowRanks,
)

S = 10**9
T = 1_764_583_200 * S


def share(t_ns: int, rank: int, mpi: int, elapsed: int = S) -> RankShare:
    return RankShare(t_ns=t_ns, rank=rank, elapsed_ns=elapsed, mpi_ns={"mpi_coll": mpi},
                     io_ns=0, startup_ns=0, shutdown_ns=0, compute_ns=elapsed - mpi)  # fmt: skip


def test_the_heat_map_is_the_share_of_each_step_inside_mpi():
    profile = SlowRanks(job="j", from_ns=T, to_ns=T + 2 * S, step_ns=S, outliers=[],
                        imbalance=[], shares=[share(T, 0, S // 4), share(T, 1, S // 2),
                                              share(T + S, 1, S, elapsed=S)])  # fmt: skip
    heatmap = figures.rank_heatmap(profile).data[0]
    assert list(heatmap.y) == [0, 1]
    assert [list(row) for row in heatmap.z] == [[0.25, None], [0.5, 1.0]]
    assert heatmap.customdata[1][0].startswith("MPI 0.500 s, computation 0.500 s")


def test_the_timeline_stacks_time_and_bytes_per_category():
    points = [SeriesPoint(t_ns=T, key="mpi_p2p", values=[3, 300, S // 2]),
              SeriesPoint(t_ns=T + S, key="fs:POSIX", values=[1, 4096, S])]  # fmt: skip
    series = Series(job="j", by="category", from_ns=T, to_ns=T + 2 * S, step_ns=S,
                    metrics=["calls", "bytes", "time_ns"], points=points)  # fmt: skip
    traces = figures.timeline(series).data
    assert [(t.name, list(t.y)) for t in traces] == [
        ("point-to-point", [0.5]), ("point-to-point", [300]), ("fs:POSIX", [1.0]),
        ("fs:POSIX", [4096])
    ]  # fmt: skip


def test_empty_windows_say_so():
    empty = SlowRanks(job="j", from_ns=T, to_ns=T + S, step_ns=S, shares=[], outliers=[],
                      imbalance=[])  # fmt: skip
    assert figures.rank_heatmap(empty).layout.annotations[0].text == "Nothing in this window."


def _history(*starts_s: int) -> RunHistory:
    runs = [HistoryRun(job=f"j{i}", owner="alice", run=1, status="ended", started_ns=T + t * S,
                       elapsed_ns=(10 + i) * S, mpi_share=0.5, io_share=0.0, build_id="ab" * 20,
                       same_build=True, rebuilt=False)
            for i, t in enumerate(starts_s)]  # fmt: skip
    return RunHistory(command="./prog", world_size=2, build_id="ab" * 20, runs=runs[::-1])


def test_a_history_trend_spans_at_least_an_hour_around_its_runs():
    """A first run (or runs minutes apart) is drawn on an axis of an hour and a tenth more on
    each side, centred on the runs, not on an axis of milliseconds; a history over more
    than an hour spans its runs and a tenth more on each side."""
    half = figures.TREND_MIN_NS // 2 * 11 // 10 // S
    one = figures.history_trend(_history(0))
    assert list(one.layout.xaxis.range) == [figures._utc(T - half * S), figures._utc(T + half * S)]
    assert [(t.name, list(t.y)) for t in one.data] == [
        ("build abababababab", [10.0]), ("this run", [10.0])]  # fmt: skip
    close = figures.history_trend(_history(0, 600))
    assert list(close.layout.xaxis.range) == [figures._utc(T + (300 - half) * S),
                                              figures._utc(T + (300 + half) * S)]  # fmt: skip
    day = figures.history_trend(_history(0, 86_400))
    assert list(day.layout.xaxis.range) == [figures._utc(T - 4320 * S),
                                            figures._utc(T + (86_400 + 4320) * S)]  # fmt: skip


def test_a_bytes_axis_reads_in_binary_units():
    """Plotly's own ticks would write 1.9e9 bytes "2B" (a billion, read as two bytes): the
    bytes axes tick in binary units, in steps of 1, 2 or 5 of the largest unit below the top."""
    gib = figures.bytes_axis(1.9e9)
    assert gib["ticktext"] == ["0 B", "512 MiB", "1 GiB", "1.5 GiB", "2 GiB"]
    assert gib["tickvals"] == [0, 2**29, 2**30, 1.5 * 2**30, 2**31]
    mib = figures.bytes_axis(23 * 2**20, per_s=True)
    assert mib["ticktext"] == ["0 B/s", "5 MiB/s", "10 MiB/s", "15 MiB/s", "20 MiB/s", "25 MiB/s"]
    assert figures.bytes_axis(700)["ticktext"] == ["0 B", "200 B", "400 B", "600 B", "800 B"]
    assert figures.bytes_axis(0) == {}
    points = [SeriesPoint(t_ns=T, key="mpi_p2p", values=[3, 3 * 2**30, S // 2]),
              SeriesPoint(t_ns=T, key="mpi_coll", values=[1, 2**30, S // 2])]  # fmt: skip
    series = Series(job="j", by="category", from_ns=T, to_ns=T + S, step_ns=S,
                    metrics=["calls", "bytes", "time_ns"], points=points)  # fmt: skip
    axis = figures.timeline(series).layout.yaxis2  # the bytes of the stacked step: 4 GiB
    assert list(axis.ticktext) == ["0 B", "1 GiB", "2 GiB", "3 GiB", "4 GiB", "5 GiB"]
