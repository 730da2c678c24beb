"""HTTP ingest: JSON batches go through the binary wire validation and the same writer."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Request

from collector import codec
from collector.ingest.server import accepted_without_token
from server.ingest.schemas import IngestResult, JsonBatch, JsonFrame
from stacklens import wire

router = APIRouter(prefix="/api/ingest", tags=["ingest"])


def to_frame(item: JsonFrame, limits: codec.Limits) -> bytes:
    """Encode a JSON frame as a binary one and validate it exactly like a hook frame."""
    tables = dict(item.tables)
    if item.command is not None or item.user is not None or item.run_label is not None:
        tables["rank_info"] = [
            {
                "command": item.command or "",
                "user": item.user or "",
                "run_label": item.run_label or "",
            }
        ]
    known = {table.name: tuple(wire.fields_of(table.dtype)) for table in wire.SPEC.tables.values()}
    for name, rows in tables.items():
        if name not in known:
            raise wire.FrameError(wire.Status.BAD_BODY, f"unknown table {name!r}")
        for row in rows:
            if unknown := sorted(set(row) - set(known[name])):
                raise wire.FrameError(
                    wire.Status.BAD_BODY, f"unknown field {unknown[0]!r} in table {name}"
                )
    try:
        records = {
            name: wire.records(name, [_encode_text(row) for row in rows])
            for name, rows in tables.items()
        }
    except (ValueError, OverflowError, TypeError) as exc:
        raise wire.FrameError(wire.Status.OUT_OF_RANGE, f"bad value: {exc}") from exc
    raw = wire.encode_frame(
        job_id=item.job, run_id=item.run_id, proc_start_ns=item.proc_start_ns,
        world_rank=item.world_rank, world_size=item.world_size, seq=item.seq,
        interval_start_ns=item.interval_start_ns, interval_end_ns=item.interval_end_ns,
        host=item.host, pid=item.pid, token=limits.token.decode(),
        frame_type=_frame_type(item), tables=records,
    )  # fmt: skip
    _, error = codec.scan(raw, limits)
    if error is not None:
        raise wire.FrameError(error.status, error.reason)
    return raw


def _frame_type(item: JsonFrame) -> int:
    if item.killed:
        return int(wire.FrameType.KILLED)
    return int(wire.FrameType.FINAL if item.final else wire.FrameType.INTERVAL)


def _encode_text(row: dict[str, int | str]) -> dict[str, int | bytes]:
    return {k: v.encode() if isinstance(v, str) else v for k, v in row.items()}


@router.post("/frames", response_model=IngestResult)
async def ingest_frames(
    batch: JsonBatch,
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
) -> IngestResult:
    """Validate every frame of the batch, then store them all; answer after COMMIT.

    Authorization: `Bearer <STACKLENS_INGEST_TOKEN>`; with no token configured, only
    clients on the loopback interface are accepted (403 otherwise). A batch with any invalid
    frame is rejected whole (422, with each reason) and stores nothing; resent frames are
    stored once.
    """
    collector = request.app.state.collector
    if collector is None:
        raise HTTPException(503, "this server runs no collector")
    ingest = collector.ingest
    if not ingest.token and not accepted_without_token(request.client and request.client.host):
        ingest.stats.rejected["bad_token"] += 1
        raise HTTPException(403, "no ingest token configured: only loopback senders are accepted")
    token = (authorization or "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(token.encode(), ingest.token.encode()):
        ingest.stats.rejected["bad_token"] += 1
        raise HTTPException(401, "wrong ingest token")
    frames, errors = [], []
    limits = ingest.limits()
    for i, item in enumerate(batch.frames):
        try:
            frames.append(to_frame(item, limits))
        except wire.FrameError as error:
            ingest.stats.rejected[error.status.name.lower()] += 1
            errors.append(f"frame {i}: {error.reason} [{error.status.name}]")
    if errors:
        raise HTTPException(422, errors)
    ingest.stats.frames_received += len(frames)
    try:
        await collector.writer.store(codec.scan(b"".join(frames), limits)[0], atomic=True)
    except wire.FrameError as error:
        ingest.stats.rejected[error.status.name.lower()] += 1
        raise HTTPException(422, [error.reason]) from error
    except Exception as exc:  # the writer logged it
        raise HTTPException(503, f"could not store the batch, resend it: {exc}") from exc
    return IngestResult(stored=len(frames))
