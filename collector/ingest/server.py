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
incomplete frame stops being read until room is made. Frames whose interval ended before
the horizon (`horizon_days`, or the retention if shorter) are rejected (`too_old`), as are
those ending beyond the clock-skew window (`clock_skew`): no sender can make partitions
outside that window. Within it, an owner may bring at most `max_new_days_per_hour` days
without partitions per hour over all its connections and HTTP batches together
(collector/ingest/budget.py); the frame that would bring one more is answered
`unavailable` (the sender resends it later) and counted as `partition_limit`. Likewise an
owner may have at most `max_mb_per_hour` of frames stored per hour (StorageBudget): the
frame beyond is answered `unavailable` and counted as `storage_limit`; and at most
`max_stored_mb` of frames stored in all (StorageQuota, read from the database: a restart
changes nothing), the frame beyond answered `unavailable` (resent once retention made
room) and counted as `storage_quota`.

Who sends (`Identity`; contract/stacklens_wire.def, "connection start"): in proven mode a
connection must begin with a hello. On the Unix socket the sender's uid is the kernel's
(SO_PEERCRED). Over TCP the collector first proves itself (a challenge: its MUNGE
credential for the hello's nonce, and a nonce of its own), then decodes the sender's
credential for that nonce into the uid munged vouches for; a squatter on the port thus
gets a hello and nothing else. The hello names the owner of the connection's frames: the
proven uid itself, or anyone when the proven uid is an admin's (replay as root). A refusal
is a final welcome with its status (`unproven`, `not_owner`), counted under that reason,
and the connection ends. The Unix socket is made only in a directory of root's (or the
collector user's) that nobody else may write to, or a sticky one, and bound, given its
mode and removed through that directory's descriptor (`_socket_directory`). In trusted
mode there is no hello and every frame belongs to the collector's own user.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import os
import secrets
import socket
import stat
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import psycopg

from collector import codec
from collector.ingest.budget import NewDayBudget, StorageBudget, StorageQuota
from collector.store.writer import FrameWriter
from stacklens import munge, wire
from stacklens.connguard import ConnectionGuard, ConnectionLimits, Deadline
from stacklens.constants import DAY_NS

log = logging.getLogger(__name__)

#: Seconds a rejected sender's connection stays open to drain its input (see
#: _Connection._end_after_reject).
REJECT_LINGER_S = 5.0
_BODY_LEN = struct.Struct("<I")  # the header's body_len field, at byte 8
_BODY_LEN_OFFSET = wire.fields_of(wire.HEADER_DTYPE)["body_len"][1]
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_HELLO_MAGIC = struct.pack("<I", wire.HELLO_MAGIC)


def _socket_directory(directory: Path) -> int:
    """A descriptor of the directory the collector's Unix socket goes in (made 0755, with
    its parents, if missing), never opened through a link at its last component; OSError
    unless it belongs to root or to the collector's user and no one else may write to it
    (a sticky directory like /tmp excepted: there nobody may rename or remove our
    socket)."""
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(f"{directory}: {exc.strerror}") from None
    found = os.fstat(fd)
    why = None
    if found.st_uid not in (0, os.geteuid()):
        why = f"{directory} belongs to uid {found.st_uid}, not to root or the collector's user"
    elif found.st_mode & 0o022 and not found.st_mode & stat.S_ISVTX:
        why = f"other users may write to {directory} (mode {stat.S_IMODE(found.st_mode):o})"
    if why is not None:
        os.close(fd)
        raise OSError(why)
    return fd


def _answers(path: str) -> bool:
    """Whether something accepts connections on the Unix socket `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class Identity:
    """How senders are proven (see the module's doc): `auth` "proven" or "trusted"; the
    Unix socket offered in proven mode (None = none); the uids that may send for any
    owner; the local munged's socket (None = libmunge's default)."""

    auth: str = "trusted"
    unix_socket: str | None = None
    admins: frozenset[int] = frozenset({0})
    munge_socket: str | None = None

    @property
    def proven(self) -> bool:
        """Whether every connection must begin with a hello that proves its user."""
        return self.auth == "proven"


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
        horizon_days: int | None = None,
        max_skew_ns: int = wire.MAX_CLOCK_SKEW_NS,
        max_new_days_per_hour: int = 8,
        max_mb_per_hour: int = 262_144,
        max_stored_mb: int = 1 << 20,
        limits: ConnectionLimits | None = None,
        buffer_bytes: int = 64 << 20,
        identity: Identity | None = None,
    ):
        """`identity`: how senders are proven; default trusted mode (tests, embedding).
        `horizon_days` and `retention_days` (None: no limit): frames whose interval ended
        longer ago than the shorter of the two are rejected (`too_old`). `max_mb_per_hour`:
        MiB of frames each owner may have stored per hour (StorageBudget); `max_stored_mb`:
        in all (StorageQuota; read from the database by `start`)."""
        self.writer = writer
        self.identity = identity or Identity()
        self.host, self.port = host, port
        self.token = token
        self.max_body = max_body
        self.retention_days = retention_days
        self.horizon_days = horizon_days
        self.max_skew_ns = max_skew_ns
        self.new_days = NewDayBudget(writer.partitions, max_new_days_per_hour)
        self.storage = StorageBudget(max_mb_per_hour << 20)
        self.quota = StorageQuota(max_stored_mb << 20)
        self.stats = IngestStats()
        self.guard = ConnectionGuard("ingest", limits or ConnectionLimits())
        self.buffer_bytes = buffer_bytes
        self.buffered = 0  # bytes of incomplete frames held, all connections
        self._waiting: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._server: asyncio.Server | None = None
        self._unix_server: asyncio.Server | None = None
        self._unix_dir: int | None = None  # the Unix socket's directory, opened
        self._unix_inode = 0  # the Unix socket's inode, removed at stop if still there

    async def start(self) -> None:
        """Start listening (port 0 picks a free port; see `self.port` afterwards), and on
        the Unix socket in proven mode; what every owner has stored is read first."""
        await self.refresh_quota()
        if self.identity.proven:
            log.info("ingest: proven senders only (Unix socket peer credentials, MUNGE over "
                     "TCP); admins: uids %s", sorted(self.identity.admins))  # fmt: skip
        elif not self.token:
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
        if self.identity.proven and self.identity.unix_socket:
            await self._start_unix(Path(self.identity.unix_socket))

    async def _start_unix(self, path: Path) -> None:
        """Listen on the Unix socket `path` (open to every user: the kernel tells who
        connects). Its directory is opened once (`_socket_directory`) and everything is
        done through that descriptor: the check for another file or a live collector at
        the name, the bind, the mode 0666 and the removal at stop, so nobody can swap the
        name for a link to a file of root's between them. A directory that is not safe or
        cannot be made, another file there, or a live collector on it is logged and no
        socket is offered (the hooks then use TCP)."""
        try:
            dir_fd = _socket_directory(path.parent)
            try:
                self._unix_server, self._unix_inode = await self._listen_unix(dir_fd, path.name)
            except BaseException:
                os.close(dir_fd)
                raise
        except OSError as exc:
            log.warning("no Unix socket for the hooks at %s (%s): local hooks use TCP and "
                        "need MUNGE", path, exc)  # fmt: skip
            return
        self._unix_dir = dir_fd
        log.info("collector listening for hook frames on the Unix socket %s", path)

    async def _listen_unix(self, dir_fd: int, name: str) -> tuple[asyncio.Server, int]:
        """Serve the Unix socket `name` in the directory `dir_fd` (a stale socket of an
        earlier collector there is replaced); the server and the socket's inode."""
        here = f"/proc/self/fd/{dir_fd}/{name}"  # the name in that very directory
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(found.st_mode):
                raise OSError(f"{name} exists and is not a socket")
            if _answers(here):
                raise OSError("another collector listens on it")
            os.unlink(name, dir_fd=dir_fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(here)
            os.chmod(name, 0o666, dir_fd=dir_fd)  # a name only we may replace
            inode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino
            server = await asyncio.get_running_loop().create_unix_server(
                lambda: _Connection(self, unix=True), sock=sock,
                backlog=self.guard.limits.max_total,
            )  # fmt: skip
        except BaseException:
            sock.close()
            raise
        return server, inode

    async def stop(self) -> None:
        """Stop accepting and close the listening sockets (removing ours from its
        directory, if it is still ours)."""
        for server in (self._server, self._unix_server):
            if server is not None:
                server.close()
                await server.wait_closed()
        if self._unix_dir is not None and self.identity.unix_socket:
            name = Path(self.identity.unix_socket).name
            with contextlib.suppress(OSError):
                if os.stat(name, dir_fd=self._unix_dir, follow_symlinks=False).st_ino == (
                    self._unix_inode
                ):
                    os.unlink(name, dir_fd=self._unix_dir)
            os.close(self._unix_dir)
            self._unix_dir = None

    def oldest_ns(self) -> int | None:
        """Oldest interval end accepted now (the ingest horizon: the horizon days or the
        retention window, the shorter), None if unlimited."""
        days = [d for d in (self.horizon_days, self.retention_days) if d is not None]
        if not days:
            return None
        return time.time_ns() - min(days) * DAY_NS

    def limits(self) -> codec.Limits:
        """What frames are checked against, now."""
        return codec.limits(self.token, self.max_body, self.oldest_ns(),
                            max_skew_ns=self.max_skew_ns)  # fmt: skip

    def frames_within_new_days(
        self, batch: codec.FrameBatch, owner: int, whole: bool = False
    ) -> int:
        """How many leading frames of `batch` stay within the new-day budget of `owner`
        (charged with their new days; `whole`: all or nothing, see NewDayBudget.fit)."""
        return self.new_days.fit(owner, batch.info["t_end"], whole)

    def frames_within_storage(
        self, batch: codec.FrameBatch, owner: int, whole: bool = False
    ) -> int:
        """How many leading frames of `batch` stay within the storage budget of `owner`
        (charged with their bytes; `whole`: all or nothing, see StorageBudget.fit)."""
        return self.storage.fit(owner, batch.info["length"], whole)

    def frames_within_quota(self, batch: codec.FrameBatch, owner: int) -> int:
        """How many leading frames of `batch` fit within what `owner` may have stored in all
        (StorageQuota; charged when submitted: `submit`)."""
        return self.quota.fit(owner, batch.info["length"])

    async def refresh_quota(self) -> None:
        """Read what every owner has stored from the database (at start and at every
        maintenance pass); a database that does not answer leaves the figures as they
        were, with a warning."""
        try:
            async with await psycopg.AsyncConnection.connect(self.writer.url) as conn:
                await self.quota.refresh(conn)
        except (psycopg.Error, OSError) as exc:
            log.warning("could not read what each user has stored, retrying later: %s", exc)

    def submit(self, batch: codec.FrameBatch, atomic: bool = False) -> asyncio.Future:
        """Hand `batch` (of `batch.owner`) to the writer, charged to its owner's quota until
        it is committed (then counted as stored) or fails; the writer's future."""
        size, owner = int(batch.info["length"].sum(dtype=np.int64)), batch.owner
        self.quota.charge(owner, size)
        stored = self.writer.submit(batch, atomic)
        stored.add_done_callback(lambda f: self.quota.settle(
            owner, size, not f.cancelled() and f.exception() is None))  # fmt: skip
        return stored

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

    def __init__(self, server: IngestServer, unix: bool = False):
        self.server = server
        self.unix = unix  # on the Unix socket: the kernel says who the peer is
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        # the uid the frames are stored under: the collector's own in trusted mode, set by
        # an accepted hello in proven mode (None until then)
        self.owner: int | None = None if server.identity.proven else os.getuid()
        self._peer_uid: int | None = None  # SO_PEERCRED of a Unix socket peer
        self._proving: asyncio.Task[None] | None = None  # a step of the proof, while it runs
        self._hello: wire.Hello | None = None  # proven mode: the sender's hello, once read
        self._nonce = b""  # proven mode, TCP: the collector's nonce (the sender's payload)
        self._chunks: list[bytes] = []  # received bytes not yet scanned
        self._buffered = 0
        self._need = wire.HEADER_SIZE  # bytes to wait for before scanning again
        self._last_seq = 0
        # (writer future, or None for a reject found by the scan; seqs; status), in order
        self._inflight: collections.deque = collections.deque()
        self._closing = False
        self._eof = False
        self._proven = False  # a valid header has arrived (token included)
        self._paused: set[str] = set()  # why reading is paused: "writer", "memory", "hello"
        self._deadline = Deadline(self._expired)

    def _transport(self) -> asyncio.Transport:
        """The connection's transport (set once the connection is made)."""
        assert self.transport is not None, "no connection yet"
        return self.transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection (uvloop's
        # transports implement asyncio.Transport without subclassing it)
        self.server.stats.connections += 1
        if self.unix:
            sock = transport.get_extra_info("socket")
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
            _, self._peer_uid, _ = _UCRED.unpack(raw)
            self.peer = address = f"unix uid {self._peer_uid}"
        else:
            peername = transport.get_extra_info("peername")
            self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
            address = peername[0] if peername else "?"
        if not self.server.guard.admit(self, address):
            self.transport.abort()
            return
        self._deadline.set(self.server.guard.limits.handshake_timeout_s, "handshake_timeout")
        if self.server.identity.proven:
            self._need = wire.HELLO_SIZE
        elif not self.server.token and not accepted_without_token(address):
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
        if self.owner is None:
            self._hello_received(data)
            return
        self._frames_received(data)

    def _hello_received(self, data: bytes) -> None:
        """Collect the hello, then (TCP) the sender's credential message and credential;
        each complete step is proven off the read path (reading pauses meanwhile)."""
        self._chunks.append(data)
        self._buffered += len(data)
        self._hold(len(data))
        if self._buffered < self._need or self._proving is not None:
            return
        buffer = b"".join(self._chunks)
        if self._hello is None:
            if buffer[:4] != _HELLO_MAGIC:
                reason = "proven mode: the connection did not begin with a hello"
                self._refuse(wire.Status.UNPROVEN, reason, ack=True)
                return
            self._hello = wire.Hello.decode(buffer)
            used, step = wire.HELLO_SIZE, self._after_hello(self._hello)
        else:
            if self._need == wire.CRED_SIZE:
                try:
                    length = wire.decode_cred(buffer)
                except ValueError as exc:
                    self._refuse(wire.Status.UNPROVEN, str(exc))
                    return
                if not 0 < length <= wire.BOUNDS["max_cred_bytes"]:
                    self._refuse(wire.Status.UNPROVEN, f"credential of {length} bytes")
                    return
                self._need = wire.CRED_SIZE + length
                if self._buffered < self._need:
                    self._chunks = [buffer]
                    return
            used = self._need
            step = self._after_credential(buffer[wire.CRED_SIZE : used])
        rest = buffer[used:]
        self._hold(len(rest) - self._buffered)
        self._chunks, self._buffered = ([rest], len(rest)) if rest else ([], 0)
        self._pause("hello")
        self._proving = asyncio.get_running_loop().create_task(step)

    async def _after_hello(self, hello: wire.Hello) -> None:
        """Unix socket: the verdict on the peer's uid. TCP: the challenge, the collector's
        credential for the sender's nonce and a nonce of its own for the sender's."""
        if self.unix:
            if hello.proof != wire.Proof.PEER:
                self._refuse(wire.Status.UNPROVEN, "on the Unix socket the proof is 'peer'")
            else:
                assert self._peer_uid is not None, "read when the connection was made"
                self._verdict(self._peer_uid)
            return
        if hello.proof != wire.Proof.MUNGE:
            self._refuse(wire.Status.UNPROVEN, "over TCP the proof is a MUNGE credential")
            return
        self._nonce = secrets.token_bytes(16)
        try:
            credential = await asyncio.get_running_loop().run_in_executor(
                None, munge.encode, hello.nonce, self.server.identity.munge_socket
            )
        except munge.MungeError as exc:  # the sender cannot be answered: it resends later
            log.error("cannot prove the collector to %s: %s", self.peer, exc)
            self.server.stats.rejected["munge_unavailable"] += 1
            self.drop("munge_unavailable")
            return
        if self._write(wire.Welcome(wire.Status.COMMITTED, nonce=self._nonce).encode(credential)):
            self._need = wire.CRED_SIZE
            self._go_on()

    async def _after_credential(self, credential: bytes) -> None:
        """Decode the sender's credential (payload: the collector's nonce): the verdict."""
        try:
            decoded = await asyncio.get_running_loop().run_in_executor(
                None, munge.decode, credential, self.server.identity.munge_socket
            )
        except munge.MungeError as exc:
            self._refuse(wire.Status.UNPROVEN, f"MUNGE credential refused: {exc}")
            return
        if decoded.payload != self._nonce:
            self._refuse(wire.Status.UNPROVEN, "MUNGE credential not made for this connection")
            return
        self._verdict(decoded.uid)

    def _verdict(self, uid: int) -> None:
        """The sender is `uid`: accept the hello's owner if it is uid's own or uid is an
        admin's (the final welcome; frames follow), else refuse with not_owner."""
        assert self._hello is not None, "a verdict follows a hello"
        owner = self._hello.owner_uid
        if uid != owner and uid not in self.server.identity.admins:
            self._refuse(wire.Status.NOT_OWNER, f"uid {uid} may not send frames for uid {owner}")
            return
        if not self._write(wire.Welcome(wire.Status.COMMITTED, owner_uid=owner).encode()):
            return
        self.owner = owner
        self._proven = True
        self.peer = f"{self.peer} (uid {uid}, owner {owner})"
        self._need = wire.HEADER_SIZE
        self._deadline.set(self.server.guard.limits.idle_timeout_s, "idle_timeout")
        self._go_on()

    def _write(self, data: bytes) -> bool:
        """Write to the sender unless the connection is ending; whether it was written."""
        if self._closing or self.transport is None or self.transport.is_closing():
            return False
        self.transport.write(data)
        return True

    def _go_on(self) -> None:
        """A step of the proof is done: read again, first what already arrived."""
        self._proving = None
        if self._chunks:
            data = b"".join(self._chunks)
            self._hold(-self._buffered)
            self._chunks, self._buffered = [], 0
            self.data_received(data)
        self.resume("hello")

    def _refuse(self, status: wire.Status, reason: str, ack: bool = False) -> None:
        """Refuse the connection's proof: answer `status` (a final welcome, or an ack to a
        sender that sent a frame instead of a hello), count it under the status, end."""
        self._proving = None
        self._deadline.clear()
        self._hold(-self._buffered)
        self._chunks, self._buffered = [], 0
        self.server.reject(self.peer, status, reason)
        answer = wire.encode_ack(status, 0) if ack else wire.Welcome(status).encode()
        if self._write(answer):
            self._end_after_reject()

    def _frames_received(self, data: bytes) -> None:
        """Scan frames (the connection's owner is known). A frame begun in earlier reads
        whose length is known is completed from the head of this read and scanned on its
        own: the rest of the read is scanned where it lies, not copied after that frame's
        first part (a copy of every read: ~1 us per 64-peer frame, bench/RESULTS.md
        "Ingest, sixth pass")."""
        held = self._buffered  # incomplete-frame bytes accounted before this read
        if held + len(data) < self._need:
            self._chunks.append(data)
            self._buffered += len(data)
            self._hold(len(data))
            self._wait_if_over_budget()
            return
        start = 0
        if held and self._need > wire.HEADER_SIZE and len(data) > self._need - held:
            start = self._need - held
            if not self._scan(b"".join([*self._chunks, data[:start]]), 0, held):
                return
            held = 0
        elif held:
            data = b"".join([*self._chunks, data])
        self._scan(data, start, held)

    def _scan(self, buffer: bytes, start: int, held: int) -> bool:
        """Scan `buffer[start:]`, submit its valid frames, keep an incomplete one (`held`:
        the incomplete-frame bytes accounted before, all in `buffer`); False if a bad frame
        ended the connection."""
        batch, error = codec.scan(buffer, self.server.limits(), start)
        if len(batch):  # an invalid frame after them must not spare them the budget
            assert self.owner is not None, "frames before an accepted hello"
            fit = self.server.frames_within_new_days(batch, self.owner)
            if fit < len(batch):
                error = self._partition_limit(batch, fit)
                batch = _leading(batch, fit)
            fit = self.server.frames_within_storage(batch, self.owner)
            if fit < len(batch):
                error = self._storage_limit(batch, fit)
                batch = _leading(batch, fit)
            fit = self.server.frames_within_quota(batch, self.owner)
            if fit < len(batch):
                error = self._storage_quota(batch, fit)
                batch = _leading(batch, fit)
        rest = buffer[start + len(batch.data) :]
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
            return False
        if self._proven and not rest:
            self._deadline.set(self.server.guard.limits.idle_timeout_s, "idle_timeout")
        elif self._proven and (len(batch) or self._deadline.reason != "read_timeout"):
            self._deadline.set(self.server.guard.limits.read_timeout_s, "read_timeout")
        if self.server.writer.full:
            self._pause("writer")
            self.server.writer.when_room(lambda: self.resume("writer"))
        self._wait_if_over_budget()
        return True

    def _partition_limit(self, batch: codec.FrameBatch, fit: int) -> codec.ScanError:
        """The error for frame `fit`, the first that needs one more new partition day."""
        budget = self.server.new_days.per_hour
        reason = (f"frame needs a day without a partition beyond the {budget} its owner may "
                  "bring per hour (STACKLENS_MAX_NEW_DAYS_PER_HOUR); resend it later")  # fmt: skip
        seq = int(batch.info["seq"][fit])
        return codec.ScanError(wire.Status.UNAVAILABLE, seq, reason, "partition_limit")

    def _storage_limit(self, batch: codec.FrameBatch, fit: int) -> codec.ScanError:
        """The error for frame `fit`, the first beyond its owner's bytes for this hour."""
        budget = self.server.storage.per_hour >> 20
        reason = (f"frame beyond the {budget} MiB of frames its owner may have stored per "
                  "hour (STACKLENS_MAX_MB_PER_HOUR); resend it later")  # fmt: skip
        seq = int(batch.info["seq"][fit])
        return codec.ScanError(wire.Status.UNAVAILABLE, seq, reason, "storage_limit")

    def _storage_quota(self, batch: codec.FrameBatch, fit: int) -> codec.ScanError:
        """The error for frame `fit`, the first beyond what its owner may have stored."""
        quota = self.server.quota.limit >> 20
        reason = (f"frame beyond the {quota} MiB of frames its owner may have stored "
                  f"(STACKLENS_MAX_STORED_MB; uid {self.owner} has "
                  f"{self.server.quota.used(self.owner or 0) >> 20} MiB); resend it once the "
                  "retention has made room")  # fmt: skip
        seq = int(batch.info["seq"][fit])
        return codec.ScanError(wire.Status.UNAVAILABLE, seq, reason, "storage_quota")

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
        assert self.owner is not None, "frames before an accepted hello"
        batch.owner = self.owner
        batch.proven = self.server.identity.proven
        self.server.stats.frames_received += len(batch)
        seqs = batch.info["seq"]
        self._last_seq = int(seqs[-1])
        self._queue_ack(self.server.submit(batch), seqs, wire.Status.COMMITTED)

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
            error = refused[first]
            self.server.reject(self.peer, error.status, error.reason, error.label)
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


def _leading(batch: codec.FrameBatch, n: int) -> codec.FrameBatch:
    """The first `n` frames of `batch`."""
    return codec.FrameBatch(batch.data[: int(batch.info["offset"][n])], batch.info[:n])
