"""Python senders' side of the ingest connection: open one to the collector, proven.

The counterpart of the hook library's mpi_pmpi_hooks/src/proof.c for Python senders
(`stacklens replay`, tests): in proven mode the collector's Unix socket on this node is
used when it exists (the kernel vouches for both ends: SO_PEERCRED), else TCP with a MUNGE
credential, and the collector must prove itself (its socket's uid, or a MUNGE credential
for our nonce) to be the collector user before a frame is written. In trusted mode it is
a plain TCP connection (frames carry the token).
"""

from __future__ import annotations

import os
import secrets
import socket
import stat
import struct
from pathlib import Path

from stacklens import munge, wire
from stacklens.settings import Settings, user_id

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class ProofError(OSError):
    """The collector could not be proven (or refused us); the message says why."""


def collector_uid_ok(settings: Settings, uid: int) -> bool:
    """Whether `uid` is the collector user: STACKLENS_COLLECTOR_USER, else root or us."""
    if settings.collector_user:
        return uid == user_id(settings.collector_user)
    return uid in (0, os.geteuid())


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ProofError("the collector closed the connection during the hello")
        data += chunk
    return data


def _unix_socket(settings: Settings) -> Path | None:
    """The collector's Unix socket on this node, if proven mode offers one here."""
    if settings.collector_socket == "off":
        return None
    path = Path(settings.collector_socket)
    try:
        return path if stat.S_ISSOCK(path.stat().st_mode) else None
    except OSError:
        return None


def open_connection(settings: Settings, owner_uid: int, timeout: float = 30.0) -> socket.socket:
    """A connection to the collector on which frames of `owner_uid` may be written (only an
    admin may name another user than itself); ProofError if the collector is not proven
    or refuses, OSError if it cannot be reached."""
    if settings.ingest_auth == "trusted":
        return socket.create_connection((settings.collector_host, settings.collector_port),
                                        timeout=timeout)  # fmt: skip
    nonce = secrets.token_bytes(16)
    path = _unix_socket(settings)
    if path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            path = None
    if path is None:
        sock = socket.create_connection((settings.collector_host, settings.collector_port),
                                        timeout=timeout)  # fmt: skip
    try:
        _prove(sock, settings, owner_uid, nonce, unix=path is not None)
    except BaseException:
        sock.close()
        raise
    return sock


def _prove(sock: socket.socket, settings: Settings, owner: int, nonce: bytes, unix: bool) -> None:
    """The proof of a fresh connection (contract/stacklens_wire.def, "connection start")."""
    if unix:
        _, uid, _ = _UCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        if not collector_uid_ok(settings, uid):
            raise ProofError(f"the collector's socket belongs to uid {uid}, not the collector")
        sock.sendall(wire.Hello(wire.Proof.PEER, owner, nonce).encode())
        _final(sock)
        return
    sock.sendall(wire.Hello(wire.Proof.MUNGE, owner, nonce).encode())
    challenge = _welcome(sock)
    if challenge.status != wire.Status.COMMITTED:
        raise ProofError(f"the collector refused us: {wire.Status(challenge.status).name.lower()}")
    if not 0 < challenge.cred_len <= wire.BOUNDS["max_cred_bytes"]:
        raise ProofError("the collector did not prove itself (no credential)")
    munge_socket = settings.munge_socket or None
    try:
        decoded = munge.decode(_recv_exactly(sock, challenge.cred_len), munge_socket)
    except munge.MungeError as exc:
        raise ProofError(f"the collector's credential is not valid: {exc}") from exc
    if decoded.payload != nonce:
        raise ProofError("the collector's credential was not made for this connection")
    if not collector_uid_ok(settings, decoded.uid):
        raise ProofError(f"the collector runs as uid {decoded.uid}, not as the collector user")
    try:
        credential = munge.encode(challenge.nonce, munge_socket)
    except munge.MungeError as exc:
        raise ProofError(str(exc)) from exc
    sock.sendall(wire.encode_cred(credential))
    _final(sock)


def _welcome(sock: socket.socket) -> wire.Welcome:
    try:
        return wire.Welcome.decode(_recv_exactly(sock, wire.WELCOME_SIZE))
    except ValueError as exc:
        raise ProofError(f"not a collector in proven mode: {exc}") from exc


def _final(sock: socket.socket) -> None:
    """Read the final welcome: frames may follow, or ProofError with the refusal."""
    status = _welcome(sock).status
    if status != wire.Status.COMMITTED:
        raise ProofError(f"the collector refused us: {wire.Status(status).name.lower()}")
