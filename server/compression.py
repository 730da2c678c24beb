"""Content coding of the API's answers (RFC 9110 §12.5.3): brotli (`br`) or gzip, chosen from
the request's Accept-Encoding with its q-values, for every answer of COMPRESS_FROM_BYTES or
more whose media type is not compressed already.

- `negotiate` reads Accept-Encoding: the coding with the highest q-value wins, `br` before
  `gzip` before no coding (`identity`) when they tie; `*` stands for every coding the header
  does not name; `identity` named by neither comes after every coding named; `x-gzip` is
  gzip; an entry with a malformed q-value is ignored. No header at all: no coding (a
  client that says nothing may not decode one).
- An answer under COMPRESS_FROM_BYTES goes as it is, unless the client refuses `identity`
  (`identity;q=0`, or `*;q=0` without an `identity` entry) and accepts a coding; a client
  that refuses `identity` and accepts no coding gets it as it is too (RFC 9110 says so).
- `Compression` is the app's middleware: whole answers compressed with their exact
  Content-Length, streamed ones chunk by chunk (flushed, no Content-Length), answers that
  carry a Content-Encoding already (the fabric's answers, compressed once for every
  viewer) passed as they are, `Vary: Accept-Encoding` on every answer of a compressible
  media type whatever its size. A HEAD answer with no body says the coding a GET would
  have and no Content-Length (the compressed length is known only by compressing).
- `compress` and `brotli_tail` are the codings themselves, for answers that routes encode
  once for many requests (server/fabric/snapshot.Encoded, server/export.SplicedJson).

Brotli at quality 4 costs about half of gzip level 6's CPU on the API's JSON and is smaller
(bench/RESULTS.md, 2026-12-07): the answers are dynamic, compressed as they are asked.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Literal

import anyio.to_thread
import brotli
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Answers of at least this many bytes are compressed for a client that accepts a coding.
COMPRESS_FROM_BYTES = 1024
#: gzip's level and brotli's quality.
GZIP_LEVEL = 6
BROTLI_QUALITY = 4
#: Bodies at least this large are compressed in a worker thread, not on the event loop.
THREAD_FROM_BYTES = 128 * 1024

Coding = Literal["br", "gzip", "identity"]
#: The codings in the order they are preferred when their q-values tie.
PREFERENCE: tuple[Coding, ...] = ("br", "gzip", "identity")

#: Media types never compressed: compressed already (images, fonts, archives, PDF, Parquet)
#: or read as they arrive (the report progress lines, event streams).
UNCOMPRESSED_TYPES = frozenset({
    "application/gzip", "application/x-gzip", "application/zip", "application/pdf",
    "application/vnd.apache.parquet", "application/x-ndjson", "text/event-stream",
    "font/woff", "font/woff2", "image/avif", "image/gif", "image/jpeg", "image/png",
    "image/webp", "audio/*", "video/*",
})  # fmt: skip

#: The rank of `identity` when the header names neither it nor `*`: below every q-value.
UNNAMED_IDENTITY = 1e-6
_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")


@dataclass(frozen=True)
class Accepted:
    """What a request's Accept-Encoding accepts: the coding of a large answer and whether an
    answer may go without one."""

    coding: Coding
    identity_ok: bool

    def for_size(self, size: int) -> Coding:
        """The coding of an answer of `size` bytes."""
        if size < COMPRESS_FROM_BYTES and self.identity_ok:
            return "identity"
        return self.coding


def negotiate(accept_encoding: str | None) -> Accepted:
    """The codings `accept_encoding` (an Accept-Encoding header's value, None when the
    request has none) accepts, as the module's doc says."""
    if accept_encoding is None:
        return Accepted("identity", True)
    q: dict[str, float] = {}
    for entry in accept_encoding.split(","):
        name, *params = (part.strip() for part in entry.split(";"))
        name = "gzip" if name.lower() == "x-gzip" else name.lower()
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if _QVALUE.fullmatch(value) else -1.0
        if name and weight >= 0 and name not in q:
            q[name] = weight
    default = q.get("*", 0.0)
    weights = {c: q.get(c, default) for c in ("br", "gzip")}
    # identity unnamed: acceptable, after any coding the header names (RFC 9110 gives it no
    # q-value then)
    weights["identity"] = q.get("identity", q.get("*", UNNAMED_IDENTITY))
    best = max(PREFERENCE, key=lambda c: (weights[c], -PREFERENCE.index(c)))
    return Accepted(best if weights[best] > 0 else "identity", weights["identity"] > 0)


def compress(body: bytes, coding: Coding) -> bytes:
    """`body` in `coding` (gzip without a timestamp, so equal bodies compress equally)."""
    if coding == "br":
        return bytes(brotli.compress(body, quality=BROTLI_QUALITY))
    if coding == "gzip":
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip stream, mtime 0
        return packer.compress(body) + packer.flush()
    return body


def brotli_head(head: bytes) -> bytes:
    """The start of a brotli stream of `head` that `brotli_tail` ends: compressed and
    flushed, so it ends on a byte boundary with no last meta-block."""
    packer = brotli.Compressor(quality=BROTLI_QUALITY)
    return bytes(packer.process(head) + packer.flush())


