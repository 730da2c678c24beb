"""Crash snapshots of the ranks `stacklens run` launches (mpi_pmpi_hooks/src/snapshot.h).

`stacklens run` gives its command a directory of its own under /dev/shm
(STACKLENS_SNAPSHOT_DIR, `0700`); every MPI rank on this node keeps there, in
`<pid>.snap`, the frame that would end it if it died at that moment (what it counted
since its last frame: calls, bytes and time per MPI operation, bytes and messages per
peer; rewritten every 100 ms by its sender thread). A rank whose final frame was delivered
or spooled removes its file. After the launcher has ended, a file left is a rank that
died without a final frame (SIGSEGV, abort(), SIGKILL from the launcher): its snapshot
becomes that rank's final frame, of type `killed`, written to the spool and delivered
with the rest of it (`stacklens run` replays the spool; `stacklens replay` later if the
collector is away).

How far it goes: ranks on the node of `stacklens run` only (other nodes have no such
directory, so their ranks keep none); the op and p2p tables only (collectives per
communicator, RMA per target, file I/O, communicator families of that last interval are
not kept); what was counted in the last 100 ms before the death is not in it; a rank
whose frame of the same sequence number arrived after the snapshot was taken keeps that
frame (the snapshot is then a duplicate, dropped by the collector).
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import struct
from pathlib import Path

from stacklens import wire

#: Where the directories go (tmpfs: a dead process's mapped writes are in it).
SHM = Path("/dev/shm")
#: The file's header: magic, version, published slot, length of each slot (snapshot.h).
_HEADER = struct.Struct("<5I")
MAGIC = 0x53534C53
VERSION = 1
HEADER_BYTES = 64
FILE_BYTES = 64 * 1024
SLOT_BYTES = (FILE_BYTES - HEADER_BYTES) // 2
SUFFIX = ".snap"


def make_dir() -> Path | None:
    """A new directory for one launch's snapshots, `0700`, or None where /dev/shm is not
    there (the ranks then keep no snapshot)."""
    if not SHM.is_dir():
        return None
    path = SHM / f"stacklens-{os.geteuid()}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        path.mkdir(mode=0o700)
    except OSError:
        return None
    return path


def read_snapshot(fd: int) -> bytes | None:
    """The newest frame of an opened snapshot file, or None if it holds none (or is not
    one)."""
    raw = os.pread(fd, FILE_BYTES, 0)
    if len(raw) != FILE_BYTES:
        return None
    magic, version, slot, *lengths = _HEADER.unpack_from(raw)
    if magic != MAGIC or version != VERSION or slot not in (0, 1):
        return None
    length = lengths[slot]
    if not wire.HEADER_SIZE <= length <= SLOT_BYTES:
        return None
    start = HEADER_BYTES + slot * SLOT_BYTES
    return raw[start : start + length]


def _alive(pid: int) -> bool:
    """Whether a process of that id runs on this node."""
    return Path(f"/proc/{pid}").exists()


def leftovers(directory: Path) -> list[bytes]:
    """The snapshot frames of the ranks that died without a final frame: the files left
    in `directory` by processes no longer running, opened without following links and
    only if this user's regular files."""
    frames = []
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(SUFFIX) or not entry[: -len(SUFFIX)].isdigit():
            continue
        if _alive(int(entry[: -len(SUFFIX)])):
            continue  # still running: its own final frame will come
        try:
            fd = os.open(directory / entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                frame = read_snapshot(fd)
                if frame is not None:
                    frames.append(frame)
        finally:
            os.close(fd)
    return frames


def spool(
    frames: list[bytes], spool_dir: Path, prefix: str = "snapshot", max_body: int = SLOT_BYTES
) -> list[Path]:
    """Write each frame (a body of at most `max_body` bytes) to `spool_dir` as a spool
    file named `prefix.…` (`*.tmp`, then renamed, as the hooks do); the directory is made
    `0700` if missing. Returns the files written."""
    spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    written = []
    for raw in frames:
        try:
            h = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=max_body)
        except wire.FrameError:
            continue
        name = f"{prefix}.{h.run_id:016x}.{h.world_rank:010d}.{h.seq:020d}.{h.pid}.slf"
        tmp = spool_dir / (name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, raw)
        finally:
            os.close(fd)
        os.rename(tmp, spool_dir / name)
        written.append(spool_dir / name)
    return written


def remove(directory: Path) -> None:
    """Remove a launch's snapshot directory and whatever is left in it."""
    shutil.rmtree(directory, ignore_errors=True)
