"""MUNGE credentials for Python: encode and decode through libmunge (ctypes).

The collector decodes every TCP sender's credential into the uid/gid munged vouches for
and encodes the credential it answers with; `stacklens replay` encodes the one it sends.
libmunge is called in-process (the calls release the GIL; the collector runs them on a
worker thread): one round trip to the local munged over its Unix socket, about a tenth of
a millisecond, where running the `munge`/`unmunge` tools would cost a fork and exec
(milliseconds) per connection. The library is loaded on first use; without it
(`libmunge2` not installed) every call raises MungeError saying so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass

#: munge_opt_t value of MUNGE_OPT_SOCKET (munge.h): the socket of the munged to use.
_OPT_SOCKET = 8
_LIBRARY = "libmunge.so.2"


class MungeError(Exception):
    """A credential could not be made or was not valid; the message says why."""


@dataclass(frozen=True)
class Decoded:
    """What munged vouches for: the credential's payload and its issuer's uid and gid."""

    payload: bytes
    uid: int
    gid: int


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    """libmunge, loaded once, with the prototypes used here."""
    global _lib
    with _lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("munge") or _LIBRARY)
            except OSError as exc:
                raise MungeError(f"libmunge is not installed ({exc})") from exc
            lib.munge_ctx_create.restype = ctypes.c_void_p
            lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
            lib.munge_ctx_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
            lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
            lib.munge_ctx_strerror.restype = ctypes.c_char_p
            lib.munge_strerror.argtypes = [ctypes.c_int]
            lib.munge_strerror.restype = ctypes.c_char_p
            lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                         ctypes.c_char_p, ctypes.c_int]  # fmt: skip
            lib.munge_decode.argtypes = [
                ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint32),
                ctypes.POINTER(ctypes.c_uint32),
            ]  # fmt: skip
            _libc.free.argtypes = [ctypes.c_void_p]
            _lib = lib
        return _lib


_libc = ctypes.CDLL(None)


def _context(lib: ctypes.CDLL, socket: str | None) -> int:
    ctx = lib.munge_ctx_create()
    if not ctx:
        raise MungeError("libmunge: out of memory")
    if socket and lib.munge_ctx_set(ctx, _OPT_SOCKET, socket.encode()) != 0:
        lib.munge_ctx_destroy(ctx)
        raise MungeError(f"libmunge: cannot use the munged socket {socket}")
    return int(ctx)


def _error(lib: ctypes.CDLL, ctx: int, code: int) -> str:
    detail = lib.munge_ctx_strerror(ctx) or lib.munge_strerror(code)
    return detail.decode("utf-8", "replace")


def encode(payload: bytes, socket: str | None = None) -> bytes:
    """A credential for the calling process's uid/gid carrying `payload` (its text, the
    form munged writes), from the munged at `socket` (default: libmunge's)."""
    lib = _library()
    ctx = _context(lib, socket)
    cred = ctypes.c_void_p()
    try:
        code = lib.munge_encode(ctypes.byref(cred), ctx, payload, len(payload))
        if code != 0 or not cred.value:
            raise MungeError(f"munge_encode: {_error(lib, ctx, code)}")
        return ctypes.string_at(cred.value)
    finally:
        if cred.value:
            _libc.free(cred.value)
        lib.munge_ctx_destroy(ctx)


def decode(credential: bytes, socket: str | None = None) -> Decoded:
    """The payload, uid and gid of a credential as the munged at `socket` vouches for them;
    MungeError if it is invalid, expired, replayed or from another key."""
    if b"\0" in credential:
        raise MungeError("credential holds a NUL byte")
    lib = _library()
    ctx = _context(lib, socket)
    buf, length = ctypes.c_void_p(), ctypes.c_int()
    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    try:
        code = lib.munge_decode(credential, ctx, ctypes.byref(buf), ctypes.byref(length),
                                ctypes.byref(uid), ctypes.byref(gid))  # fmt: skip
        if code != 0:
            raise MungeError(f"munge_decode: {_error(lib, ctx, code)}")
        payload = ctypes.string_at(buf.value, length.value) if buf.value else b""
        return Decoded(payload, uid.value, gid.value)
    finally:
        if buf.value:
            _libc.free(buf.value)
        lib.munge_ctx_destroy(ctx)
