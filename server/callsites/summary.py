# server/callsites/summary.py — a job's call sites across its ranks (pure).
"""The per-rank call-site rows of a scope (server/callsites/repository.py: one per rank,
site, layer, op and communicator) made into the job's call sites: the rows of every rank
whose frames are the same (build-id and offset each; the module path when a module had no
build-id) and whose op is the same are one site — the ranks' own site ids mean nothing
across ranks. Per site: calls, bytes, time, its share of its layer's time, the size range
from the size buckets, the rank with the most time and the imbalance (that time over
the mean of the ranks that called from there). Each frame carries its resolution (the
`resolved` mapping, server/callsites/resolution.py). Heaviest time first."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from stacklens import symbols

#: The hooks' overflow site id: the calls past the per-rank bound of call sites.
OVERFLOW_SITE = 2**32 - 1
#: Layer codes of the call-site rows and their names in the API.
LAYERS = {0: "mpi", 1: "posix", 2: "stdio"}
OTHER = "<other call sites>"

FrameKey = tuple[str, str, int]  # (module, build_id, offset)


def layer_name(layer: int | str) -> str:
    """A row's layer (its wire code, or its name in any case) as the API names it."""
    return LAYERS[layer] if isinstance(layer, int) else layer.lower()


def overflow(row: Mapping[str, Any]) -> bool:
    """Whether a row is the overflow site's (no frames; its id the wire's, or None)."""
    return bool(row.get("overflow")) or row["site_id"] in (None, OVERFLOW_SITE)


