"""TCP ingest server for hook frames.

Per connection: read a header, check it (magic, version, length cap, token, ranges), read
the body, split it into tables, hand the frame to the writer and acknowledge it once it
is committed. Acks go back in frame order while later frames are already being read, so
a sender may pipeline. A bad frame is answered with its reject status, logged with the
reason, counted, and the connection is closed; nothing of it is stored.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import time
from dataclasses import dataclass, field

from collector.store.partitions import DAY_NS
from collector.store.writer import FrameWriter
from stacklens import wire

log = logging.getLogger(__name__)


#: "No item carried over" in `_send_acks` (None is the queue's end marker).
_NOTHING = object()


def _is_loopback(peername) -> bool:
    """Whether a socket peer address is on the loopback interface."""
    try:
        return bool(peername) and ipaddress.ip_address(peername[0]).is_loopback
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
    ):
        self.writer = writer
        self.host, self.port = host, port
        self.token = token
        self.max_body = max_body
        self.retention_days = retention_days
        self.stats = IngestStats()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Start listening (port 0 picks a free port; see `self.port` afterwards)."""
        if not self.token:
            log.warning(
                "NO INGEST TOKEN CONFIGURED (STACKLENS_INGEST_TOKEN): only senders on the "
                "loopback interface are accepted"
            )
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
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

    def _reject(self, peer: str, error: wire.FrameError) -> None:
        self.stats.rejected[error.status.name.lower()] += 1
        log.warning("rejected frame from %s: %s [%s]", peer, error.reason, error.status.name)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.stats.connections += 1
        if not self.token and not _is_loopback(peername):
            self._reject(
                peer,
                wire.FrameError(
                    wire.Status.BAD_TOKEN,
                    "no ingest token configured: only loopback senders are accepted",
                ),
            )
            writer.write(wire.encode_ack(wire.Status.BAD_TOKEN, 0))
            writer.close()
            return
        acks: asyncio.Queue = asyncio.Queue()
        ack_task = asyncio.create_task(self._send_acks(acks, writer, peer))
        try:
            await self._read_frames(reader, acks, peer)
        finally:
            await acks.put(None)
            await ack_task
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _read_frames(
        self, reader: asyncio.StreamReader, acks: asyncio.Queue, peer: str
    ) -> None:
        seq = 0
        while True:
            try:
                raw = await reader.readexactly(wire.HEADER_SIZE)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    self._reject(
                        peer,
                        wire.FrameError(
                            wire.Status.BAD_LENGTH,
                            f"truncated frame: header of {len(exc.partial)} of "
                            f"{wire.HEADER_SIZE} bytes",
                        ),
                    )
                return
            except ConnectionError:
                return
            try:
                header = wire.decode_header(raw, self.max_body)
                seq = header.seq
                wire.check_header(header, self.token, oldest_ns=self.oldest_ns())
                body = await reader.readexactly(header.body_len)
                frame = wire.decode_body(header, body)
            except wire.FrameError as error:
                self._reject(peer, error)
                await acks.put((error.status, seq, None))
                return
            except asyncio.IncompleteReadError as exc:
                self._reject(
                    peer,
                    wire.FrameError(
                        wire.Status.BAD_LENGTH,
                        f"truncated frame: body of {len(exc.partial)} of {header.body_len} bytes",
                    ),
                )
                return
            except ConnectionError:
                return
            self.stats.frames_received += 1
            stored = await self.writer.submit([frame])
            await acks.put((wire.Status.COMMITTED, header.seq, stored))

    async def _send_acks(
        self, acks: asyncio.Queue, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        """Write acks in frame order, as many per write as are ready.

        At the first failed commit, stop acknowledging and drop the connection: the
        sender keeps every unacknowledged frame and resends it after reconnecting.
        """
        failed = False
        ready = bytearray()  # acks of committed frames not written yet
        carry = _NOTHING  # an item (or the closing None) taken from the queue to look ahead
        while (item := await acks.get() if carry is _NOTHING else carry) is not None:
            carry = _NOTHING
            status, seq, stored = item
            if stored is not None:
                try:
                    await stored
                except wire.FrameError as error:  # refused by the database: a reject
                    self._reject(peer, error)
                    status = error.status
                except Exception:  # the writer logged why; the sender will resend
                    if not failed:
                        writer.transport.abort()
                    failed = True
            if failed:
                continue
            ready += wire.encode_ack(status, seq)
            if status == wire.Status.COMMITTED and not acks.empty():
                carry = acks.get_nowait()
                if carry is not None and (carry[2] is None or carry[2].done()):
                    continue  # the next ack is ready too: send both in one write
            try:
                writer.write(bytes(ready))
                ready.clear()
                await writer.drain()
            except (ConnectionError, OSError):
                log.info("connection from %s closed before its acks were sent", peer)
                failed = True
            if status != wire.Status.COMMITTED and not failed:
                writer.transport.close()  # like any reject: the sender reconnects
                failed = True
