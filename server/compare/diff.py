"""Run comparison as pure functions of run summaries (server/compare/repository.py): where
each run's elapsed time went per rank, the differences ranked by their share of the
elapsed-time difference, and the finding in plain words.

A run's elapsed time is split, per rank on average, into the time inside each MPI operation
(start-up and MPI-IO operations apart: MPI_Init* lies before the intervals, MPI-IO is
counted with file I/O), the time in file I/O per file (every layer: POSIX, stdio, MPI-IO),
and computation, the rest. The parts of a run add up to its elapsed time, so the parts'
differences add up to the elapsed-time difference (computation is never negative: where
the parts exceed the elapsed time it is 0 and the sum is above it).

Call sites (server/callsites/) are matched across the two runs by where they are, never by
their keys (a rebuilt binary has other build-ids and offsets for the same line): each frame
by its resolved file, line and function, or, not resolved to a line, by its module's
build-id (the module's path when it has none) and offset; a site by its layer, operation
and frames, innermost first.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from presentation.formatting import format_bytes
from stacklens.constants import CATEGORY_LABELS, MPI_CATEGORIES

#: The part of the elapsed time outside MPI and file I/O.
COMPUTATION = "computation"
#: Differences named in the finding at most.
NAMED = 3


def profile(summary: dict[str, Any]) -> dict[str, Any]:
    """Where one run's elapsed time went, per rank on average: `parts` {name: ns} and their
    `kinds` (op, file, computation), with its elapsed time, its executable's build-id,
    hosts, and bytes, calls (summed over ranks) and traffic category per operation."""
    ranks = max(1, summary["world_size"])
    parts: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for op in summary["ops"]:
        if op["category"] not in MPI_CATEGORIES:  # start-up lies before the intervals;
            continue  # MPI-IO time is counted as file I/O from the I/O tables
        parts[op["op"]] = op["time_ns"] // ranks
        kinds[op["op"]] = "op"
    for path, io in summary["files"].items():
        name = f"file I/O on {path}"
        parts[name] = io["time_ns"] // ranks
        kinds[name] = "file"
    parts[COMPUTATION] = max(0, summary["elapsed_ns"] - sum(parts.values()))
    kinds[COMPUTATION] = COMPUTATION
    return {
        "elapsed_ns": summary["elapsed_ns"],
        "build_id": summary["build_id"],
        "parts": parts,
        "kinds": kinds,
        "hosts": list(summary["hosts"]),
        "op_bytes": {op["op"]: op["bytes"] for op in summary["ops"]},
        "op_calls": {op["op"]: op["calls"] for op in summary["ops"]},
        "op_class": {op["op"]: op["category"] for op in summary["ops"]},
    }


def median_profile(profiles: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The median of several runs' profiles, part by part (a part a run lacks counts as 0
    there); hosts are those of the run with the median elapsed time; the build-id is the
    runs' when they all have that one, else None."""
    if not profiles:
        raise ValueError("the median of no runs")
    names = sorted({name for p in profiles for name in p["parts"]})
    kinds = {name: kind for p in profiles for name, kind in p["kinds"].items()}
    ops = sorted({op for p in profiles for op in p["op_bytes"]})
    middle = sorted(profiles, key=lambda p: p["elapsed_ns"])[(len(profiles) - 1) // 2]

    def median(values: list[int]) -> int:
        return int(statistics.median(values))

    builds = {p["build_id"] for p in profiles}
    return {
        "elapsed_ns": median([p["elapsed_ns"] for p in profiles]),
        "build_id": builds.pop() if len(builds) == 1 else None,
        "parts": {n: median([p["parts"].get(n, 0) for p in profiles]) for n in names},
        "kinds": kinds,
        "hosts": middle["hosts"],
        "op_bytes": {op: median([p["op_bytes"].get(op, 0) for p in profiles]) for op in ops},
        "op_calls": {op: median([p["op_calls"].get(op, 0) for p in profiles]) for op in ops},
        "op_class": {op: c for p in profiles for op, c in p["op_class"].items()},
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Every part whose time differs between profiles `a` and `b` (b - a, per rank), largest
    change first (then by name), with its share of the elapsed-time difference (None when
    the elapsed times are equal) and, for operations, the bytes and calls of both."""
    delta_elapsed = b["elapsed_ns"] - a["elapsed_ns"]
    rows = []
    for name in sorted(set(a["parts"]) | set(b["parts"])):
        a_ns, b_ns = a["parts"].get(name, 0), b["parts"].get(name, 0)
        if a_ns == b_ns:
            continue
        kind = b["kinds"].get(name) or a["kinds"][name]
        row: dict[str, Any] = {
            "name": name, "kind": kind, "a_ns": a_ns, "b_ns": b_ns, "delta_ns": b_ns - a_ns,
            "share": (b_ns - a_ns) / delta_elapsed if delta_elapsed else None,
            "a_bytes": None, "b_bytes": None, "a_calls": None, "b_calls": None,
        }  # fmt: skip
        if kind == "op":
            row["a_bytes"], row["b_bytes"] = a["op_bytes"].get(name, 0), b["op_bytes"].get(name, 0)
            row["a_calls"], row["b_calls"] = a["op_calls"].get(name, 0), b["op_calls"].get(name, 0)
        rows.append(row)
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["name"]))


def _by_class(prof: dict[str, Any]) -> dict[str, int]:
    """A profile's parts summed per class: each operation's traffic category (its label),
    "file I/O" and "computation"."""
    out: dict[str, int] = {}
    for name, ns in prof["parts"].items():
        kind = prof["kinds"][name]
        label = (CATEGORY_LABELS[prof["op_class"][name]] if kind == "op" else
                 CATEGORY_LABELS["io"] if kind == "file" else COMPUTATION)  # fmt: skip
        out[label] = out.get(label, 0) + ns
    return out


def class_differences(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """The time per class of either profile (`_by_class`: per traffic category, file I/O,
    computation; per rank) side by side, with the change (b - a) and its share of the
    elapsed-time difference (None when that is 0); largest change first, then by name.
    The classes add up to the parts, so their changes add up as the parts' do."""
    delta_elapsed = b["elapsed_ns"] - a["elapsed_ns"]
    ca, cb = _by_class(a), _by_class(b)
    rows = [
        {"name": name, "a_ns": ca.get(name, 0), "b_ns": cb.get(name, 0),
         "delta_ns": cb.get(name, 0) - ca.get(name, 0),
         "share": ((cb.get(name, 0) - ca.get(name, 0)) / delta_elapsed
                   if delta_elapsed else None)}
        for name in set(ca) | set(cb)
    ]  # fmt: skip
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["name"]))


