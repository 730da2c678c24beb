"""The job page's pure figure builders: the timeline and the rank x time heat map draw
exactly the values of the API answers they are given."""

from __future__ import annotations

from presentation import figures
from stacklens.api_models import RankShare, Series, SeriesPoint, SlowRanks

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
