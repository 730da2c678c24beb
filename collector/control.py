"""The collector's control channel: how a process that does not run the collector (the API
of `stacklens up`, which runs the collector in a process of its own:
stacklens_cli/collector_process.py) learns who the collector is, reads the figures
/metrics exports, and hands it the HTTP ingest's batches to validate and store.

A Unix socket in a directory only the collector's user may enter (the channel carries the
ingest token). One request per connection; a request and its answer have the same form:
`<u32 header length><u32 payload length>` (little-endian), a JSON object (the header),
then the payload bytes. Requests name their operation in the header's "op":

- `status`: who answers (CollectorStatus: pid, TCP port, ingest mode, the ingest token
  the HTTP ingest checks);
- `figures`: the counters /metrics exports (CollectorFigures);
- `reject`: count one HTTP ingest request refused before its body was read, under
  "label";
- `ingest`: the payload is an HTTP ingest body, validated and stored by the collector
  (collector/ingest/json_frames.py); the header of the answer says how it went
  (JsonAnswer).

An answer's header holds "error" (text) when the request itself was malformed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_LENGTHS = struct.Struct("<II")
#: Largest header either side sends (JSON of a few figures or a validation report).
MAX_HEADER_BYTES = 16 << 20
#: Seconds to wait for the answer to `status`, `figures` or `reject`.
QUICK_TIMEOUT_S = 5.0
#: Seconds to wait for a stored batch (a batch at the HTTP body cap, COPY included).
INGEST_TIMEOUT_S = 300.0


class CollectorUnavailable(Exception):
    """The collector did not answer on its control socket (not started, restarting,
    stopped, or too slow)."""


@dataclass(frozen=True)
class CollectorStatus:
    """Who answers on the control socket: its process id, the TCP port hooks send to,
    how senders are proven (STACKLENS_INGEST_AUTH: proven, trusted) and the ingest
    token."""

    pid: int
    port: int
    auth: str
    token: str

    @property
    def proven(self) -> bool:
        """Whether every sender must prove its Unix user."""
        return self.auth == "proven"


@dataclass(frozen=True)
class CollectorFigures:
    """What the collector has done so far (the counters and gauges of /metrics)."""

    connections: int  # hook connections accepted
    frames_received: int  # frames that passed validation (TCP and HTTP)
    rejected: dict[str, int]  # frames and HTTP ingest requests refused, by reason
    frames_committed: int
    frames_duplicate: int
    batches: int
    write_errors: int
    store_failed: int  # frames refused for a failure of their own (not a value, no outage)
    rollups_quarantined: int  # runs whose rollups a pass quarantined (sums out of range)
    rows: dict[str, int]  # delta rows written, by table
    names_folded: dict[str, int]  # records stored as the overflow record, by reason
    queue_depth: int  # frames waiting for the writer
    buffered_bytes: int  # bytes of incomplete frames held
    open_connections: int  # hook connections open now
    dropped_connections: dict[str, int]  # closed or refused by the limits, by reason

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> CollectorFigures:
        """The figures of a `figures` answer (unknown keys ignored)."""
        return cls(**{f.name: values[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class JsonAnswer:
    """How the collector answered an `ingest`: `status` 200 with `stored` frames; 422 with
    `errors` (the body does not validate as a batch: FastAPI's validation-error items) or
    `detail` (reasons, nothing stored); 503 with `detail` (could not store, or beyond the
    owner's storage budget: resend later)."""

    status: int
    stored: int = 0
    detail: Any = None
    errors: list[dict[str, Any]] | None = None


#: An operation's handler: (request header, payload) -> answer header.
Handler = Callable[[dict[str, Any], bytes], Awaitable[dict[str, Any]]]


async def _read_message(reader: asyncio.StreamReader, max_payload: int) -> tuple[dict, bytes]:
    """One message: its header (a JSON object) and payload; ValueError if malformed or
    over the bounds, asyncio.IncompleteReadError if the peer left."""
    header_len, payload_len = _LENGTHS.unpack(await reader.readexactly(_LENGTHS.size))
    if header_len > MAX_HEADER_BYTES or payload_len > max_payload:
        raise ValueError(f"message over the bounds ({header_len} + {payload_len} bytes)")
    header = json.loads(await reader.readexactly(header_len))
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    return header, await reader.readexactly(payload_len)


def _send(writer: asyncio.StreamWriter, header: dict[str, Any], payload: bytes = b"") -> None:
    """Queue one message on `writer` (the payload as it is: no copy of a large body)."""
    raw = json.dumps(header).encode()
    writer.write(_LENGTHS.pack(len(raw), len(payload)) + raw)
    if payload:
        writer.write(payload)


class ControlServer:
    """Serves the control channel at `path` with `handlers` (operation name -> coroutine);
    payloads are accepted up to `max_payload` bytes."""

    def __init__(self, path: Path, handlers: dict[str, Handler], max_payload: int):
        self.path = path
        self.handlers = handlers
        self.max_payload = max_payload
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen (a stale socket file at `path` is replaced); only this user may connect."""
        self.path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, str(self.path))
        self.path.chmod(0o600)

    async def stop(self) -> None:
        """Stop listening and remove the socket file."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                header, payload = await _read_message(reader, self.max_payload)
                handler = self.handlers.get(str(header.get("op")))
                if handler is None:
                    raise ValueError(f"unknown operation {header.get('op')!r}")
            except (ValueError, UnicodeDecodeError) as exc:
                answer = {"error": str(exc)}
            else:
                try:
                    answer = await handler(header, payload)
                except Exception:  # a bug: said here, the caller gets an error, serving goes on
                    log.exception("control request %r failed", header.get("op"))
                    answer = {"error": "the collector failed to answer (its log says why)"}
            _send(writer, answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client left
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


class CollectorLink:
    """The client side of the control channel at `path` (what the API holds of the
    collector). `restarts` counts the collector processes started again after one died
    (set by their supervisor)."""

    def __init__(self, path: Path):
        self.path = path
        self.restarts = 0
        self._status: CollectorStatus | None = None

    async def _call(
        self, op: str, fields: dict[str, Any] | None = None, payload: bytes = b"",
        timeout: float = QUICK_TIMEOUT_S,
    ) -> dict[str, Any]:  # fmt: skip
        """The answer header to one request; CollectorUnavailable if there is none in time."""

        async def exchange() -> dict[str, Any]:
            reader, writer = await asyncio.open_unix_connection(str(self.path))
            try:
                _send(writer, {"op": op, **(fields or {})}, payload)
                await writer.drain()
                answer, _ = await _read_message(reader, 0)
            finally:
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()
            if "error" in answer:
                raise CollectorUnavailable(f"the collector refused {op!r}: {answer['error']}")
            return answer

        try:
            return await asyncio.wait_for(exchange(), timeout)
        except TimeoutError as exc:  # before OSError, its base class
            raise CollectorUnavailable(f"no answer on {self.path} in {timeout:g} s") from exc
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            raise CollectorUnavailable(f"no answer on {self.path}: {exc}") from exc

    async def status(self, refresh: bool = False) -> CollectorStatus:
        """Who the collector is (asked once, then remembered unless `refresh`)."""
        if self._status is None or refresh:
            self._status = CollectorStatus(**(await self._call("status"))["status"])
        return self._status

    async def figures(self) -> CollectorFigures:
        """The collector's counters now."""
        return CollectorFigures.from_json((await self._call("figures"))["figures"])

    async def count_rejected(self, label: str) -> None:
        """Count a refused HTTP ingest request among the collector's rejected frames (lost,
        with a log line, if the collector does not answer)."""
        try:
            await self._call("reject", {"label": label})
        except CollectorUnavailable as exc:
            log.warning("a refused ingest request (%s) not counted: %s", label, exc)

    async def ingest(self, body: bytes) -> JsonAnswer:
        """Have the collector validate and store an HTTP ingest body."""
        answer = await self._call("ingest", payload=body, timeout=INGEST_TIMEOUT_S)
        return JsonAnswer(**answer["ingest"])
