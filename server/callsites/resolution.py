# server/callsites/resolution.py — call-site frames resolved where the server runs, stored.
"""Each frame of a job's call sites (module, build-id, offset) as function, file and line:
first from `callsite_symbols` (resolved before, here or on the compute node by
`stacklens run`), else from the module's file when the server can read it
(stacklens/symbols.py checks that its build-id is the one that ran) — an answer read from
the file is stored, so it survives the file's removal or rebuild and every later job of
the same binary finds it. An answer that is not (module missing, unreadable, rebuilt,
stripped of all symbols, no build-id) is made afresh at each read with its reason: the
file may be readable or a node's answer may arrive later."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from server.callsites.summary import FrameKey, frame_key
from stacklens import symbols
from stacklens.schema import CallsiteSymbol

#: The server's resolver: one index per module file and build-id, kept between requests.
RESOLVER = symbols.Resolver()

#: The columns of a stored answer a frame carries.
FIELDS = ("quality", "function", "function_offset", "file", "line", "reason", "resolved")


def stored(
    session: Session, keys: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], dict[str, Any]]:
    """The stored answers of these (build-id, offset) pairs."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = session.execute(
        select(CallsiteSymbol).where(
            tuple_(CallsiteSymbol.build_id, CallsiteSymbol.site_offset).in_(wanted)
        )
    ).scalars()
    return {(r.build_id, r.site_offset): {f: getattr(r, f) for f in FIELDS} for r in rows}


def store(session: Session, rows: list[dict[str, Any]]) -> None:
    """Stores answers read from the file that ran (`build_id`, `site_offset` and FIELDS each);
    a node's answer replaces a server's for the same pair, never the other way."""
    if not rows:
        return
    now = time.time_ns()
    stmt = insert(CallsiteSymbol).values([{**r, "resolved_ns": now} for r in rows])
    stmt = stmt.on_conflict_do_update(
        index_elements=[CallsiteSymbol.build_id, CallsiteSymbol.site_offset],
        set_={f: stmt.excluded[f] for f in (*FIELDS, "resolved_ns")},
        where=(stmt.excluded.resolved == "node") & (CallsiteSymbol.resolved != "node"),
    )
    session.execute(stmt)


def resolve(
    session: Session, frames: Iterable[Mapping[str, Any]]
) -> dict[FrameKey, dict[str, Any]]:
    """The resolution of every distinct frame (by `summary.frame_key`)."""
    paths: dict[FrameKey, str] = {}
    for f in frames:
        paths.setdefault(frame_key(f), f["module"])
    found = {}
    known = stored(session, ((k[1], k[2]) for k in paths if k[1]))
    todo: dict[tuple[str, str], list[int]] = defaultdict(list)
    for key, module in paths.items():
        _, bid, offset = key
        if bid and (bid, offset) in known:
            found[key] = known[(bid, offset)]
        else:
            todo[(module, bid)].append(offset)
    new = []
    for (module, bid), offsets in todo.items():
        for site in RESOLVER.resolve(module, bid or None, offsets):
            answer = {"quality": site.quality, "function": site.function,
                      "function_offset": site.function_offset, "file": site.file,
                      "line": site.line, "reason": site.reason, "resolved": ""}  # fmt: skip
            if site.quality != symbols.MODULE_OFFSET:
                answer["resolved"] = "server"
                new.append({"build_id": bid, "site_offset": site.offset, **answer})
            found[("" if bid else module, bid, site.offset)] = answer
    store(session, new)
    return found
