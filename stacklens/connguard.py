"""Connection limits and timeouts, shared by the TCP ingest and the HTTP server.

A `ConnectionGuard` admits the connections of one listening server: at most `max_total`
at once and at most `max_per_peer` from one peer address. When a limit is reached, the
oldest connection that is *evictable* — one that has not proven anything yet (no valid
frame header on the ingest port) or sits between requests (HTTP) — is closed to make
room; a new connection is refused only when every connection in the way is busy with
real work. So idle or slow connections, however many, cannot lock senders and browsers
out, and never hold the process's descriptors for long.

Each connection also has one `Deadline` at a time: the handshake (a first valid header,
a request head), a read (the rest of a frame or request body once started) or idle time.
Every drop is counted by reason (exported on /metrics) and logged at most once per
`LOG_EVERY_S` per reason, with the count since the last line.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

#: Seconds between two log lines about the same kind of dropped connection.
LOG_EVERY_S = 10.0
#: Descriptors kept free for the database, files and the other server of the process.
RESERVED_FDS = 256


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds of one listening server (STACKLENS_MAX_CONNECTIONS, ..._TIMEOUT_S)."""

    max_total: int = 4096
    max_per_peer: int = 1024
    handshake_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    idle_timeout_s: float = 3900.0

    def fitting(self, fd_limit: int, servers: int = 2) -> ConnectionLimits:
        """These limits with max_total lowered so that `servers` servers at their limit
        stay within `fd_limit` descriptors (less RESERVED_FDS)."""
        room = max(16, (fd_limit - RESERVED_FDS) // servers)
        if room >= self.max_total:
            return self
        return ConnectionLimits(min(room, self.max_total), min(room, self.max_per_peer),
                                self.handshake_timeout_s, self.read_timeout_s,
                                self.idle_timeout_s)  # fmt: skip


def raise_open_file_limit() -> int:
    """Raise this process's open-file soft limit to its hard limit (each connection is a
    descriptor); return the soft limit now in force, and log a change."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        log.info("open-file limit raised from %d to its hard limit %d", soft, hard)
        return hard
    return soft


class Guarded(Protocol):
    """What the guard needs of a connection."""

    def evictable(self) -> bool:
        """Whether it may be closed to make room for a new one."""

    def drop(self, reason: str) -> None:
        """Close it now (the guard has counted the reason); it then calls release()."""


@dataclass
class GuardStats:
    """Counters of one guarded server (exported on /metrics)."""

    accepted: int = 0
    dropped: collections.Counter = field(default_factory=collections.Counter)


class ConnectionGuard:
    """Admits, evicts and times out the connections of one server; see the module doc."""

    def __init__(self, name: str, limits: ConnectionLimits):
        self.name = name
        self.limits = limits
        self.stats = GuardStats()
        self._all: dict[Guarded, str] = {}  # insertion order = age
        self._by_peer: dict[str, dict[Guarded, None]] = {}
        self._log_state: dict[str, tuple[float, int]] = {}  # reason -> (last line, since)

    @property
    def open(self) -> int:
        """Connections open now."""
        return len(self._all)

    def admit(self, conn: Guarded, peer: str) -> bool:
        """Register a new connection from `peer` (an address), closing the oldest
        evictable one in the way if a limit is reached. False if there is no room: the
        caller closes `conn` (counted here)."""
        mine = self._by_peer.get(peer, {})
        if len(mine) >= self.limits.max_per_peer and not self._evict(mine):
            self.count("refused_per_peer_limit", peer)
            return False
        if len(self._all) >= self.limits.max_total and not self._evict(self._all):
            self.count("refused_total_limit", peer)
            return False
        self._all[conn] = peer
        self._by_peer.setdefault(peer, {})[conn] = None
        self.stats.accepted += 1
        return True

    def _evict(self, conns: dict) -> bool:
        for conn in conns:  # oldest first
            if conn.evictable():
                self.count("evicted", self._all.get(conn, "?"))
                self.release(conn)
                conn.drop("evicted")
                return True
        return False

    def release(self, conn: Guarded) -> None:
        """Forget a closed connection (idempotent)."""
        peer = self._all.pop(conn, None)
        if peer is not None:
            mine = self._by_peer[peer]
            mine.pop(conn, None)
            if not mine:
                del self._by_peer[peer]

    def count(self, reason: str, peer: str) -> None:
        """Count a dropped or refused connection; log it, at most once per LOG_EVERY_S per
        reason (with how many since the last line)."""
        self.stats.dropped[reason] += 1
        now = time.monotonic()
        last, since = self._log_state.get(reason, (-LOG_EVERY_S, 0))
        if now - last < LOG_EVERY_S:
            self._log_state[reason] = (last, since + 1)
            return
        self._log_state[reason] = (now, 0)
        more = f" (and {since} more since the last report)" if since else ""
        log.warning("%s: connection from %s dropped: %s%s; %d open",
                    self.name, peer, reason.replace("_", " "), more, self.open)  # fmt: skip


class Deadline:
    """One pending timeout of a connection: `set` replaces the previous one.

    Setting is cheap enough to do on every read: a later due time only moves a number (the
    timer, when it fires early, sleeps again until the due time); only an earlier one
    arms a new timer."""

    def __init__(self, on_expiry: Callable[[str], None]):
        self._on_expiry = on_expiry
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self.reason: str | None = None

    def set(self, seconds: float, reason: str) -> None:
        """Call on_expiry(reason) in `seconds` unless set or cleared before."""
        loop = asyncio.get_running_loop()
        self._due, self.reason = loop.time() + seconds, reason
        if self._handle is None or self._handle.when() > self._due:
            if self._handle is not None:
                self._handle.cancel()
            self._handle = loop.call_at(self._due, self._fire)

    def clear(self) -> None:
        """Cancel the pending timeout, if any."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self.reason = None

    def _fire(self) -> None:
        self._handle = None
        if self.reason is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._due:  # set again meanwhile, for later
            self._handle = loop.call_at(self._due, self._fire)
            return
        reason, self.reason = self.reason, None
        self._on_expiry(reason)