def site_match(site: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a call site (a dict of the API's `Callsite` fields) the same site in
    another run: its layer, operation and frames, each as (file, line, function) when it
    resolved to a line, else as (build-id or module path, offset); the overflow site (no
    frames) matches the other run's overflow site."""
    frames = tuple(
        ("line", f["file"], f["line"], f["function"] or "")
        if f["quality"] in ("line", "python") and f["file"] and f["line"]
        else ("offset", f["build_id"] or f["module"], int(f["offset"]))
        for f in site["frames"]
    )
    return (site["layer"], site["op"], frames)


def median_sites(runs: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The call sites of several runs as one run's: per matched site (`site_match`), the
    median over the runs of its time, calls and bytes (a run without it counts 0 there);
    its label and path are those of the first run that has it."""
    if not runs:
        raise ValueError("the median of no runs")
    found: dict[tuple[Any, ...], list[dict[str, Any] | None]] = {}
    for i, sites in enumerate(runs):
        for site in sites:
            found.setdefault(site_match(site), [None] * len(runs))[i] = site
    out = []
    for seen in found.values():
        first = next(s for s in seen if s is not None)
        out.append({**first, **{
            field: int(statistics.median([0 if s is None else s[field] for s in seen]))
            for field in ("time_ns", "calls", "bytes")
        }})  # fmt: skip
    return out


def site_differences(
    a: Sequence[dict[str, Any]],
    b: Sequence[dict[str, Any]],
    path: Callable[[dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """The call sites of runs `a` and `b` (dicts of `Callsite` fields) matched by
    `site_match`: each with its label and `path(site)` (its frames in full), time, calls
    and bytes of both sides (0 where it is absent), the change of time (b - a) in ns and
    in percent of a's (None when a has none), and where it is (both, a only, b only).
    Largest absolute change of time first, then by label and operation."""
    sides: dict[tuple[Any, ...], list[dict[str, Any] | None]] = {}
    for i, sites in enumerate((a, b)):
        for site in sites:
            sides.setdefault(site_match(site), [None, None])[i] = site
    rows = []
    for site_a, site_b in sides.values():
        shown = site_b if site_b is not None else site_a
        assert shown is not None
        a_ns = 0 if site_a is None else site_a["time_ns"]
        b_ns = 0 if site_b is None else site_b["time_ns"]
        rows.append({
            "label": shown["label"], "path": path(shown), "layer": shown["layer"],
            "op": shown["op"],
            "present": "both" if site_a and site_b else ("a" if site_a else "b"),
            "a_ns": a_ns, "b_ns": b_ns, "delta_ns": b_ns - a_ns,
            "delta_pct": 100 * (b_ns - a_ns) / a_ns if a_ns else None,
            "a_calls": 0 if site_a is None else site_a["calls"],
            "b_calls": 0 if site_b is None else site_b["calls"],
            "a_bytes": 0 if site_a is None else site_a["bytes"],
            "b_bytes": 0 if site_b is None else site_b["bytes"],
        })  # fmt: skip
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["label"], r["op"], r["path"]))


def family_totals(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """A run's communicator families (dicts of the API's `CommFamily` fields, as its
    Communicator families card lists them) by label: time, calls and bytes (two families
    with one label, summed)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        got = out.setdefault(row["label"], {"time_ns": 0, "calls": 0, "bytes": 0})
        got["time_ns"] += row["time_ns"]
        got["calls"] += sum(op["calls"] for op in row["ops"])
        got["bytes"] += row["bytes"]
    return out


def median_families(runs: Sequence[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """The families of several runs (`family_totals`) as one run's: per label, the median
    of its time, calls and bytes (a run without it counts 0 there)."""
    if not runs:
        raise ValueError("the median of no runs")
    labels = sorted({label for run in runs for label in run})
    zero = {"time_ns": 0, "calls": 0, "bytes": 0}
    return {
        label: {
            field: int(statistics.median([run.get(label, zero)[field] for run in runs]))
            for field in zero
        }
        for label in labels
    }


def family_differences(
    a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """The families of runs `a` and `b` (`family_totals`) matched by label: time, calls and
    bytes of both sides (0 where absent), the change of time (b - a) in ns and in percent
    of a's (None when a has none), where it is. Largest absolute change first, then by
    label."""
    rows = _side_by_side(a, b)
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), r["label"]))


def size_counts(ops: Sequence[dict[str, Any]]) -> dict[tuple[str, int], dict[str, int]]:
    """A run's message-size histograms (dicts of the API's `OpSizes` fields, as its job
    page's card shows them) by (op, bucket): the bucket's bounds and its messages."""
    return {
        (op["op"], b["bucket"]): {"lower_bytes": b["lower_bytes"],
                                  "upper_bytes": b["upper_bytes"], "count": b["count"]}
        for op in ops for b in op["buckets"]
    }  # fmt: skip


def median_sizes(
    runs: Sequence[dict[tuple[str, int], dict[str, int]]],
) -> dict[tuple[str, int], dict[str, int]]:
    """The histograms of several runs (`size_counts`) as one run's: per (op, bucket), the
    median of its messages (a run without it counts 0 there); buckets of median 0 left
    out."""
    if not runs:
        raise ValueError("the median of no runs")
    out = {}
    for key in sorted({key for run in runs for key in run}):
        bounds = next(run[key] for run in runs if key in run)
        count = int(statistics.median([run[key]["count"] if key in run else 0 for run in runs]))
        if count:
            out[key] = {**bounds, "count": count}
    return out


def size_differences(
    a: dict[tuple[str, int], dict[str, int]], b: dict[tuple[str, int], dict[str, int]]
) -> list[dict[str, Any]]:
    """The histograms of runs `a` and `b` (`size_counts`) side by side: per op and bucket
    of either, its bounds and the messages of both (0 where absent) and the change (b -
    a); the op with the most messages (in either run) first, each op's buckets from the
    smallest up."""
    zero = {"count": 0}
    rows: list[dict[str, Any]] = []
    for op, bucket in set(a) | set(b):
        bounds = b.get((op, bucket)) or a[(op, bucket)]
        ca, cb = a.get((op, bucket), zero)["count"], b.get((op, bucket), zero)["count"]
        rows.append({"op": op, "bucket": bucket, "lower_bytes": bounds["lower_bytes"],
                     "upper_bytes": bounds["upper_bytes"], "a_messages": ca,
                     "b_messages": cb, "delta": cb - ca})  # fmt: skip
    most: dict[str, int] = {}
    for op in {r["op"] for r in rows}:
        most[op] = max(sum(r["a_messages"] for r in rows if r["op"] == op),
                       sum(r["b_messages"] for r in rows if r["op"] == op))  # fmt: skip
    return sorted(rows, key=lambda r: (-most[r["op"]], r["op"], r["bucket"]))


def median_files(runs: Sequence[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """The files of several runs (a run summary's `files`: path -> time_ns, bytes, calls)
    as one run's: per path, the median of each figure (a run without it counts 0 there)."""
    if not runs:
        raise ValueError("the median of no runs")
    zero = {"time_ns": 0, "bytes": 0, "calls": 0}
    return {
        path: {f: int(statistics.median([run.get(path, zero)[f] for run in runs])) for f in zero}
        for path in sorted({path for run in runs for path in run})
    }


def file_differences(
    a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """The files of runs `a` and `b` (path -> time_ns, bytes, calls: every layer, the
    program's phase, summed over ranks) side by side: time, read and write calls and bytes
    read and written of both (0 where absent), the change of time (ns, % of a's; None when
    a has none), where it is. Largest absolute change of time first, then of bytes, then
    by path."""
    rows = _side_by_side(a, b)
    return sorted(rows, key=lambda r: (-abs(r["delta_ns"]), -abs(r["b_bytes"] - r["a_bytes"]),
                                       r["label"]))  # fmt: skip


def late_moved(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool | None:
    """Whether the late rank of run b (`run_late`'s dict; None: none is late) is another
    rank than run a's; None when either run has none."""
    if a is None or b is None:
        return None
    return bool(a["rank"] != b["rank"])


def _late(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """How the late rank changed, as a part of the finding ("" when it did not)."""

    def named(late: dict[str, Any]) -> str:
        return f"rank {late['rank']}" + (f" ({late['host']})" if late["host"] else "")

    if a is not None and b is not None and a["rank"] != b["rank"]:
        return f"; the late rank moved from {named(a)} to {named(b)}"
    if a is None and b is not None:
        return f"; {named(b)} became late"
    if a is not None and b is None:
        return f"; no rank is late any more ({named(a)} was)"
    return ""


def span(ns: int, signed: bool = True) -> str:
    """A duration in plain words: `+38.0 s`, `−12 ms` (a minus sign, as the tables of the
    page and the report write it), `+450 µs` (unsigned when asked)."""
    sign = ("+" if ns >= 0 else "−") if signed else ""
    ns = abs(ns)
    if ns >= 10**9:
        return f"{sign}{ns / 1e9:.1f} s"
    if ns >= 10**6:
        return f"{sign}{ns / 1e6:.0f} ms"
    return f"{sign}{ns / 1e3:.0f} µs"


def finding(
    a: dict[str, Any],
    b: dict[str, Any],
    rows: list[dict[str, Any]],
    fabric: Sequence[str] = (),
) -> str:
    """The comparison in one sentence: the elapsed-time change, the largest differences in
    the same direction with their share of it, a change of hosts, a change of the late
    rank (the profiles' `late`, when given), a rebuilt executable (both build-ids known and
    different), and the changes of the fabric around the runs (`fabric`:
    `fabric_changes`' phrases, largest first)."""
    delta = b["elapsed_ns"] - a["elapsed_ns"]
    text = (f"{span(delta)} elapsed per run ({span(a['elapsed_ns'], False)} → "
            f"{span(b['elapsed_ns'], False)})")  # fmt: skip
    same_way = [r for r in rows if delta == 0 or (r["delta_ns"] > 0) == (delta > 0)]
    named = [
        f"{r['name']} {span(r['delta_ns'])} per rank"
        + ("" if r["share"] is None else f" ({r['share']:.0%})")
        for r in same_way[:NAMED]
    ]
    if named:
        text += ": " + ", ".join(named)
    text += _placement(a["hosts"], b["hosts"])
    text += _late(a.get("late"), b.get("late"))
    build_a, build_b = a.get("build_id"), b.get("build_id")
    if build_a and build_b and build_a != build_b:
        text += (f"; the executable was rebuilt (build-id {short_build(build_a)} → "
                 f"{short_build(build_b)})")  # fmt: skip
    if fabric:
        text += "; " + "; ".join(fabric)
    return text + "."


#: A few MiB of another job's traffic are below notice (management MADs move ~6 MiB).
_BYTES_FLOOR = 16 * 2**20
#: PortXmitWait ticks below notice.
_WAIT_FLOOR = 1000


def _ratio(x: float, y: float, floor: float) -> float:
    """How far apart two amounts are: |ln((y + floor) / (x + floor))|."""
    return abs(math.log((y + floor) / (x + floor)))


def fabric_changes(ca: dict[str, Any] | None, cb: dict[str, Any] | None) -> list[str]:
    """The changes of the fabric around the runs (two RunContext dicts; None: unknown) in
    plain words, the largest change first (each ranked by the ratio of its amounts, a floor
    added to both): the leaves the placement spans, other jobs' bytes on the links each
    run's traffic crossed, PortXmitWait on the links each run used, incidents during each."""
    if ca is None or cb is None:
        return []
    found: list[tuple[float, str]] = []
    la, lb = ca["leaves"], cb["leaves"]
    if len(la) != len(lb):
        found.append((_ratio(len(la), len(lb), 0.5),
                      f"placement went from {len(la)} lea{'ves' if len(la) != 1 else 'f'} to "
                      f"{len(lb)} lea{'ves' if len(lb) != 1 else 'f'}"))  # fmt: skip
    elif set(la) != set(lb):
        found.append((0.1, f"placement moved from {_hosts(sorted(set(la) - set(lb)))} to "
                           f"{_hosts(sorted(set(lb) - set(la)))}"))  # fmt: skip
    oa, ob = ca["other_job_bytes"], cb["other_job_bytes"]
    if max(oa, ob) >= _BYTES_FLOOR and _ratio(oa, ob, _BYTES_FLOOR) > 0.1:
        more, letter = (ob, "b") if ob > oa else (oa, "a")
        jobs = cb["other_jobs"] if letter == "b" else ca["other_jobs"]
        who = "another job" if jobs == 1 else f"{jobs} other jobs"
        found.append((_ratio(oa, ob, _BYTES_FLOOR),
                      f"on links that carried {format_bytes(more)} of {who} during run "
                      f"{letter} ({format_bytes(min(oa, ob))} during run "
                      f"{'a' if letter == 'b' else 'b'})"))  # fmt: skip
    wa, wb = ca["xmit_wait"], cb["xmit_wait"]
    if wa is not None and wb is not None and _ratio(wa, wb, _WAIT_FLOOR) > 0.1:
        found.append((_ratio(wa, wb, _WAIT_FLOOR),
                      f"PortXmitWait on its links {wa:,} → {wb:,} ticks"))  # fmt: skip
    ia, ib = len(ca["incidents"]), len(cb["incidents"])
    if ia != ib:
        more_in, letter = (cb, "b") if ib > ia else (ca, "a")
        kinds = sorted({i["kind"] for i in more_in["incidents"]})
        n, other = max(ia, ib), "a" if letter == "b" else "b"
        found.append((_ratio(ia, ib, 0.5),
                      f"{n} incident{'s' * (n != 1)} ({', '.join(kinds)}) during run "
                      f"{letter}, {min(ia, ib)} during run {other}"))  # fmt: skip
    found.sort(key=lambda f: -f[0])
    return [text for _, text in found]


def _placement(hosts_a: list[str], hosts_b: list[str]) -> str:
    """How the placement changed, as the end of the finding ("" when it did not)."""
    if sorted(hosts_a) == sorted(hosts_b):
        return ""
    if len(hosts_a) != len(hosts_b):
        return (f"; placement went from {len(hosts_a)} host{'s' * (len(hosts_a) != 1)} to "
                f"{len(hosts_b)} host{'s' * (len(hosts_b) != 1)}")  # fmt: skip
    left = sorted(set(hosts_a) - set(hosts_b))
    came = sorted(set(hosts_b) - set(hosts_a))
    return f"; placement moved from {_hosts(left)} to {_hosts(came)}"


def short_build(build_id: str) -> str:
    """A build-id as people read it: its first 12 hex digits."""
    return build_id[:12]


def _hosts(names: list[str]) -> str:
    """A few host names in a sentence (the first three, then how many more)."""
    more = len(names) - 3
    return ", ".join(names[:3]) + (f" and {more} more" if more > 0 else "")


def _side_by_side(
    a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]
) -> list[dict[str, Any]]:
    """One row per key of `a` or `b` (key -> time_ns, calls, bytes): the key as `label`,
    where it is, time, calls and bytes of both sides (0 where absent), the change of time
    (b - a) in ns and in percent of a's (None when a has none); unsorted. A key is where it
    has time, calls or bytes (a family made in both runs but used in one window only is in
    that run only); one with none in either is in both."""
    zero = {"time_ns": 0, "calls": 0, "bytes": 0}
    rows = []
    for label in set(a) | set(b):
        fa, fb = a.get(label, zero), b.get(label, zero)
        in_a, in_b = any(fa.values()), any(fb.values())
        rows.append({
            "label": label,
            "present": "both" if in_a == in_b else ("a" if in_a else "b"),
            "a_ns": fa["time_ns"], "b_ns": fb["time_ns"],
            "delta_ns": fb["time_ns"] - fa["time_ns"],
            "delta_pct": (100 * (fb["time_ns"] - fa["time_ns"]) / fa["time_ns"]
                          if fa["time_ns"] else None),
            "a_calls": fa["calls"], "b_calls": fb["calls"],
            "a_bytes": fa["bytes"], "b_bytes": fb["bytes"],
        })  # fmt: skip
    return rows
