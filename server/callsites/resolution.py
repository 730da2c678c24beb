# server/callsites/resolution.py — call-site frames named from the stored resolutions.
"""Each frame of a job's call sites (module, build-id, offset) as function, file and line,
read from the stored rows only — no API request reads a module file (docs/callsites.md,
"Where it is resolved"):

1. the answer `stacklens run` resolved on the compute node for the job's owner
   (`callsite_node_symbols`, resolved `node`);
2. the answer the collector's resolver read from the module file at the frame's own path
   (`callsite_symbols`, resolved `server`): never one read at another path claiming the
   same build-id, which anyone can write into a file of their own;
3. the resolver's fallback for that module path and the job's owner, with its reason
   (`callsite_fallbacks`): a reason read from the file as one owner may see it is never
   shown on another owner's job;
4. a frame without a build-id: module+offset, no file can be proven to be the one that ran;
5. else the frame is not resolved yet (the resolver works as call sites arrive):
   module+offset, resolved `pending`, with that reason — labelled unresolved, never a
   guessed line.

A Python frame (an mpi4py call's caller) names itself: the hooks read its file, function
and line from the interpreter (quality `python`, resolved `hooks`); no row is stored.

The families' labels (server/families/service.py) read the same stored answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from server.callsites.summary import FrameKey, frame_key, python_function
from stacklens import symbols
from stacklens.schema import CallsiteFallback, CallsiteNodeSymbol, CallsiteSymbol, Job

#: The columns of a stored answer a frame carries.
FIELDS = ("quality", "function", "function_offset", "file", "line", "reason", "resolved")
#: The reason of a frame the resolver has not answered yet.
PENDING = "not resolved yet: the collector resolves call sites as they arrive"
#: The reason of a Python frame.
PYTHON_FRAME = "a Python frame: file, function and line read by the hooks from the interpreter"
#: The reason of a frame whose module had no build-id.
NO_BUILD_ID = "the module had no build-id when it ran, so no file can be proven to be it"


def _answer(row: Any, resolved: str) -> dict[str, Any]:
    return {f: getattr(row, f) for f in FIELDS[:-1]} | {"resolved": resolved}


def _fallback(reason: str, resolved: str = "") -> dict[str, Any]:
    return {"quality": symbols.MODULE_OFFSET, "function": None, "function_offset": None,
            "file": None, "line": None, "reason": reason, "resolved": resolved}  # fmt: skip


def stored(
    session: Session, job_id: int, keys: Iterable[tuple[str, str, int]]
) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The stored answers of these (module, build-id, offset) frames of job `job_id`: a
    node's for the job's owner first, then the resolver's from the file at that path, then
    its fallback for the job's owner."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    pairs = sorted({(b, o) for _, b, o in wanted})
    owner = session.execute(select(Job.owner_uid).where(Job.id == job_id)).scalar()
    node = {
        (r.build_id, r.site_offset): _answer(r, "node")
        for r in session.execute(
            select(CallsiteNodeSymbol).where(
                CallsiteNodeSymbol.owner_uid == owner,
                tuple_(CallsiteNodeSymbol.build_id, CallsiteNodeSymbol.site_offset).in_(pairs),
            )
        ).scalars()
    }
    server = {
        (r.module, r.build_id, r.site_offset): _answer(r, r.resolved or "server")
        for r in session.execute(
            select(CallsiteSymbol).where(
                tuple_(CallsiteSymbol.module, CallsiteSymbol.build_id,
                       CallsiteSymbol.site_offset).in_(wanted)
            )
        ).scalars()
        if r.quality != symbols.MODULE_OFFSET
    }  # fmt: skip
    fallback = {
        (r.module, r.build_id, r.site_offset): _fallback(r.reason)
        for r in session.execute(
            select(CallsiteFallback).where(
                CallsiteFallback.owner_uid == owner,
                tuple_(CallsiteFallback.module, CallsiteFallback.build_id,
                       CallsiteFallback.site_offset).in_(wanted)
            )
        ).scalars()
    }  # fmt: skip
    out = {}
    for module, bid, offset in wanted:
        found = node.get((bid, offset)) or server.get((module, bid, offset))
        found = found or fallback.get((module, bid, offset))
        if found is not None:
            out[(module, bid, offset)] = found
    return out


def resolve(
    session: Session, job_id: int, frames: Iterable[Mapping[str, Any]]
) -> dict[FrameKey, dict[str, Any]]:
    """The resolution of every distinct frame of job `job_id` (by `summary.frame_key`),
    from the stored rows (module doc)."""
    found: dict[FrameKey, dict[str, Any]] = {}
    modules: dict[FrameKey, set[str]] = {}
    for f in frames:
        key = frame_key(f)
        function = python_function(f)
        if function is not None:
            found[key] = {"quality": symbols.PYTHON, "function": function or None,
                          "function_offset": None, "file": f["module"] or None,
                          "line": int(f["offset"]) or None, "reason": PYTHON_FRAME,
                          "resolved": "hooks"}  # fmt: skip
        elif not key[1]:
            found[key] = _fallback(NO_BUILD_ID)
        elif not f["module"] or not key[2]:
            found[key] = _fallback("the hooks found no module holding this return address")
        else:
            modules.setdefault(key, set()).add(f["module"])
    known = stored(session, job_id, ((m, k[1], k[2]) for k, ms in modules.items() for m in ms))
    for key, paths in modules.items():
        answers = [known[k] for m in sorted(paths) if (k := (m, key[1], key[2])) in known]
        # an answer read from a file beats a fallback of another path of the same build-id
        answers.sort(key=lambda a: symbols.QUALITIES.index(a["quality"]))
        found[key] = answers[0] if answers else _fallback(PENDING, "pending")
    return found
