"""The late rank and the ranks that wait for it, as pure functions of a job's per-rank sums
(no database here; the sums come from server.jobs.series.profile_rows, which makes the
per-rank shares in the database with stacklens.mpi_ops.op_class). The job API's profile,
the job page (its outlier lines and heat map), the job report's findings and the
incidents' ranks all take their slow ranks from `slow_ranks`: one rule, one wording.

Per rank and step: time inside MPI per traffic category, time in file I/O, start-up
(MPI_Init*) and shutdown (MPI_Finalize, MPI_Abort) apart, and the rest: computation =
elapsed - MPI - file I/O - shutdown. Start-up is not taken from the elapsed time: the hooks
start a rank's first interval once MPI_Init has returned, so the time inside it lies
before the rank's intervals (it is reported with the first one). Time inside a call is
counted when the call returns (the hooks add it then), so a long wait lands in the step it
ended in; where a step's parts exceed its elapsed time, computation is 0.

Late and waiting (docs/design.md, "Late rank, waiting ranks"). Over the window each rank's
time *inside* MPI (every MPI category, start-up and shutdown apart: measured call by call)
and *outside* it (the time its intervals cover in the window, from its first interval
start to its last end, minus inside and shutdown: computation and file I/O; the steps'
clamped computation is not summed, as a call that returns in a later step than it began
would skew it) is set against the median of the *other* ranks'. A rank stands out when
its excess over that median is
- at least MIN_SHARE of the window's elapsed time (the median rank's) and at least
  MIN_EXCESS_NS (50 ms: a few scheduler time slices), and
- more than SPREAD times the other ranks' spread (their median absolute deviation),
so noise of a balanced code (a few ms, or ranks taking turns at waiting on an
oversubscribed node) names nobody. A rank that stands out outside MPI is *late*: it
computes (or does file I/O, when that is at least half its excess) while the others wait
for it; it is named first, with the call it arrives last at (the blocking operation, by
the spec's waits= key, where the other ranks' median time inside exceeds its own the most)
and the ranks that wait for it there (at least the threshold longer inside that call than
it). A rank that stands out inside MPI is *waiting*: named with the blocking operation
holding most of its excess (any operation if it called none) and the late ranks it waits
for (those that name it among their waiting ranks); with no late rank, the time goes in
the communication itself.

Collective imbalance: per communicator and op, the least, median and most time inside over
its ranks, listed when the rank with the least is a late rank and stands out below the
others by the same test: it arrives last at that collective (the others wait for it
inside the call). In a balanced code the ranks take turns at waiting in one call or
another (an oversubscribed node), which is no imbalance.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from presentation.formatting import communicator_label
from stacklens.constants import OVERFLOW_COMM_ID
from stacklens.mpi_ops import op_names, op_waits

#: A rank's excess over the other ranks' median must be at least this share of the
#: window's elapsed time (a rank that costs the others less than this is not a finding) ...
MIN_SHARE = 0.05
#: ... at least this long: a rank the scheduler leaves out for a few time slices on a loaded
#: node (2-rank runs of 2-31 ms named a rank late by 1-24 ms; in CI 16 ms of 90 ms, 11 ms
#: of 280 ms) is no finding, so a short balanced run names nobody ...
MIN_EXCESS_NS = 50_000_000
#: ... and more than this many times the other ranks' median absolute deviation.
SPREAD = 4
#: Outliers and imbalances listed at most.
MAX_LISTED = 20

#: The roles of a rank that stands out.
LATE, WAITING = "late", "waiting"
#: The places of slow_ranks' `places` besides the MPI categories: the time a rank's
#: intervals cover, its file I/O and its time inside MPI_Finalize / MPI_Abort.
ELAPSED, FILE_IO, SHUTDOWN = "elapsed", "file I/O", "shutdown"
#: Where a late rank's excess lies besides file I/O; where a waiting rank's lies.
COMPUTATION, INSIDE = "computation", "inside MPI"


def threshold_ns(elapsed: dict[int, int]) -> int:
    """The least excess that can name a rank in a window whose ranks' elapsed times are
    `elapsed` (rank -> ns): MIN_SHARE of their median, at least MIN_EXCESS_NS."""
    median = statistics.median(elapsed.values()) if elapsed else 0
    return max(int(MIN_SHARE * median), MIN_EXCESS_NS)


def stands_out(value: int, others: Sequence[int], floor_ns: int) -> tuple[bool, int]:
    """Whether `value` exceeds the median of `others` by at least `floor_ns` and by more
    than SPREAD times their median absolute deviation; and that median."""
    median = int(statistics.median(others))
    spread = statistics.median(abs(v - median) for v in others)
    excess = value - median
    return excess >= floor_ns and excess > SPREAD * spread, median


def slow_ranks(
    ranks: Sequence[int],
    places: dict[str, dict[int, int]],
    ops: dict[str, dict[int, int]],
    coll: Iterable[tuple[int, int, str, int, int]],
    steps_of: Callable[[], dict[int, dict[int, int]]],
    site_of: Callable[[str, list[int]], dict[str, Any] | None] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The late and waiting ranks (late first, each by excess, most first) and the
    collective imbalances of a window (module doc). `ranks`: every rank of the scope (those
    with an elapsed time in the window are judged; one without time in a place counts 0
    there); `places`: per rank over the window, ELAPSED (the time its intervals cover),
    time inside each MPI category (start-up and shutdown apart), FILE_IO and SHUTDOWN;
    `ops`: per MPI operation (start-up and shutdown apart) each rank's time inside; `coll`:
    (comm_id, comm_size, op, rank, time_ns) per collective; `steps_of()`: each rank's time
    inside MPI per step (step -> rank -> ns), asked only when a rank is named, for the step
    in which it stood out most; `site_of(op, ranks)`, when given, the call site of `op`
    where those ranks spent the most time (server/callsites/summary.py's site_of): a late
    rank's op at the site its waiters wait at, a waiting rank's at its own."""
    spans = places.get(ELAPSED, {})
    ranks = [r for r in ranks if spans.get(r)]  # those with intervals in the window
    floor = threshold_ns({r: spans[r] for r in ranks})
    elapsed = statistics.median(spans[r] for r in ranks) if ranks else 0

    def of(place: dict[int, int]) -> dict[int, int]:
        return {r: place.get(r, 0) for r in ranks}

    categories = [p for p in places if p not in (ELAPSED, FILE_IO, SHUTDOWN)]
    inside = {r: sum(places[p].get(r, 0) for p in categories) for r in ranks}
    shutdown, io = of(places.get(SHUTDOWN, {})), of(places.get(FILE_IO, {}))
    outside = {r: max(0, spans[r] - inside[r] - shutdown[r]) for r in ranks}
    per_op = {op: of(per_rank) for op, per_rank in ops.items()}
    blocking = {op: t for op, t in per_op.items() if op in _waiting_ops()}

    named: list[dict[str, Any]] = []
    if len(ranks) >= 2:
        for role, times in ((LATE, outside), (WAITING, inside)):
            for rank in ranks:
                others = [times[r] for r in ranks if r != rank]
                out, median = stands_out(times[rank], others, floor)
                if out:
                    named.append({"rank": rank, "role": role, "time_ns": times[rank],
                                  "median_ns": median})  # fmt: skip
    late = [n for n in named if n["role"] == LATE]
    for n in late:
        rank = n["rank"]
        more_io = io[rank] - _median_of_others(io, rank, ranks)
        n["what"] = FILE_IO if 2 * more_io >= n["time_ns"] - n["median_ns"] else COMPUTATION
        n["op"], n["ranks"] = _arrives_last_at(rank, blocking, ranks, floor)
    for n in named:
        if n["role"] == WAITING:
            excess = {op: t[n["rank"]] - _median_of_others(t, n["rank"], ranks)
                      for op, t in (blocking or per_op).items()}  # fmt: skip
            n["what"] = INSIDE
            n["op"] = max(sorted(excess), key=lambda op: excess[op]) if excess else None
            n["ranks"] = sorted(m["rank"] for m in late if n["rank"] in m["ranks"])
    for n in named:
        n["site"] = None
        if site_of is not None and n["op"]:
            wait_at = n["ranks"] if n["role"] == LATE and n["ranks"] else [n["rank"]]
            n["site"] = site_of(n["op"], wait_at)
    if named:
        steps = steps_of()
        for n in named:
            n["peak_t_ns"] = _peak(steps, n["rank"], -1 if n["role"] == LATE else 1)
    found = [_outlier(n, elapsed) for n in named]
    found.sort(key=lambda o: (o["role"] != LATE, -o["excess_ns"], o["rank"]))
    late_ranks = {n["rank"] for n in late}
    return {"outliers": found[:MAX_LISTED], "imbalance": imbalance(coll, floor, late_ranks)}