def buckets(value: Mapping[Any, Any] | Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(bucket, calls) of a row's buckets: a mapping bucket -> calls, or a list of
    {"bucket", "calls"}."""
    if isinstance(value, Mapping):
        return [(int(b), int(c)) for b, c in value.items()]
    return [(int(b["bucket"]), int(b["calls"])) for b in value]


def python_function(frame: Mapping[str, Any]) -> str | None:
    """The Python function of a Python frame (mpi4py's caller, read by the hooks), or None
    for a frame of a native module."""
    bid = frame["build_id"] or ""
    prefix = symbols.PYTHON_PREFIX
    return bid.removeprefix(prefix) if bid.startswith(prefix) else None


def frame_key(frame: Mapping[str, Any]) -> FrameKey:
    """What identifies a frame across ranks: the build-id and offset (a module without a
    build-id by its path; a Python frame by its file, function and line)."""
    bid = frame["build_id"] or ""
    named = bid and python_function(frame) is None
    return ("" if named else frame["module"], bid, int(frame["offset"]))


def size_bounds(buckets: Mapping[int, int]) -> tuple[int, int]:
    """The lower bound of the smallest and the upper bound of the largest size bucket that
    holds calls (bucket 0: 0 bytes; bucket b: [2^(b-1), 2^b))."""
    used = sorted(int(b) for b, calls in buckets.items() if calls)
    if not used:
        return 0, 0
    low, high = used[0], used[-1]
    return (0 if low == 0 else 1 << (low - 1)), (0 if high == 0 else (1 << high) - 1)


#: What a frame inside mpi4py's extension module is labelled: the hooks could not read the
#: Python caller (an interpreter whose layout they do not know, or no Python frame).
MPI4PY = "mpi4py (a Python call; its file and line are not read)"


def label(frame: Mapping[str, Any]) -> str:
    """A frame in short: file:line (a Python frame's too), function+offset, or
    module+offset; a frame in mpi4py's extension module (a Python program's call whose
    Python line could not be read) says so."""
    if frame.get("quality") in ("line", "python") and frame.get("file") and frame.get("line"):
        return f"{os.path.basename(frame['file'])}:{frame['line']}"
    if "/mpi4py/" in frame["module"]:
        return MPI4PY
    if frame.get("function") and frame.get("function_offset") is not None:
        return f"{frame['function']}+{frame['function_offset']:#x}"
    where = f"{os.path.basename(frame['module']) or '?'}+{int(frame['offset']):#x}"
    return f"{where} (not resolved yet)" if frame.get("resolved") == "pending" else where


def summarize(
    rows: Iterable[Mapping[str, Any]], resolved: Mapping[FrameKey, Mapping[str, Any]]
) -> dict[str, Any]:
    """The scope's call sites (each a dict of the API's `Callsite` fields) heaviest time
    first, and the job's time inside MPI and in file I/O at every site."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        layer = layer_name(row["layer"])
        totals[layer] += int(row["time_ns"])
        frames = sorted(row["frames"], key=lambda f: f["frame"])
        path = () if overflow(row) else tuple(frame_key(f) for f in frames)
        key = (layer, row["op"], path)
        site = groups.get(key)
        if site is None:
            site = groups[key] = {
                "frames": frames, "calls": 0, "bytes": 0, "time_ns": 0,
                "buckets": defaultdict(int), "per_rank": defaultdict(int),
            }  # fmt: skip
        site["calls"] += int(row["calls"])
        site["bytes"] += int(row["bytes"])
        site["time_ns"] += int(row["time_ns"])
        site["per_rank"][int(row["rank"])] += int(row["time_ns"])
        for bucket, calls in buckets(row["buckets"]):
            site["buckets"][bucket] += calls
    io_time = totals["posix"] + totals["stdio"]
    sites = []
    for (layer, op, path), site in groups.items():
        frames = [_frame(f, resolved.get(frame_key(f), {})) for f in site["frames"]] if path else []
        per_rank = site["per_rank"]
        most = min(per_rank, key=lambda r: (-per_rank[r], r))
        mean = sum(per_rank.values()) / len(per_rank)
        low, high = size_bounds(site["buckets"])
        whole = totals["mpi"] if layer == "mpi" else io_time
        where = " < ".join(label(f) for f in frames) if frames else OTHER
        sites.append({
            "key": f"{layer}:{op}@" + ("/".join(f"{k[1] or k[0]}+{k[2]:x}" for k in path)
                                      or "other"),
            "label": where, "layer": layer, "op": op, "frames": frames,
            "calls": site["calls"], "bytes": site["bytes"], "time_ns": site["time_ns"],
            "share": site["time_ns"] / whole if whole else 0.0,
            "mean_bytes": site["bytes"] / site["calls"] if site["calls"] else 0.0,
            "min_bytes": low, "max_bytes": high, "ranks": len(per_rank),
            "most_time_rank": most, "most_time_ns": per_rank[most],
            "imbalance": per_rank[most] / mean if mean else 1.0,
        })  # fmt: skip
    sites.sort(key=lambda s: (-s["time_ns"], s["key"]))
    return {"sites": sites, "mpi_time_ns": totals["mpi"], "io_time_ns": io_time}


def site_of(
    rows: Iterable[Mapping[str, Any]],
    resolved: Mapping[FrameKey, Mapping[str, Any]],
    op: str,
    ranks: Iterable[int],
) -> dict[str, Any] | None:
    """The call site of the MPI operation `op` where `ranks` spent the most time (None:
    none of theirs outside the overflow): where a late rank's waiters wait for it."""
    among = set(ranks)
    chosen = [r for r in rows if layer_name(r["layer"]) == "mpi" and r["op"] == op
              and r["rank"] in among and not overflow(r)]  # fmt: skip
    sites = summarize(chosen, resolved)["sites"]
    return sites[0] if sites else None


def _frame(frame: Mapping[str, Any], found: Mapping[str, Any]) -> dict[str, Any]:
    """A captured frame with its resolution (module+offset, unresolved, when none)."""
    out = {"frame": int(frame["frame"]), "module": frame["module"],
           "build_id": frame["build_id"] or "", "offset": int(frame["offset"]),
           "quality": "module+offset", "function": None, "function_offset": None,
           "file": None, "line": None, "reason": "", "resolved": ""}  # fmt: skip
    out.update({k: v for k, v in found.items() if k in out})
    return out


#: Call sites an incident lists per job at most (risen).
RISEN_LISTED = 8
#: A call site is listed when its rise is at least this share of the rises of all sites
#: whose time rose (a site that took part of the new waiting, not one that wobbled).
RISEN_SHARE = 0.1


def risen(
    during: Iterable[Mapping[str, Any]],
    before: Iterable[Mapping[str, Any]],
    during_s: float,
    before_s: float,
) -> list[dict[str, Any]]:
    """The call sites whose time rose from one window to the next: `before` and `during`
    are the sites (summarize's) of the `before_s` seconds before and the `during_s`
    seconds of an incident. A site's rise is its time per second of the window during,
    less that before (0 before when it had no time then, or there was no window before):
    the sites with a rise of at least RISEN_SHARE of all sites' positive rises, the largest
    first, RISEN_LISTED at most, each with key, label, layer, op, its time and calls in
    either window, its rise (ns of time at the site per second, summed over ranks), its
    share of the rises and the rank with the most time there during (`most_time_rank`:
    often a rank waiting there for a late one)."""
    old = {s["key"]: s for s in before}
    rises = []
    for site in during:
        was = old.get(site["key"])
        rate_before = was["time_ns"] / before_s if was is not None and before_s > 0 else 0.0
        rise = site["time_ns"] / during_s - rate_before if during_s > 0 else 0.0
        if rise > 0:
            rises.append((rise, site, was))
    total = sum(r for r, _, _ in rises)
    rises.sort(key=lambda x: (-x[0], x[1]["key"]))
    out = []
    for rise, site, was in rises[:RISEN_LISTED]:
        if rise < RISEN_SHARE * total:
            break
        out.append({
            "key": site["key"], "label": site["label"], "layer": site["layer"],
            "op": site["op"], "time_ns": site["time_ns"], "calls": site["calls"],
            "before_time_ns": 0 if was is None else was["time_ns"],
            "before_calls": 0 if was is None else was["calls"],
            "rise_ns_per_s": round(rise), "share": rise / total,
            "most_time_rank": site["most_time_rank"],
        })  # fmt: skip
    return out
