"""`stacklens replay`: deliver spooled frames to a collector.

When the collector cannot be reached, the hook library writes each frame it could not
deliver to the spool directory as one file, `<job>.<run>.<rank>.<seq>.<pid>.slf`, holding
the frame exactly as it would have been sent (written as `*.tmp` and renamed, so a file
with the final suffix is always complete). Replay sends them in (job, run, rank, process
start, seq) order over one connection, deletes each file once its frame is acknowledged,
and renames a frame the collector rejects to `*.rejected` (kept for inspection, never
resent). Frames already stored are
acknowledged again as duplicates, so replaying twice is harmless.

Frames the collector rejected when the hooks sent them live wait in the spool's `rejected/`
folder; replay leaves that folder alone. `--all-users` (root, in a node epilog) replays
every user's default spool, `${TMPDIR:-/tmp}/stacklens-spool-<uid>`, that is a real
directory owned by that uid (any other entry of that name is skipped: it is not the
hooks').

Replay may run while ranks on the node still spool and deliver (a node epilog, another
job): a file that disappears before it is read, acknowledged or renamed was delivered by
its sender, which deletes the file on its own acknowledgement; it is skipped.

Replay runs as root in node epilogs, over directories users can write to, so it trusts no
file: it opens only regular files, never following a symbolic link (O_NOFOLLOW, after an
lstat that refuses any other kind of file before it is opened: FIFOs, devices, sockets),
never blocks on opening (O_NONBLOCK), reads at most the frame cap (header + the body cap,
STACKLENS_MAX_FRAME_BYTES), and checks with fstat that it read the file it examined. Run
as root, it also refuses a frame whose rank information names a user other than the file's
owner (by name, or as `uid:<n>`). Refused files are renamed `*.rejected` with the reason
printed, like frames the collector rejects. Directories are walked without following
links (os.fwalk); acknowledged files are then deleted by path.

Each file's frames are sent for the file's owner (stacklens/sender.py: in proven mode the
connection names that owner and the collector accepts it from the owner itself or from an
admin, so root's epilog replay keeps every frame's original owner): one connection per
owner.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pwd
import re
import socket
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from stacklens import wire
from stacklens.sender import open_connection
from stacklens.settings import Settings, default_spool_dir

log = logging.getLogger(__name__)

SPOOL_SUFFIX = ".slf"
REJECTED_SUFFIX = ".rejected"
#: The folder of a spool where the hooks keep the frames the collector rejected.
REJECTED_DIR = "rejected"
_USER_SPOOL = re.compile(r"stacklens-spool-(\d+)")
#: The body cap replay applies unless told otherwise (the collector's default).
DEFAULT_MAX_BODY = Settings.model_fields["max_frame_bytes"].default
#: Connections in a row that may settle nothing (collector busy, then closed) before
#: replay stops and reports the frames left.
_MAX_IDLE_ROUNDS = 3


@dataclass
class ReplayResult:
    """What a replay did."""

    delivered: int = 0
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    remaining: int = 0


class _Refused(Exception):
    """A spool file replay will not send; the message says why."""


def _read_spool_file(name: str, dir_fd: int, cap: int) -> tuple[bytes, os.stat_result]:
    """The bytes of spool file `name` in the directory `dir_fd`, and its status; _Refused
    for anything but a regular file of at most `cap` bytes (see the module doc)."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(before.st_mode):
        raise _Refused("a symbolic link, not a regular file")
    if not stat.S_ISREG(before.st_mode):
        raise _Refused("not a regular file (a FIFO, device or socket)")
    if before.st_size > cap:
        raise _Refused(f"{before.st_size} bytes, over the frame cap of {cap}")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _Refused(f"cannot be opened safely: {exc.strerror}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev, before.st_ino,
        ):  # fmt: skip
            raise _Refused("replaced while being opened")
        parts, size = [], 0
        while chunk := os.read(fd, min(1 << 20, cap + 1 - size)):
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                raise _Refused(f"grew over the frame cap of {cap} bytes")
        return b"".join(parts), opened
    finally:
        os.close(fd)


def _owner_mismatch(raw: bytes, owner_uid: int) -> str | None:
    """Why a frame's claimed user is not the file's owner, or None if it is (or the frame
    claims no user: only the first frame of a rank carries one)."""
    try:
        header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=len(raw))
        body = raw[wire.HEADER_SIZE : wire.HEADER_SIZE + header.body_len]
        claimed = wire.decode_body(header, body).user
    except wire.FrameError:
        return None  # not a frame the collector will take anyway
    if claimed is None:
        return None
    try:
        names = {pwd.getpwuid(owner_uid).pw_name, f"uid:{owner_uid}"}
    except KeyError:
        names = {f"uid:{owner_uid}"}
    if claimed in names:
        return None
    return f"claims user {claimed!r} but the file belongs to uid {owner_uid}"


