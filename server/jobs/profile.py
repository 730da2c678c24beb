"""The slow rank, as pure functions of a job's per-rank series (no database here; the rows
come from server.jobs.series.profile_rows).

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stacklens.mpi_ops import CATEGORIES

#: How far above the median rank a rank must be to be named, as a ratio ...
OUTLIER_RATIO = 1.5
#: ... and in absolute time (noise of a few calls is not an outlier).
MIN_EXCESS_NS = 1_000_000
#: A median below this counts as this when a ratio is formed.
MEDIAN_FLOOR_NS = 1_000_000
#: Outliers and imbalances listed at most.
MAX_LISTED = 20

#: The MPI categories a step's MPI time is split into (start-up and file I/O apart).
MPI_CATEGORIES = tuple(c for c in CATEGORIES if c not in ("io", "mpi_startup"))
#: The ops of category mpi_startup that end a rank (the others start it).
SHUTDOWN_OPS = ("MPI_Finalize", "MPI_Abort")


@dataclass
class _Share:
    t_ns: int
    rank: int
    elapsed_ns: int = 0
    mpi_ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MPI_CATEGORIES, 0))
    io_ns: int = 0
    startup_ns: int = 0
    shutdown_ns: int = 0

    def answer(self) -> dict[str, Any]:
        busy = sum(self.mpi_ns.values()) + self.io_ns + self.shutdown_ns  # module doc
        return {
            "t_ns": self.t_ns, "rank": self.rank, "elapsed_ns": self.elapsed_ns,
            "mpi_ns": self.mpi_ns, "io_ns": self.io_ns, "startup_ns": self.startup_ns,
            "shutdown_ns": self.shutdown_ns, "compute_ns": max(0, self.elapsed_ns - busy),
        }  # fmt: skip


def shares(
    elapsed: Iterable[tuple[int, int, int]],
    op_rows: Iterable[tuple[int, int, str, str, int]],
    io_rows: Iterable[tuple[int, int, int]],
) -> list[dict[str, Any]]:
    """Per step and rank (by step, then rank): where its time went. `elapsed`: (step, rank,
    ns its intervals ending in the step cover); `op_rows`: (step,
    rank, op name, category, time_ns); `io_rows`: (step, rank, time_ns) of POSIX and
    stdio I/O. MPI-IO calls (category io) count as file I/O."""
    table: dict[tuple[int, int], _Share] = {}

    def share(t_ns: int, rank: int) -> _Share:
        return table.setdefault((t_ns, rank), _Share(t_ns, rank))

    for t_ns, rank, ns in elapsed:
        share(t_ns, rank).elapsed_ns += ns
    for t_ns, rank, op, category, ns in op_rows:
        s = share(t_ns, rank)
        if category == "mpi_startup":
            if op in SHUTDOWN_OPS:
                s.shutdown_ns += ns
            else:
                s.startup_ns += ns
        elif category == "io":
            s.io_ns += ns
        else:
            s.mpi_ns[category if category in s.mpi_ns else "other"] += ns
    for t_ns, rank, ns in io_rows:
        share(t_ns, rank).io_ns += ns
    return [table[key].answer() for key in sorted(table)]


def outliers(
    step_shares: Sequence[dict[str, Any]],
    op_rows: Iterable[tuple[int, int, str, str, int]],
    ranks: Sequence[int],
) -> list[dict[str, Any]]:
    """The ranks far above the median rank (module doc), worst ratio first: per MPI
    operation (from `op_rows`, start-up and shutdown left out), per MPI category, in file
    I/O and in computation (from `step_shares`). `ranks`: every rank of the scope (those
    without time in a place count as 0 there)."""
    # place -> step -> rank -> ns
    places: dict[str, dict[int, dict[int, int]]] = {}

    def add(place: str, t_ns: int, rank: int, ns: int) -> None:
        steps = places.setdefault(place, {}).setdefault(t_ns, {})
        steps[rank] = steps.get(rank, 0) + ns

    for t_ns, rank, op, category, ns in op_rows:
        if category != "mpi_startup":
            add(op, t_ns, rank, ns)
    for s in step_shares:
        for category, ns in s["mpi_ns"].items():
            add(category, s["t_ns"], s["rank"], ns)
        add("file I/O", s["t_ns"], s["rank"], s["io_ns"])
        add("computation", s["t_ns"], s["rank"], s["compute_ns"])
    found = []
    for place, steps in places.items():
        totals = dict.fromkeys(ranks, 0)
        for per_rank in steps.values():
            for rank, ns in per_rank.items():
                totals[rank] = totals.get(rank, 0) + ns
        if len(totals) < 2:
            continue
        median = int(statistics.median(totals.values()))
        for rank, ns in totals.items():
            ratio = ns / max(median, MEDIAN_FLOOR_NS)
            if ratio >= OUTLIER_RATIO and ns - median >= MIN_EXCESS_NS:
                found.append(_outlier(place, rank, ns, median, ratio, steps))
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
