# stacklens_cli/node_sites.py — call sites resolved on the compute node by `stacklens run`.
"""After its command ended, `stacklens run` names the call sites its ranks on this node
recorded, against the module files here (docs/callsites.md, "On the compute node"): no
shared file system is assumed, so the collector may be unable to read a program that only
this node has (or one deleted or rebuilt later).

Each rank under `stacklens run` appends the frames of every call site it describes
(wire table callsite_frame: module path, build-id, offset) to `<pid>.sites` in the
launch's snapshot directory (mpi_pmpi_hooks/src/snapshot.c), on its sender thread, once
per site. `resolve_dir` reads those files (this user's regular files only, bounded),
resolves each distinct (module, build-id, offset) with stacklens/symbols.Resolver — the
file's build-id must be the one the ranks saw, so a module rebuilt before this moment
is never read — and returns the answers (quality line or function+offset) as wire
site_symbol records, sent in the launch frame (stacklens_cli/launch.py). A frame it
cannot name is left to the collector (its resolver, or its stored fallback).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from stacklens import symbols, wire

#: The suffix of a rank's sites file.
SUFFIX = ".sites"
#: The most bytes read of one rank's sites file (its sites are bounded by the hooks'
#: STACKLENS_MAX_CALLSITES x depth; this bounds a file that is not one).
MAX_FILE_BYTES = 64 << 20
#: The most records sent in one launch frame: they fit the frame's body cap.
MAX_RECORDS = (wire.BOUNDS["max_body_bytes"] - (1 << 16)) // wire.SPEC.table(
    "site_symbol"
).dtype.itemsize

_FRAME = wire.SPEC.table("callsite_frame").dtype
_SYMBOL = wire.SPEC.table("site_symbol").dtype
_QUALITY = {symbols.LINE: 1, symbols.FUNCTION_OFFSET: 2}


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _cut(text: str, size: int) -> bytes:
    """`text` in at most `size` - 1 bytes of UTF-8 (a character boundary), for a text field."""
    return text.encode()[: size - 1].decode("utf-8", "ignore").encode()


def frames_in(directory: Path) -> set[tuple[str, str, int]]:
    """The distinct (module, build-id, offset) the ranks' sites files in `directory` hold
    (frames without a module, build-id or offset left out, and Python frames: they name
    themselves)."""
    found: set[tuple[str, str, int]] = set()
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(SUFFIX) or not entry[: -len(SUFFIX)].isdigit():
            continue
        try:
            fd = os.open(directory / entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()):
                continue
            raw = os.pread(fd, min(st.st_size, MAX_FILE_BYTES), 0)
        finally:
            os.close(fd)
        records = np.frombuffer(raw, dtype=_FRAME, count=len(raw) // _FRAME.itemsize)
        for module, bid, offset in zip(
            records["module"].tolist(), records["build_id"].tolist(),
            records["site_offset"].tolist(), strict=True,
        ):  # fmt: skip
            m, b = _text(module), _text(bid)
            if m and b and offset and not b.startswith(symbols.PYTHON_PREFIX):
                found.add((m, b, int(offset)))
    return found


def resolve(
    frames: set[tuple[str, str, int]], resolver: symbols.Resolver | None = None
) -> np.ndarray:
    """The frames this node can name, as site_symbol records (at most MAX_RECORDS, in
    (build-id, offset) order)."""
    resolver = resolver or symbols.Resolver()
    by_module: dict[tuple[str, str], list[int]] = {}
    for module, bid, offset in sorted(frames):
        by_module.setdefault((module, bid), []).append(offset)
    named: dict[tuple[str, int], symbols.Site] = {}
    for (module, bid), offsets in by_module.items():
        for site in resolver.resolve(module, bid, offsets):
            if site.quality in _QUALITY:
                named.setdefault((bid, site.offset), site)
    keys = sorted(named)[:MAX_RECORDS]
    out = np.zeros(len(keys), dtype=_SYMBOL)
    for i, (bid, offset) in enumerate(keys):
        site = named[(bid, offset)]
        out["quality"][i] = _QUALITY[site.quality]
        out["line"][i] = (site.line or 0) if site.quality == symbols.LINE else 0
        out["site_offset"][i] = offset
        out["function_offset"][i] = (site.function_offset or 0) if site.function else 0
        out["build_id"][i] = bid.encode()
        out["function"][i] = _cut(site.function or "", _SYMBOL["function"].itemsize)
        if site.quality == symbols.LINE:
            out["file"][i] = _cut(site.file or "", _SYMBOL["file"].itemsize)
    resolver.close()
    return out


def resolve_dir(directory: Path | None) -> np.ndarray:
    """The site_symbol records of the call sites the ranks left in `directory` (none
    when there is no directory or no file)."""
    if directory is None:
        return np.zeros(0, dtype=_SYMBOL)
    try:
        frames = frames_in(directory)
    except OSError:
        return np.zeros(0, dtype=_SYMBOL)
    return resolve(frames)
