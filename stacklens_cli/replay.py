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

Replay runs as root in node epilogs, over directories users can write to (and rename,
replace or swap for a symbolic link while it runs), so it trusts no path: every operation
goes through a descriptor, end to end.

* The spool is opened once (`Spool.open`), `O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK`: a
  symbolic link, a file or a FIFO at its name is refused before anything is opened. With
  `--all-users` the folder holding the spools is opened once, each spool is opened
  relative to it by name, and the owner is taken from the opened directory (fstat): it
  must be the uid its name gives.
* Directories below it are walked through descriptors (`walk`), each subdirectory opened
  relative to its parent's with the same flags (a directory swapped for a link or a FIFO
  after it was listed is skipped, never followed nor blocked on), at most `MAX_DEPTH`
  levels deep.
* A file is judged without following links (fstatat; FIFOs, devices, sockets and links
  are refused unopened), opened relative to its directory's descriptor with
  `O_NOFOLLOW|O_NONBLOCK`, checked with fstat to be the file judged, and read: its header
  when the spool is listed (to sort it), the whole frame, up to the frame cap (header +
  the body cap, STACKLENS_MAX_FRAME_BYTES), only when it is sent, and it must then still
  be the file listed (same device, inode and owner). So replay holds one frame at a time
  and at most `MAX_IN_FLIGHT` bytes are sent and unacknowledged on a connection: its
  memory does not grow with the spool.
* Each frame's owner is the uid owning the file as opened (fstat), never looked up again
  by name. With `--all-users` it must be the spool's owner; run as root, a frame whose
  rank information names another user (by name, or as `uid:<n>`) is refused. Refused
  files are renamed `*.rejected` with the reason printed, like frames the collector
  rejects.
* Acknowledged files are deleted, and refused or rejected ones renamed, by name relative
  to the descriptor of their directory (`unlinkat`, `renameat`): a directory below the
  spool is opened again from the spool's descriptor, component by component, and must be
  the one walked (same device and inode), else the file is left as it is.

So a spool renamed away and replaced by a symbolic link while replay runs changes
nothing: its frames are still read, sent for, deleted from and set aside in the directory
first opened, for the owner of each file as read.

Each file's frames are sent for the file's owner (stacklens/sender.py: in proven mode the
connection names that owner and the collector accepts it from the owner itself or from an
admin, so root's epilog replay keeps every frame's original owner): one connection per
owner.
"""

from __future__ import annotations

import argparse
import collections
import errno
import logging
import os
import pwd
import re
import socket
import stat
import sys
import time
from collections.abc import Iterator
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
#: How many directory levels below the spool replay enters (the hooks write at level 0).
MAX_DEPTH = 8
_USER_SPOOL = re.compile(r"stacklens-spool-(\d+)")
#: How a directory is opened: never through a link, never anything but a directory.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Descriptors of directories below a spool kept open for deletes and renames.
_DIR_CACHE = 16
#: The body cap replay applies unless told otherwise (the collector's default).
DEFAULT_MAX_BODY = Settings.model_fields["max_frame_bytes"].default
#: Connections in a row that may settle nothing (collector busy, then closed) before
#: replay stops and reports the frames left.
_MAX_IDLE_ROUNDS = 3


class Refused(Exception):
    """A spool, directory or file replay will not use; the message says why."""


def open_directory(name: str | Path, at: int | None = None) -> int:
    """A descriptor of the directory `name` (a path, or a name in the directory `at`),
    never through a symbolic link at its last component; Refused for anything else (a
    link, a file, a FIFO: O_DIRECTORY refuses them unopened), FileNotFoundError if gone."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=at)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise Refused("not a directory (a symbolic link or another kind of file)") from None
        raise Refused(f"cannot be opened: {exc.strerror}") from None