def spooled_frames(
    spool_dir: Path,
    max_body: int = DEFAULT_MAX_BODY,
    refused: list[tuple[Path, str]] | None = None,
    check_owner: bool | None = None,
) -> list[tuple[tuple[str, int, int, int, int], Path, bytes]]:
    """Every spooled frame under `spool_dir` as ((job, run, rank, process start, seq), path,
    bytes), in order; frames in a `rejected/` folder (rejected by the collector when sent
    live) are never resent.

    A file that is not a frame is reported as rejected by `replay` (key sorts last). Files
    refused unread (see the module doc) are appended to `refused` with the reason;
    `check_owner` (default: when running as root) compares each frame's user with the
    file's owner.
    """
    check_owner = os.geteuid() == 0 if check_owner is None else check_owner
    cap = wire.HEADER_SIZE + max_body
    found = []
    for dirpath, dirs, files, dir_fd in os.fwalk(spool_dir, follow_symlinks=False):
        dirs[:] = [d for d in dirs if d != REJECTED_DIR]  # never resent
        for name in files:
            if not name.endswith(SPOOL_SUFFIX):
                continue
            path = Path(dirpath, name)
            try:
                raw, status = _read_spool_file(name, dir_fd, cap)
                if check_owner and (why := _owner_mismatch(raw, status.st_uid)):
                    raise _Refused(why)
            except FileNotFoundError:
                continue  # delivered and deleted by its sender meanwhile
            except _Refused as exc:
                if refused is not None:
                    refused.append((path, str(exc)))
                continue
            try:
                header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=max_body)
                key = (header.job_id, header.run_id, header.world_rank, header.proc_start_ns,
                       header.seq)  # fmt: skip
            except wire.FrameError:
                key = ("\uffff", 0, 0, 0, 0)
            found.append((key, path, raw))
    found.sort(key=lambda item: (item[0], str(item[1])))
    return found


def _set_aside(path: Path) -> None:
    """Rename a refused or rejected file to *.rejected (never resent)."""
    with contextlib.suppress(FileNotFoundError):
        path.rename(path.with_suffix(REJECTED_SUFFIX))


def _owner(path: Path, spool_dir: Path) -> int:
    """The uid owning a spool file; the spool directory's if the file is gone meanwhile
    (its sender delivered it: sending it again is harmless)."""
    try:
        return path.lstat().st_uid
    except FileNotFoundError:
        return spool_dir.stat().st_uid


def replay(spool_dir: Path, settings: Settings, timeout: float = 30.0) -> ReplayResult:
    """Send every spooled frame to the collector of `settings` (for its file's owner); see
    the module doc."""
    result = ReplayResult()
    refused: list[tuple[Path, str]] = []
    found = spooled_frames(spool_dir, settings.max_frame_bytes, refused)
    for path, reason in refused:
        _set_aside(path)
        result.rejected.append((path, reason))
        log.warning("refused spool file %s: %s", path, reason)
    by_owner: dict[int, list] = {}
    for item in found:
        by_owner.setdefault(_owner(item[1], spool_dir), []).append(item)
    for owner, pending in sorted(by_owner.items()):
        idle_rounds = 0
        while pending and idle_rounds < _MAX_IDLE_ROUNDS:
            try:
                sent = _deliver(pending, settings, owner, timeout, result)
            except OSError as exc:
                log.warning("collector %s: %s", settings.collector, exc)
                break
            idle_rounds = 0 if sent else idle_rounds + 1
            if not sent:
                time.sleep(0.5 * idle_rounds)  # the collector asked for a moment
            pending = pending[sent:]
        result.remaining += len(pending)
    return result


def _deliver(
    pending: list, settings: Settings, owner: int, timeout: float, result: ReplayResult
) -> int:
    """Send frames on one connection until all are acked or one is rejected.

    Returns how many of `pending` were settled (acknowledged or rejected); a frame answered
    `unavailable` is not settled: it is sent again on the next connection.
    """
    settled = 0
    with open_connection(settings, owner, timeout) as sock:
        sock.sendall(b"".join(raw for _, _, raw in pending))
        sock.shutdown(socket.SHUT_WR)
        buffered = b""
        for _, path, _ in pending:
            while len(buffered) < wire.ACK_SIZE:
                chunk = sock.recv(65536)
                if not chunk:
                    return settled  # closed early: the rest is resent on a new connection
                buffered += chunk
            status, _seq = wire.decode_ack(buffered[: wire.ACK_SIZE])
            buffered = buffered[wire.ACK_SIZE :]
            if status == wire.Status.UNAVAILABLE:
                return settled  # resent on a new connection
            settled += 1
            if status == wire.Status.COMMITTED:
                path.unlink(missing_ok=True)
                result.delivered += 1
                continue
            reason = wire.Status(status).name.lower()
            _set_aside(path)
            result.rejected.append((path, reason))
            log.warning("collector rejected spooled frame %s: %s", path, reason)
            return settled  # the collector closes the connection after a rejection
    return settled


def user_spools(root: Path) -> list[Path]:
    """The per-user default spools under `root` (`stacklens-spool-<uid>`): real directories
    (not symlinks) owned by the uid their name gives, by uid."""
    found = []
    for entry in root.iterdir() if root.is_dir() else ():
        m = _USER_SPOOL.fullmatch(entry.name)
        if m is None:
            continue
        info = entry.lstat()
        if stat.S_ISDIR(info.st_mode) and info.st_uid == int(m[1]):
            found.append((int(m[1]), entry))
    return [path for _, path in sorted(found)]


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    """Deliver the spooled frames to the collector; non-zero if any are left or rejected."""
    if args.all_users:
        root = default_spool_dir(os.geteuid()).parent
        codes = [_replay_one(settings, spool) for spool in user_spools(root)]
        print(f"replayed the spools of {len(codes)} users under {root}")
        return max(codes, default=0)
    spool = args.spool_dir or settings.spool_dir
    if not spool.is_dir():
        print(f"stacklens replay: no spool directory {spool}", file=sys.stderr)
        return 2
    return _replay_one(settings, spool)


def _replay_one(settings: Settings, spool: Path) -> int:
    """Replay one spool directory and report it; the exit status."""
    result = replay(spool, settings)
    print(
        f"replayed {result.delivered} frames from {spool} to {settings.collector}; "
        f"{len(result.rejected)} rejected, {result.remaining} left"
    )
    for path, reason in result.rejected:
        print(f"  rejected: {path} ({reason})", file=sys.stderr)
    return 0 if result.remaining == 0 and not result.rejected else 1