@cache
def _waiting_ops() -> frozenset[str]:
    """The names of the MPI operations that block (the spec's waits= key)."""
    return frozenset(n for n, w in zip(op_names(), op_waits(), strict=True) if w)


def _median_of_others(times: dict[int, int], rank: int, ranks: Sequence[int]) -> int:
    return int(statistics.median(times[r] for r in ranks if r != rank))


def _arrives_last_at(
    rank: int, per_op: dict[str, dict[int, int]], ranks: Sequence[int], floor: int
) -> tuple[str | None, list[int]]:
    """The operation a late rank arrives last at (the one where the other ranks' median
    time inside exceeds its own the most; None if there is none) and the ranks that wait
    for it there (at least `floor` longer inside it than the late rank)."""
    lead = {op: _median_of_others(t, rank, ranks) - t[rank] for op, t in per_op.items()}
    lead = {op: ns for op, ns in lead.items() if ns > 0}
    if not lead:
        return None, []
    op = max(sorted(lead), key=lambda o: lead[o])
    times = per_op[op]
    return op, [r for r in ranks if r != rank and times[r] - times[rank] >= floor]


def _peak(steps: dict[int, dict[int, int]], rank: int, sign: int) -> int | None:
    """The step in which `rank`'s time inside MPI was furthest above (sign 1) or below
    (sign -1) the median of the other ranks' there; None when no step holds a share (the
    ranks' intervals stored no MPI call or file I/O: a rank named by its span alone)."""
    if not steps:
        return None

    def excess(t_ns: int) -> int:
        others = [ns for r, ns in steps[t_ns].items() if r != rank]
        own = steps[t_ns].get(rank, 0)
        return sign * (own - int(statistics.median(others))) if others else 0

    return max(sorted(steps), key=excess)


