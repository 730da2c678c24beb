"""`stacklens replay`: deliver spooled frames to a collector.

When the collector cannot be reached, the hook library writes each frame it could not
deliver to the spool directory as one file, `<job>.<run>.<rank>.<seq>.<pid>.slf`, holding
the frame exactly as it would have been sent (written as `*.tmp` and renamed, so a file
with the final suffix is always complete). Replay sends them in (job, run, rank, process
start, seq) order over
one connection, deletes each file once its frame is acknowledged, and renames a frame the collector
rejects to `*.rejected` (kept for inspection, never resent). Frames already stored are
acknowledged again as duplicates, so replaying twice is harmless.

Frames the collector rejected when the hooks sent them live wait in the spool's `rejected/`
folder; replay leaves that folder alone. `--all-users` (root, in a node epilog) replays
every user's default spool, `${TMPDIR:-/tmp}/stacklens-spool-<uid>`, that is a real
directory owned by that uid (any other entry of that name is skipped: it is not the
hooks').

Replay may run while ranks on the node still spool and deliver (a node epilog, another
job): a file that disappears before it is read, acknowledged or renamed was delivered by
its sender, which deletes the file on its own acknowledgement; it is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import socket
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from stacklens import wire
from stacklens.settings import Settings, default_spool_dir

log = logging.getLogger(__name__)

SPOOL_SUFFIX = ".slf"
REJECTED_SUFFIX = ".rejected"
#: The folder of a spool where the hooks keep the frames the collector rejected.
REJECTED_DIR = "rejected"
_USER_SPOOL = re.compile(r"stacklens-spool-(\d+)")


@dataclass
class ReplayResult:
    """What a replay did."""

    delivered: int = 0
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    remaining: int = 0


def spooled_frames(spool_dir: Path) -> list[tuple[tuple[str, int, int, int, int], Path, bytes]]:
    """Every spooled frame under `spool_dir` as ((job, run, rank, process start, seq), path,
    bytes), in order.

    A file that is not a frame is reported as rejected by `replay` (key sorts last).
    """
    found = []
    for path in spool_dir.rglob(f"*{SPOOL_SUFFIX}"):
        if REJECTED_DIR in path.relative_to(spool_dir).parts[:-1]:
            continue  # rejected by the collector when sent live: never resent
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue  # delivered and deleted by its sender meanwhile
        try:
            header = wire.decode_header(raw[: wire.HEADER_SIZE], max_body=1 << 40)
            key = (header.job_id, header.run_id, header.world_rank, header.proc_start_ns,
                   header.seq)  # fmt: skip
        except wire.FrameError:
            key = ("\uffff", 0, 0, 0, 0)
        found.append((key, path, raw))
    found.sort(key=lambda item: (item[0], str(item[1])))
    return found


def replay(spool_dir: Path, host: str, port: int, timeout: float = 30.0) -> ReplayResult:
    """Send every spooled frame to the collector at host:port; see the module doc."""
    result = ReplayResult()
    pending = spooled_frames(spool_dir)
    while pending:
        try:
            sent = _deliver(pending, host, port, timeout, result)
        except OSError as exc:
            log.warning("collector %s:%d: %s", host, port, exc)
            break
        pending = pending[sent:]
    result.remaining = len(pending)
    return result


def _deliver(pending: list, host: str, port: int, timeout: float, result: ReplayResult) -> int:
    """Send frames on one connection until all are acked or one is rejected.

    Returns how many of `pending` were settled (acknowledged or rejected).
    """
    settled = 0
    with socket.create_connection((host, port), timeout=timeout) as sock:
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
            settled += 1
            if status == wire.Status.COMMITTED:
                path.unlink(missing_ok=True)
                result.delivered += 1
                continue
            reason = wire.Status(status).name.lower()
            with contextlib.suppress(FileNotFoundError):
                path.rename(path.with_suffix(REJECTED_SUFFIX))
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
    result = replay(spool, settings.collector_host, settings.collector_port)
    print(
        f"replayed {result.delivered} frames from {spool} to {settings.collector}; "
        f"{len(result.rejected)} rejected, {result.remaining} left"
    )
    for path, reason in result.rejected:
        print(f"  rejected: {path} ({reason})", file=sys.stderr)
    return 0 if result.remaining == 0 and not result.rejected else 1
