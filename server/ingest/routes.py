"""HTTP ingest: JSON batches go through the binary wire validation and the same writer."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Security
from fastapi.security import HTTPBearer

from collector import codec
from server.errors import error_responses
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
    except UnicodeEncodeError:
        raise wire.FrameError(wire.Status.BAD_BODY, "a text value is not valid Unicode") from None
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
    """Text values as UTF-8 (UnicodeEncodeError for lone surrogates); a NUL, which would end
    the text early in storage, is refused."""
    if any(isinstance(v, str) and "\0" in v for v in row.values()):
        raise ValueError("a text value contains a NUL character")
    return {k: v.encode() if isinstance(v, str) else v for k, v in row.items()}


@router.post(
    "/frames",
    response_model=IngestResult,
    dependencies=[Security(HTTPBearer(auto_error=False, description="the ingest token"))],
    responses=error_responses(
        400, 401, 403, 413, 503, **{"422": "a frame is invalid: every reason, nothing stored"}
    ),
)
async def ingest_frames(batch: JsonBatch, request: Request) -> IngestResult:
    """Validate every frame of the batch, then store them all; answer after COMMIT.

    Authorization: `Bearer <STACKLENS_INGEST_TOKEN>` (checked, with the body size cap
    STACKLENS_HTTP_MAX_BODY_MB, before the body is read: server/ingest/gate.py); with no
    token configured, only clients on the loopback interface are accepted (403 otherwise).
    Trusted mode only (STACKLENS_INGEST_AUTH=trusted): a token proves no Unix user, so a
    collector in proven mode answers 403 (docs/identity.md); the frames belong to the
    collector's user. A batch with any invalid frame is rejected whole (422, with each
    reason) and stores nothing; so is a batch that needs more days without a partition
    than its owner may still bring this hour (STACKLENS_MAX_NEW_DAYS_PER_HOUR, shared with
    the owner's TCP connections). Resent frames are stored once.
    """
    collector = request.app.state.collector
    ingest = collector.ingest
    frames, errors = [], []
    limits = ingest.limits()
    for i, item in enumerate(batch.frames):
        try:
            frames.append(to_frame(item, limits))
        except wire.FrameError as error:
            ingest.stats.rejected[error.label] += 1
            errors.append(f"frame {i}: {error.reason} [{error.status.name}]")
    if errors:
        raise HTTPException(422, errors)
    scanned = codec.scan(b"".join(frames), limits)[0]
    if (fit := ingest.frames_within_new_days(scanned, scanned.owner, whole=True)) < len(frames):
        ingest.stats.rejected["partition_limit"] += len(frames) - fit
        raise HTTPException(422, [
            f"frame {fit}: the batch needs more days without a partition than the "
            f"{ingest.new_days.per_hour} its owner may still bring this hour "
            "(STACKLENS_MAX_NEW_DAYS_PER_HOUR); send those frames later"
        ])  # fmt: skip
    ingest.stats.frames_received += len(frames)
    try:
        await collector.writer.store(scanned, atomic=True)
    except wire.FrameError as error:
        ingest.stats.rejected[error.status.name.lower()] += 1
        raise HTTPException(422, [error.reason]) from error
    except Exception as exc:  # the writer logged it
        raise HTTPException(503, f"could not store the batch, resend it: {exc}") from exc
    return IngestResult(stored=len(frames))