def _outlier(n: dict[str, Any], elapsed: float) -> dict[str, Any]:
    """A named rank as the API's Outlier, with its sentence."""
    rank, excess = n["rank"], n["time_ns"] - n["median_ns"]
    share = excess / elapsed if elapsed else 0.0
    amount = f"{_seconds(excess)} more"
    of_time = f"{share:.0%} of the elapsed time"
    if n["role"] == LATE:
        doing = "computing" if n["what"] == COMPUTATION else "in file I/O"
        at = f" in {n['site']['label']}" if n["site"] else ""
        head = f"rank {rank} arrives last at {n['op']}{at}" if n["op"] else f"rank {rank} is late"
        wait = (f"{_ranks(n['ranks'])} wait{'' if len(n['ranks']) > 1 else 's'} for it"
                if n["ranks"] else "no rank waits for it inside MPI")  # fmt: skip
        text = f"{head}: {amount} {doing} than the median rank ({of_time}); {wait}"
    else:
        at = f" at {n['site']['label']}" if n["site"] else ""
        most = f", most in {n['op']}{at}" if n["op"] else ""
        if n["ranks"]:
            text = (f"rank {rank} waits for {_ranks(n['ranks'])} (late): {amount} inside "
                    f"MPI than the median rank ({of_time}){most}")  # fmt: skip
        else:
            text = (f"rank {rank} waits inside MPI: {amount} than the median rank "
                    f"({of_time}){most}; no rank is late: the time goes in the "
                    "communication itself")  # fmt: skip
    return {
        "rank": rank, "role": n["role"], "what": n["what"],
        "time_ns": n["time_ns"], "median_ns": n["median_ns"], "excess_ns": excess,
        "share": round(share, 4), "op": n["op"], "ranks": n["ranks"],
        "peak_t_ns": n["peak_t_ns"], "text": text,
        "site": n["site"]["label"] if n["site"] else None,
        "site_key": n["site"]["key"] if n["site"] else None,
    }  # fmt: skip


def imbalance(coll_rows: Iterable[tuple[int, int, str, int, int]], floor_ns: int,
              late: set[int]) -> list[dict[str, Any]]:  # fmt: skip
    """Per communicator and collective op with two or more ranks whose rank with the least
    time inside is a `late` rank and stands out below the others (module doc): least,
    median and most time inside over its ranks, widest spread first. `coll_rows`:
    (comm_id, comm_size, op, rank, time_ns) summed over the window; `floor_ns`:
    threshold_ns of the window."""
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
        others = [ns for r, ns in per_rank.items() if r != low]
        # the least time inside, negated: standing out below the others
        if low not in late or not stands_out(-per_rank[low], [-ns for ns in others], floor_ns)[0]:
            continue
        median = int(statistics.median(per_rank.values()))
        comm = communicator_label(comm_id, comm_id == OVERFLOW_COMM_ID)  # as the cards write it
        found.append((per_rank[high] - per_rank[low], {
            "comm_id": comm_id, "comm_size": comm_size, "op": op, "ranks": len(per_rank),
            "min_ns": per_rank[low], "median_ns": median, "max_ns": per_rank[high],
            "max_rank": high, "min_rank": low,
            "text": f"{op} on communicator {comm} ({comm_size} ranks): rank {low} arrives "
                    f"last (the least time inside: {_seconds(per_rank[low])}, median "
                    f"{_seconds(median)}); rank {high} waits longest "
                    f"({_seconds(per_rank[high])})",
        }))  # fmt: skip
    found.sort(key=lambda g: (-g[0], g[1]["comm_id"], g[1]["op"]))
    return [g for _, g in found[:MAX_LISTED]]


def _ranks(ranks: Sequence[int]) -> str:
    """Ranks in words, runs of three or more as ranges: "rank 3", "ranks 0, 1, 3",
    "ranks 0–4, 6–15"."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(parts)}"


def _seconds(ns: int) -> str:
    """A duration in words: "2.31 s", "812 ms", "40 µs"."""
    if ns >= 10**9:
        return f"{ns / 10**9:.2f} s"
    if ns >= 10**6:
        return f"{ns / 10**6:.0f} ms"
    return f"{ns / 10**3:.0f} µs"
