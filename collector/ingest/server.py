"""TCP ingest server for hook frames.

One asyncio protocol per connection. Received bytes are scanned by the compiled codec
(collector/codec.py), which validates every complete frame in one call (magic, version,
length cap, token, ranges, sections); the valid frames go to the writer as one batch and
are acknowledged, in frame order, once committed, while later frames are already being
read, so a sender may pipeline. A bad frame is answered with its reject status (after the
acks of the frames before it), logged with the reason, counted, and the connection is
closed; nothing of it is stored. When the writer's backlog is full, reading pauses (TCP
pushes back on the senders) until it drains.

Bounds (stacklens/connguard.py): connections at once in total and per peer address, the
oldest one without a valid header evicted first; a new connection must deliver a valid
header (the token is judged as soon as the header's last byte, the token's, arrives)
within the handshake timeout, a frame once begun must arrive whole within the read
timeout, and a connection silent for the idle timeout is closed. Incomplete frames of all
connections together hold at most `buffer_bytes`: past it, a connection with an
incomplete frame stops being read until room is made. A connection may bring at most
`max_new_days` days without partitions; the frame that would bring one more is answered
`unavailable` (resend on a new connection: by then the partitions exist) and counted as
`partition_limit`.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from collector import codec
from collector.store.partitions import DAY_NS
from collector.store.writer import FrameWriter
from stacklens import wire
from stacklens.connguard import ConnectionGuard, ConnectionLimits, Deadline

log = logging.getLogger(__name__)

#: Seconds a rejected sender's connection stays open to drain its input (see
#: _Connection._end_after_reject).
REJECT_LINGER_S = 5.0
_BODY_LEN = struct.Struct("<I")  # the header's body_len field, at byte 8
_BODY_LEN_OFFSET = wire.fields_of(wire.HEADER_DTYPE)["body_len"][1]


def accepted_without_token(host: str | None) -> bool:
    """Whether a sender at `host` (a peer IP address) is accepted when no ingest token is
    configured: only on the loopback interface. Used by the TCP and the HTTP ingest."""
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class IngestStats:
    """Counters of the ingest server (exported on /metrics)."""

    connections: int = 0
    frames_received: int = 0
    rejected: collections.Counter = field(default_factory=collections.Counter)


class IngestServer:
    """Accepts hook connections on host:port and feeds a FrameWriter."""

    def __init__(
        self,
        writer: FrameWriter,
        host: str,
        port: int,
        token: str = "",
        max_body: int = 1 << 24,
        retention_days: int | None = None,
        *,
        max_skew_ns: int = wire.MAX_CLOCK_SKEW_NS,
        max_new_days: int = 8,
        limits: ConnectionLimits | None = None,
        buffer_bytes: int = 64 << 20,
    ):
        self.writer = writer
        self.host, self.port = host, port
        self.token = token
        self.max_body = max_body
        self.retention_days = retention_days
        self.max_skew_ns = max_skew_ns
        self.max_new_days = max_new_days
        self.stats = IngestStats()
        self.guard = ConnectionGuard("ingest", limits or ConnectionLimits())
        self.buffer_bytes = buffer_bytes
        self.buffered = 0  # bytes of incomplete frames held, all connections
        self._waiting: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Start listening (port 0 picks a free port; see `self.port` afterwards)."""
        if not self.token:
            log.warning(
                "NO INGEST TOKEN CONFIGURED (STACKLENS_INGEST_TOKEN): only senders on the "
                "loopback interface are accepted"
            )
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port,
            backlog=self.guard.limits.max_total,  # a burst of connects is accepted, not lost
        )  # fmt: skip
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("collector listening for hook frames on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting and close the listening socket."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def oldest_ns(self) -> int | None:
        """Oldest interval end accepted now (the retention window), None if unlimited."""
        if self.retention_days is None:
            return None
        return time.time_ns() - self.retention_days * DAY_NS

    def limits(self) -> codec.Limits:
        """What frames are checked against, now."""
        return codec.limits(self.token, self.max_body, self.oldest_ns(),
                            max_skew_ns=self.max_skew_ns)  # fmt: skip

    def frames_within_new_days(self, batch: codec.FrameBatch, brought: set[int]) -> int:
        """How many leading frames of `batch` stay within max_new_days partition days
        that do not exist yet, counting the days in `brought` (updated)."""
        return self.writer.partitions.new_days_fit(batch.info["t_end"], self.max_new_days,
                                                   brought)  # fmt: skip

    def hold(self, delta: int) -> None:
        """Account `delta` bytes of incomplete frames; resume waiting connections when
        there is room again."""
        self.buffered += delta
        while delta < 0 and self._waiting and self.buffered < self.buffer_bytes:
            conn, _ = self._waiting.popitem(last=False)
            conn.resume("memory")

    def over_budget(self, conn: _Connection) -> bool:
        """Whether incomplete frames exceed the budget; if so `conn` waits for room."""
        if self.buffered <= self.buffer_bytes:
            return False
        self._waiting[conn] = None
        return True

    def forget(self, conn: _Connection) -> None:
        """A closed connection no longer waits."""
        self._waiting.pop(conn, None)

    def reject(self, peer: str, status: wire.Status, reason: str, label: str | None = None) -> None:
        """Count (under `label`, default the status name) and log a rejected frame."""
        self.stats.rejected[label or status.name.lower()] += 1
        log.warning("rejected frame from %s: %s [%s]", peer, reason, status.name)


class _Connection(asyncio.Protocol):
    """One sender: scan what arrives, submit valid frames, acknowledge them in order."""

    def __init__(self, server: IngestServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._chunks: list[bytes] = []  # received bytes not yet scanned
        self._buffered = 0
        self._need = wire.HEADER_SIZE  # bytes to wait for before scanning again
        self._last_seq = 0
        # (writer future, or None for a reject found by the scan; seqs; status), in order
        self._inflight: collections.deque = collections.deque()
        self._closing = False
        self._eof = False
        self._proven = False  # a valid header has arrived (token included)
        self._paused: set[str] = set()  # why reading is paused: "writer", "memory"
        self._deadline = Deadline(self._expired)
        self._new_days: set[int] = set()  # days without partitions this sender brought

    def _transport(self) -> asyncio.Transport:
        """The connection's transport (set once the connection is made)."""
        assert self.transport is not None, "no connection yet"
        return self.transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection (uvloop's
        # transports implement asyncio.Transport without subclassing it)
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.server.stats.connections += 1
        if not self.server.guard.admit(self, peername[0] if peername else "?"):
            self.transport.abort()
            return
        self._deadline.set(self.server.guard.limits.handshake_timeout_s, "handshake_timeout")
        if not self.server.token and not accepted_without_token(peername and peername[0]):
            self._deadline.clear()  # ends after the reject's linger, not as a timeout
            reason = "no ingest token configured: only loopback senders are accepted"
            self.server.reject(self.peer, wire.Status.BAD_TOKEN, reason)
            self.transport.write(wire.encode_ack(wire.Status.BAD_TOKEN, 0))
            self._end_after_reject()

    def evictable(self) -> bool:
        """A connection that has not sent a valid header yet may be closed for room."""
        return not self._proven

    def drop(self, reason: str) -> None:
        """Close now (evicted or timed out); unacknowledged frames are resent by the sender."""
        self._closing = True
        self._hold(-self._buffered)
        self._chunks, self._buffered = [], 0
        if self.transport is not None:
            self.transport.abort()

    def _expired(self, reason: str) -> None:
        self.server.guard.count(reason, self.peer)
        self.server.guard.release(self)
        self.drop(reason)

    def _hold(self, delta: int) -> None:
        if delta:
            self.server.hold(delta)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        held = self._buffered  # incomplete-frame bytes accounted before this read
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered < self._need:
            self._hold(len(data))
            self._wait_if_over_budget()
            return
        buffer = b"".join(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
        batch, error = codec.scan(buffer, self.server.limits())
        if len(batch) and error is None:
            fit = self.server.frames_within_new_days(batch, self._new_days)
            if fit < len(batch):
                error = self._partition_limit(batch, fit)
                batch = codec.FrameBatch(batch.data[: int(batch.info["offset"][fit])],
                                         batch.info[:fit])  # fmt: skip
        rest = buffer[len(batch.data) :]
        self._hold(len(rest) - held)
        self._chunks, self._buffered = ([rest], len(rest)) if rest else ([], 0)
        self._need = wire.HEADER_SIZE
        if len(rest) >= wire.HEADER_SIZE and error is None:
            self._need = wire.HEADER_SIZE + _BODY_LEN.unpack_from(rest, _BODY_LEN_OFFSET)[0]
        if error is None and (len(batch) or len(rest) >= wire.HEADER_SIZE):
            self._proven = True  # a header passed every check, the token's included
        if len(batch):
            self._submit(batch)
        if error is not None:
            self._closing = True
            self._deadline.clear()
            self._hold(-self._buffered)
            self._chunks, self._buffered = [], 0
            seq = error.seq if error.seq is not None else self._last_seq
            self.server.reject(self.peer, error.status, error.reason, error.label)
            self._queue_ack(None, np.array([seq], dtype=np.uint64), error.status)
            return
        if self._proven and not rest:
            self._deadline.set(self.server.guard.limits.idle_timeout_s, "idle_timeout")
        elif self._proven and (len(batch) or self._deadline.reason != "read_timeout"):
            self._deadline.set(self.server.guard.limits.read_timeout_s, "read_timeout")
        if self.server.writer.full:
            self._pause("writer")
            self.server.writer.when_room(lambda: self.resume("writer"))
        self._wait_if_over_budget()

    def _partition_limit(self, batch: codec.FrameBatch, fit: int) -> codec.ScanError:
        """The error for frame `fit`, the first that needs one more new partition day."""
        reason = (f"frame needs a day without a partition beyond the "
                  f"{self.server.max_new_days} one connection may bring; resend it on a new "
                  "connection")  # fmt: skip
        seq = int(batch.info["seq"][fit])
        return codec.ScanError(wire.Status.UNAVAILABLE, seq, reason, "partition_limit")

    def _wait_if_over_budget(self) -> None:
        if self._buffered and self.server.over_budget(self):
            self._pause("memory")

    def _pause(self, why: str) -> None:
        if not self._paused and self.transport is not None:
            self.transport.pause_reading()
        self._paused.add(why)

    def resume(self, why: str) -> None:
        """Read again once neither the writer nor the memory budget holds it back."""
        self._paused.discard(why)
        if self._paused or self._closing or self.transport is None:
            return
        if not self.transport.is_closing():
            self.transport.resume_reading()

    def _submit(self, batch: codec.FrameBatch) -> None:
        self.server.stats.frames_received += len(batch)
        seqs = batch.info["seq"]
        self._last_seq = int(seqs[-1])
        self._queue_ack(self.server.writer.submit(batch), seqs, wire.Status.COMMITTED)

    def _queue_ack(self, stored: asyncio.Future | None, seqs: np.ndarray, status) -> None:
        self._inflight.append((stored, seqs, status))
        if stored is None:
            self._send_acks()
        else:
            stored.add_done_callback(lambda _: self._send_acks())

    def _send_acks(self) -> None:
        """Write the acks of every leading submission that is settled, in frame order.

        At the first failed commit, stop acknowledging and drop the connection: the
        sender keeps every unacknowledged frame and resends it after reconnecting.
        """
        out = []
        close = False
        while self._inflight and not close:
            stored, seqs, status = self._inflight[0]
            if stored is not None and not stored.done():
                break
            self._inflight.popleft()
            if stored is None:  # a reject found by the scan
                out.append(wire.encode_acks(status, seqs))
                close = True
                continue
            if stored.cancelled() or stored.exception() is not None:
                self._inflight.clear()
                self._closing = True
                if self.transport is not None and not self.transport.is_closing():
                    self.transport.write(b"".join(out))  # the acks of what was committed
                    self.transport.close()
                return
            refused = stored.result()
            if not refused:
                out.append(wire.encode_acks(status, seqs))
                continue
            # The database refused a frame: ack the ones before it, reject it, close.
            first = min(refused)
            statuses = np.zeros(first + 1, dtype=np.uint16)
            statuses[first] = refused[first].status
            self.server.reject(self.peer, refused[first].status, refused[first].reason)
            out.append(wire.encode_acks(statuses, seqs[: first + 1]))
            close = True
        if self.transport is None or self.transport.is_closing():
            return
        if out:
            self.transport.write(b"".join(out))
        if close:
            self._inflight.clear()
            self._end_after_reject()  # like any reject: the sender reconnects
        elif self._eof and not self._inflight:
            self.transport.close()  # the sender is done and has every ack

    def _end_after_reject(self) -> None:
        """End the connection after a reject's ack: send end-of-file, discard whatever the
        sender still sends, close at its end-of-file or after REJECT_LINGER_S. Closing with
        unread input at once makes the kernel answer with a reset, which can destroy the
        ack before the sender has read it."""
        self._closing = True
        transport = self._transport()
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(REJECT_LINGER_S, transport.close)

    def eof_received(self) -> bool:
        if self._buffered and not self._closing:
            part = "header" if self._buffered < wire.HEADER_SIZE else "body"
            self.server.reject(
                self.peer,
                wire.Status.BAD_LENGTH,
                f"truncated frame: {part} incomplete, {self._buffered} bytes",
            )
            self._hold(-self._buffered)
            self._chunks, self._buffered = [], 0
        self._eof = True
        return bool(self._inflight)  # keep the transport open to send the pending acks

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._inflight.clear()
        self._deadline.clear()
        self._hold(-self._buffered)
        self._chunks, self._buffered = [], 0
        self.server.guard.release(self)
        self.server.forget(self)