def walk(
    root_fd: int, into_rejected: bool = False
) -> Iterator[tuple[tuple[str, ...], int, list[str]]]:
    """Every directory of the tree opened as `root_fd` (itself first) as (its names below
    the root, a descriptor valid until the next step, the names of its other entries,
    sorted); each subdirectory is opened relative to its parent's descriptor
    (open_directory), one that is gone or no longer a directory is skipped. The top
    `rejected/` folder is entered only `into_rejected`; nothing deeper than MAX_DEPTH."""
    yield from _walk(root_fd, (), into_rejected)


def _walk(
    fd: int, where: tuple[str, ...], into_rejected: bool
) -> Iterator[tuple[tuple[str, ...], int, list[str]]]:
    """walk below the directory `fd` at `where`."""
    files: list[str] = []
    dirs: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            (dirs if entry.is_dir(follow_symlinks=False) else files).append(entry.name)
    yield where, fd, sorted(files)
    if dirs and len(where) >= MAX_DEPTH:
        log.warning("directories more than %d levels deep are not replayed", MAX_DEPTH)
        return
    for name in sorted(dirs):
        if not where and name == REJECTED_DIR and not into_rejected:
            continue  # rejected by the collector when sent live: never resent
        try:
            sub = open_directory(name, fd)
        except (FileNotFoundError, Refused):
            continue  # removed, or replaced by something else, since it was listed
        try:
            yield from _walk(sub, (*where, name), into_rejected)
        finally:
            os.close(sub)


@dataclass
class ReplayResult:
    """What a replay did."""

    delivered: int = 0
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    remaining: int = 0


@dataclass(frozen=True)
class SpoolFile:
    """A file of a spool: its directory's names below the spool, and its name there."""

    where: tuple[str, ...]
    name: str


@dataclass(frozen=True)
class SpooledFrame(SpoolFile):
    """One spool file's frame as listed (its header read through its directory's
    descriptor; the frame itself is read again when it is sent: Spool.read)."""

    key: tuple[str, bool, int, int, int, int]  # (job, launch, run, rank, process start, seq)
    owner: int  # the uid owning the file as opened (fstat)
    identity: tuple[int, int]  # (device, inode) of the file as opened


