"""The slow rank, as pure functions of a job's per-rank sums (no database here; the sums
come from server.jobs.series.profile_rows, which makes the per-rank shares in the database
with stacklens.mpi_ops.op_class).

Per rank and step: time inside MPI per traffic category, time in file I/O, start-up
(MPI_Init*) and shutdown (MPI_Finalize, MPI_Abort) apart, and the rest: computation =
elapsed - MPI - file I/O - shutdown. Start-up is not taken from the elapsed time: the hooks
start a rank's first interval once MPI_Init has returned, so the time inside it lies
before the rank's intervals (it is reported with the first one). Time inside a call is
counted when the call returns (the hooks add it then), so a long wait lands in the step it
ended in; where a step's parts exceed its elapsed time, computation is 0.

Outliers: for each place time can go (each MPI operation, each category, file I/O,
computation), the ranks whose time over the window is at least OUTLIER_RATIO times the
median rank's and MIN_EXCESS_NS above it. Collective imbalance: per communicator and op,
how unevenly the ranks' time inside was spread; the rank with the least time inside a
collective is the last to arrive (the others wait for it inside the call).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: How far above the median rank a rank must be to be named, as a ratio ...
OUTLIER_RATIO = 1.5
#: ... and in absolute time (noise of a few calls is not an outlier).
MIN_EXCESS_NS = 1_000_000
#: A median below this counts as this when a ratio is formed.
MEDIAN_FLOOR_NS = 1_000_000
#: Outliers and imbalances listed at most.
MAX_LISTED = 20

#: The places of a share that are not MPI categories, as outliers name them.
FILE_IO, COMPUTATION = "file I/O", "computation"


def outliers(
    totals: dict[str, dict[int, int]],
    ranks: Sequence[int],
    steps_of: Callable[[list[str]], dict[str, dict[int, dict[int, int]]]],
) -> list[dict[str, Any]]:
    """The ranks far above the median rank (module doc), worst ratio first. `totals`: per
    place (an MPI operation other than start-up and shutdown, an MPI category, FILE_IO,
    COMPUTATION), the time of each rank over the window; `ranks`: every rank of the scope
    (those without time in a place count as 0 there); `steps_of(places)`: each place's
    time per step and rank (the ranks with time there in the step), asked once, only for
    the places with an outlier, to name the step where the rank was furthest above that
    step's median."""
    named = []
    for place, per_rank in totals.items():
        everyone = dict.fromkeys(ranks, 0)
        everyone.update(per_rank)
        if len(everyone) < 2:
            continue
        median = int(statistics.median(everyone.values()))
        for rank, ns in everyone.items():
            ratio = ns / max(median, MEDIAN_FLOOR_NS)
            if ratio >= OUTLIER_RATIO and ns - median >= MIN_EXCESS_NS:
                named.append((place, rank, ns, median, ratio))
    if not named:
        return []
    steps = steps_of(sorted({place for place, *_ in named}))
    found = [_outlier(*o, steps[o[0]]) for o in named]
    found.sort(key=lambda o: (-o["ratio"], o["rank"], o["what"]))
    return found[:MAX_LISTED]


def _outlier(place: str, rank: int, ns: int, median: int, ratio: float,
             steps: dict[int, dict[int, int]]) -> dict[str, Any]:  # fmt: skip
    def excess(t_ns: int) -> int:
        per_rank = steps[t_ns]
        return per_rank.get(rank, 0) - int(statistics.median(per_rank.values()))

    peak = max(sorted(steps), key=excess)
    if median >= MEDIAN_FLOOR_NS:
        text = (
            f"rank {rank}: {ratio:.1f}× the median time in {place} "
            f"({_seconds(ns)} against {_seconds(median)})"
        )
    else:
        text = f"rank {rank}: {_seconds(ns)} in {place}; the median rank: {_seconds(median)}"
    return {
        "rank": rank, "what": place, "time_ns": ns, "median_ns": median,
        "ratio": round(ratio, 3), "peak_t_ns": peak, "text": text,
    }  # fmt: skip


def imbalance(coll_rows: Iterable[tuple[int, int, str, int, int]]) -> list[dict[str, Any]]:
    """Per communicator and collective op with two or more ranks: least, median and most
    time inside over its ranks, widest spread first. `coll_rows`: (comm_id, comm_size, op,
    rank, time_ns) summed over the window."""
    groups: dict[tuple[int, int, str], dict[int, int]] = {}
    for comm_id, comm_size, op, rank, ns in coll_rows:
        per_rank = groups.setdefault((comm_id, comm_size, op), {})
        per_rank[rank] = per_rank.get(rank, 0) + ns
    found: list[tuple[int, dict[str, Any]]] = []
    for (comm_id, comm_size, op), per_rank in groups.items():
        if len(per_rank) < 2:
            continue
        low = min(per_rank, key=lambda r: (per_rank[r], r))
        high = max(per_rank, key=lambda r: (per_rank[r], -r))
        median = int(statistics.median(per_rank.values()))
        found.append((per_rank[high] - per_rank[low], {
            "comm_id": comm_id, "comm_size": comm_size, "op": op, "ranks": len(per_rank),
            "min_ns": per_rank[low], "median_ns": median, "max_ns": per_rank[high],
            "max_rank": high, "min_rank": low,
            "text": f"{op} on communicator {comm_id} ({comm_size} ranks): rank {low} spent "
                    f"the least time inside ({_seconds(per_rank[low])}, median "
                    f"{_seconds(median)}): it is the last to arrive; rank {high} waited "
                    f"longest ({_seconds(per_rank[high])})",
        }))  # fmt: skip
    found.sort(key=lambda g: (-g[0], g[1]["comm_id"], g[1]["op"]))
    return [g for _, g in found[:MAX_LISTED]]


def _seconds(ns: int) -> str:
    """A duration in words: "2.31 s", "812 ms", "40 µs"."""
    if ns >= 10**9:
        return f"{ns / 10**9:.2f} s"
    if ns >= 10**6:
        return f"{ns / 10**6:.0f} ms"
    return f"{ns / 10**3:.0f} µs"