def brotli_tail(tail: bytes) -> bytes:
    """The end of a brotli stream begun by `brotli_head`: `tail` as uncompressed meta-blocks
    of at most 64 KiB (RFC 7932 §9.2: ISLAST 0, MNIBBLES 4, MLEN - 1, ISUNCOMPRESSED 1, the
    rest of the third byte zero), then the empty last meta-block (ISLAST 1, ISLASTEMPTY 1)."""
    out = bytearray()
    for start in range(0, len(tail), 1 << 16):
        chunk = tail[start : start + (1 << 16)]
        out += (((len(chunk) - 1) << 3) | (1 << 19)).to_bytes(3, "little") + chunk
    return bytes(out + b"\x03")


class _Stream:
    """One answer's coding, chunk by chunk; each chunk flushed so the client can decode
    what it has."""

    def __init__(self, coding: Coding) -> None:
        self._br = brotli.Compressor(quality=BROTLI_QUALITY) if coding == "br" else None
        self._gz = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31) if coding == "gzip" else None

    def feed(self, chunk: bytes, last: bool) -> bytes:
        if self._br is not None:
            out = self._br.process(chunk)
            return bytes(out + (self._br.finish() if last else self._br.flush()))
        if self._gz is not None:
            return self._gz.compress(chunk) + self._gz.flush(zlib.Z_FINISH if last
                                                             else zlib.Z_SYNC_FLUSH)  # fmt: skip
        return chunk


def compressible(headers: Headers) -> bool:
    """Whether an answer with these headers may be compressed by its media type."""
    media = headers.get("content-type", "").partition(";")[0].strip().lower()
    return bool(media) and not {media, media.partition("/")[0] + "/*"} & UNCOMPRESSED_TYPES


def vary(headers: MutableHeaders) -> None:
    """`Accept-Encoding` added to the answer's Vary unless it is there."""
    named = [v.strip() for v in headers.get("vary", "").split(",") if v.strip()]
    if not any(v.lower() in ("accept-encoding", "*") for v in named):
        headers["Vary"] = ", ".join([*named, "Accept-Encoding"])


class Compression:
    """ASGI middleware: each answer in the coding its request accepts (module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        accepted = negotiate(Headers(scope=scope).get("accept-encoding"))
        responder = _Responder(send, accepted, scope["method"] == "HEAD")
        await self.app(scope, receive, responder.send)


class _Responder:
    """One answer through the middleware: its start held until enough of its body is there
    to choose the coding."""

    def __init__(self, send: Send, accepted: Accepted, head: bool) -> None:
        self._send = send
        self._accepted = accepted
        self._head = head
        self._start: Message | None = None
        self._held = bytearray()
        self._stream: _Stream | None = None
        self._passing = False  # sending the body as it comes

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self._start = message
            headers = MutableHeaders(raw=message.setdefault("headers", []))
            if compressible(headers) or "content-encoding" in headers:
                vary(headers)
            self._passing = (
                "content-encoding" in headers or message["status"] in (204, 206, 304)
                or not compressible(headers)
            )  # fmt: skip
            if self._passing:
                await self._send_start()
        elif kind == "http.response.body" and not self._passing:
            if self._stream is None:
                await self._body(message)
            else:
                last = not message.get("more_body", False)
                body = await self._feed(message.get("body", b""), last)
                await self._send({**message, "body": body})
        else:  # the body as it is, a pathsend (a file as it is), trailers
            self._passing = self._stream is None
            await self._send_start()
            await self._send(message)

    async def _feed(self, chunk: bytes, last: bool) -> bytes:
        """A streamed chunk coded, in a worker thread when it is large (a WSGI app's whole
        file comes as one chunk; the codecs release the GIL)."""
        assert self._stream is not None
        if len(chunk) >= THREAD_FROM_BYTES:
            return await anyio.to_thread.run_sync(self._stream.feed, chunk, last)
        return self._stream.feed(chunk, last)

    async def _send_start(self) -> None:
        if self._start is not None:
            await self._send(self._start)
            self._start = None

    async def _body(self, message: Message) -> None:
        """The body's first chunks: held until COMPRESS_FROM_BYTES of them or the last."""
        assert self._start is not None
        self._held += message.get("body", b"")
        more = message.get("more_body", False)
        if more and len(self._held) < COMPRESS_FROM_BYTES:
            return
        headers = MutableHeaders(raw=self._start["headers"])
        if self._head and not self._held and not more:  # HEAD: the headers of a GET
            coding = self._accepted.for_size(int(headers.get("content-length", "0")))
            if coding != "identity":
                headers["Content-Encoding"] = coding
                del headers["Content-Length"]
            await self._send_start()
            await self._send(message)
            return
        coding = self._accepted.for_size(len(self._held) if not more else COMPRESS_FROM_BYTES)
        body = bytes(self._held)
        if coding == "identity":
            self._passing = True
        elif more:
            self._stream = _Stream(coding)
            body = await self._feed(body, last=False)
            headers["Content-Encoding"] = coding
            del headers["Content-Length"]
        else:
            if len(body) >= THREAD_FROM_BYTES:
                body = await anyio.to_thread.run_sync(compress, body, coding)
            else:
                body = compress(body, coding)
            headers["Content-Encoding"] = coding
            headers["Content-Length"] = str(len(body))
        await self._send_start()
        await self._send({**message, "body": body})