def _read_spool_file(
    name: str, dir_fd: int, cap: int, first: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The bytes of spool file `name` in the directory `dir_fd` (its `first` bytes only, if
    given), and its status as opened; Refused for anything but a regular file of at most
    `cap` bytes (see the module doc)."""
    before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(before.st_mode):
        raise Refused("a symbolic link, not a regular file")
    if not stat.S_ISREG(before.st_mode):
        raise Refused("not a regular file (a FIFO, device or socket)")
    if before.st_size > cap:
        raise Refused(f"{before.st_size} bytes, over the frame cap of {cap}")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise Refused(f"cannot be opened safely: {exc.strerror}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev, before.st_ino,
        ):  # fmt: skip
            raise Refused("replaced while being opened")
        parts, size = [], 0
        want = cap + 1 if first is None else min(first, cap + 1)
        while size < want and (chunk := os.read(fd, min(1 << 20, want - size))):
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                raise Refused(f"grew over the frame cap of {cap} bytes")
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


class Spool:
    """A spool directory opened for replay: every operation goes through its descriptor
    (see the module doc). A context manager: leaving it closes the descriptors.

    `owner`, if given, is the uid the directory and every file replayed from it must
    belong to (`--all-users`); without it each file's frames belong to the file's owner.
    """

    def __init__(self, path: Path, fd: int, owner: int | None = None):
        self.path, self.fd, self.owner = path, fd, owner
        self._walked: dict[tuple[str, ...], tuple[int, int]] = {}  # where: (dev, inode)
        self._open: dict[tuple[str, ...], int] = {}  # descriptors kept of subdirectories

    @classmethod
    def open(cls, path: Path, owner: int | None = None, at: int | None = None) -> Spool:
        """The spool `path` (a name in the directory `at` when given), opened with
        open_directory; with `owner`, Refused unless the opened directory is that uid's."""
        fd = open_directory(path if at is None else path.name, at)
        try:
            uid = os.fstat(fd).st_uid
            if owner is not None and uid != owner:
                raise Refused(f"the directory belongs to uid {uid}, not to uid {owner}")
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, owner)

    def close(self) -> None:
        """Close the spool's descriptors."""
        for fd in (*self._open.values(), self.fd):
            os.close(fd)
        self._open.clear()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def path_of(self, file: SpoolFile) -> Path:
        """Where a file is (named in messages; never opened by this path)."""
        return self.path.joinpath(*file.where, file.name)

    def frames(
        self,
        max_body: int = DEFAULT_MAX_BODY,
        refused: list[tuple[SpoolFile, str]] | None = None,
    ) -> list[SpooledFrame]:
        """Every spooled frame, in (job, run, rank, process start, seq) order, a job's
        launch records (frames of type launch) after its other frames, as listed:
        only its header is read here (memory: a few hundred bytes per file, whatever the
        frames' size); frames in a `rejected/` folder (rejected by the collector when sent
        live) are never resent.

        A file that is not a frame sorts last (the collector rejects it). Files refused
        unread, or owned by another uid than the spool's `owner`, are appended to
        `refused` with the reason.
        """
        cap = wire.HEADER_SIZE + max_body
        found = []
        for where, dir_fd, names in walk(self.fd):
            status = os.fstat(dir_fd)
            self._walked[where] = (status.st_dev, status.st_ino)
            for name in names:
                if not name.endswith(SPOOL_SUFFIX):
                    continue
                try:
                    head, opened = _read_spool_file(name, dir_fd, cap, wire.HEADER_SIZE)
                    self._check_owner(opened)
                except FileNotFoundError:
                    continue  # delivered and deleted by its sender meanwhile
                except Refused as exc:
                    if refused is not None:
                        refused.append((SpoolFile(where, name), str(exc)))
                    continue
                try:
                    header = wire.decode_header(head, max_body=max_body)
                    key = (header.job_id, header.frame_type == wire.FrameType.LAUNCH,
                           header.run_id, header.world_rank, header.proc_start_ns,
                           header.seq)  # fmt: skip
                except wire.FrameError:
                    key = ("\uffff", False, 0, 0, 0, 0)
                found.append(SpooledFrame(where, name, key, opened.st_uid,
                                          (opened.st_dev, opened.st_ino)))  # fmt: skip
        found.sort(key=lambda f: (f.key, f.where, f.name))
        return found

    def _check_owner(self, opened: os.stat_result) -> None:
        """Refused unless a file as opened belongs to the spool's owner (when it has one)."""
        if self.owner is not None and opened.st_uid != self.owner:
            raise Refused(f"the file belongs to uid {opened.st_uid}, not to the spool's owner "
                          f"uid {self.owner}")  # fmt: skip

    def read(self, frame: SpooledFrame, max_body: int, check_owner: bool) -> bytes:
        """The frame of a listed file, read now (at most the frame cap); Refused if it is
        no longer the file listed (another file, another owner), or, with `check_owner`,
        if its user is not its file's owner; FileNotFoundError if it is gone."""
        raw, opened = _read_spool_file(frame.name, self._directory(frame.where),
                                       wire.HEADER_SIZE + max_body)  # fmt: skip
        if (opened.st_dev, opened.st_ino) != frame.identity or opened.st_uid != frame.owner:
            raise Refused("replaced since it was listed")
        self._check_owner(opened)
        if check_owner and (why := _owner_mismatch(raw, opened.st_uid)):
            raise Refused(why)
        return raw

    def _directory(self, where: tuple[str, ...]) -> int:
        """The descriptor of the spool's directory at `where`: opened again from the
        spool's descriptor, one name at a time, and checked to be the one walked; Refused
        (or FileNotFoundError) if it is not."""
        if not where:
            return self.fd
        if where in self._open:
            return self._open[where]
        fd = self.fd
        try:
            for name in where:
                parent, fd = fd, open_directory(name, fd)
                if parent != self.fd:
                    os.close(parent)
            status = os.fstat(fd)
        except BaseException:
            if fd != self.fd:
                os.close(fd)
            raise
        if (status.st_dev, status.st_ino) != self._walked.get(where):
            os.close(fd)
            raise Refused("its directory was moved or replaced since it was read")
        if len(self._open) >= _DIR_CACHE:
            os.close(self._open.pop(next(iter(self._open))))
        self._open[where] = fd
        return fd

    def delete(self, file: SpoolFile) -> None:
        """Delete a delivered frame's file (already gone: its sender deleted it)."""
        try:
            os.unlink(file.name, dir_fd=self._directory(file.where))
        except FileNotFoundError:
            pass
        except (OSError, Refused) as exc:
            log.warning("delivered spool file %s left in place: %s", self.path_of(file), exc)

    def set_aside(self, file: SpoolFile) -> None:
        """Rename a refused or rejected file to *.rejected (never resent)."""
        kept = file.name.removesuffix(SPOOL_SUFFIX) + REJECTED_SUFFIX
        try:
            fd = self._directory(file.where)
            os.rename(file.name, kept, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            pass
        except (OSError, Refused) as exc:
            log.warning("rejected spool file %s not renamed: %s", self.path_of(file), exc)


#: Bytes of frames replay keeps sent and not yet acknowledged on a connection. It reads one
#: file at a time as it sends: its memory is one frame (at most the frame cap) plus a few
#: hundred bytes per file listed, whatever the size of the spool.
MAX_IN_FLIGHT = 64 << 20


def replay(
    spool: Spool, settings: Settings, timeout: float = 30.0, in_flight: int = MAX_IN_FLIGHT
) -> ReplayResult:
    """Send every frame of the opened `spool` to the collector of `settings` (for its
    file's owner), at most `in_flight` bytes of them unacknowledged at once; see the
    module doc."""
    result = ReplayResult()
    refused: list[tuple[SpoolFile, str]] = []
    found = spool.frames(settings.max_frame_bytes, refused)
    for file, reason in refused:
        _refuse(spool, file, reason, result)
    by_owner: dict[int, list[SpooledFrame]] = {}
    for frame in found:
        by_owner.setdefault(frame.owner, []).append(frame)
    for owner, pending in sorted(by_owner.items()):
        idle_rounds = 0
        while pending and idle_rounds < _MAX_IDLE_ROUNDS:
            try:
                sent = _deliver(spool, pending, settings, owner, timeout, result, in_flight)
            except OSError as exc:
                log.warning("collector %s: %s", settings.collector, exc)
                break
            idle_rounds = 0 if sent else idle_rounds + 1
            if not sent:
                time.sleep(0.5 * idle_rounds)  # the collector asked for a moment
            pending = pending[sent:]
        result.remaining += len(pending)
    return result


def _refuse(spool: Spool, file: SpoolFile, reason: str, result: ReplayResult) -> None:
    """Set a refused file aside (*.rejected), with its reason in the result and the log."""
    spool.set_aside(file)
    result.rejected.append((spool.path_of(file), reason))
    log.warning("refused spool file %s: %s", spool.path_of(file), reason)


class _Acks:
    """The acknowledgements arriving on a connection, one at a time."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffered = sock, b""

    def next(self) -> tuple[int, int] | None:
        """The next ack (status, seq), waiting for it; None if the collector closed."""
        while len(self.buffered) < wire.ACK_SIZE:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffered += chunk
        ack, self.buffered = self.buffered[: wire.ACK_SIZE], self.buffered[wire.ACK_SIZE :]
        return wire.decode_ack(ack)


def _deliver(
    spool: Spool,
    pending: list[SpooledFrame],
    settings: Settings,
    owner: int,
    timeout: float,
    result: ReplayResult,
    in_flight: int,
) -> int:
    """Send frames on one connection until all are acked or one is rejected, reading each
    file as it is sent and waiting for acks while `in_flight` bytes are unacknowledged.

    Returns how many of `pending` were settled (acknowledged, rejected, or refused or gone
    when read), a prefix of them; a frame answered `unavailable` is not settled: it is
    sent again on the next connection.
    """
    check_owner = os.geteuid() == 0
    settled = held = 0
    # frames sent and not yet settled, in order, with their size (None: not sent, refused
    # or gone when read; settled as soon as every frame before it is)
    window: collections.deque[tuple[SpooledFrame, int | None]] = collections.deque()
    with open_connection(settings, owner, timeout) as sock:
        acks = _Acks(sock)

        def settle() -> bool:
            """Settle the oldest frames of the window (the next by its ack); False once
            the connection has nothing more to settle."""
            nonlocal settled, held
            while window and window[0][1] is None:
                window.popleft()
                settled += 1
            if not window:
                return True
            ack = acks.next()
            if ack is None or ack[0] == wire.Status.UNAVAILABLE:
                return False  # closed early, or come back later: resent on a new connection
            frame, size = window.popleft()
            held -= size or 0
            settled += 1
            if ack[0] == wire.Status.COMMITTED:
                spool.delete(frame)
                result.delivered += 1
                return True
            reason = wire.Status(ack[0]).name.lower()
            spool.set_aside(frame)
            result.rejected.append((spool.path_of(frame), reason))
            log.warning("collector rejected spooled frame %s: %s", spool.path_of(frame), reason)
            return False  # the collector closes the connection after a rejection

        try:
            for frame in pending:
                try:
                    raw = spool.read(frame, settings.max_frame_bytes, check_owner)
                except FileNotFoundError:  # delivered and deleted by its sender meanwhile
                    window.append((frame, None))
                    continue
                except Refused as exc:
                    _refuse(spool, frame, str(exc), result)
                    window.append((frame, None))
                    continue
                while held and held + len(raw) > in_flight:
                    if not settle():
                        return settled
                sock.sendall(raw)
                window.append((frame, len(raw)))
                held += len(raw)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the collector ended the connection (a rejection): settle what it acked
        while window:
            if not settle():
                break
    return settled


def user_spools(root_fd: int) -> list[tuple[int, str]]:
    """The per-user default spools in the directory `root_fd` as (uid, name), by uid:
    entries `stacklens-spool-<uid>` that were real directories owned by that uid when
    listed (Spool.open checks the opened directory again)."""
    found = []
    with os.scandir(root_fd) as entries:
        for entry in entries:
            m = _USER_SPOOL.fullmatch(entry.name)
            if m is None:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode) and info.st_uid == int(m[1]):
                found.append((int(m[1]), entry.name))
    return sorted(found)


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    """Deliver the spooled frames to the collector; non-zero if any are left or rejected."""
    if args.all_users:
        root = default_spool_dir(os.geteuid()).parent
        try:
            root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            print(f"stacklens replay: {root}: {exc.strerror}", file=sys.stderr)
            return 2
        try:
            spools = user_spools(root_fd)
            codes = [_replay_one(settings, root / name, uid, root_fd) for uid, name in spools]
        finally:
            os.close(root_fd)
        print(f"replayed the spools of {len(codes)} users under {root}")
        return max(codes, default=0)
    return _replay_one(settings, args.spool_dir or settings.spool_dir)


def _replay_one(
    settings: Settings, path: Path, owner: int | None = None, at: int | None = None
) -> int:
    """Open one spool (see Spool.open; `owner` and `at` for --all-users), replay it and
    report it; the exit status (2: a spool named on the command line is not there)."""
    try:
        with Spool.open(path, owner, at) as spool:
            result = replay(spool, settings)
    except FileNotFoundError:
        if at is not None:
            return 0  # removed since it was listed: nothing waits there
        print(f"stacklens replay: no spool directory {path}", file=sys.stderr)
        return 2
    except (OSError, Refused) as exc:
        print(f"stacklens replay: {path} not replayed: {exc}", file=sys.stderr)
        return 1 if at is not None else 2
    print(
        f"replayed {result.delivered} frames from {path} to {settings.collector}; "
        f"{len(result.rejected)} rejected, {result.remaining} left"
    )
    for where, reason in result.rejected:
        print(f"  rejected: {where} ({reason})", file=sys.stderr)
    return 0 if result.remaining == 0 and not result.rejected else 1
