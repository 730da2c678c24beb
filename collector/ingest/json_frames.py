"""The HTTP ingest's batches, handled in the collector: the JSON form of a frame (the same
fields and tables as the binary wire format), each encoded as a binary frame and validated
exactly like a hook's, and the batch stored all or nothing.

The API process never parses or stores a batch: its route (server/ingest/routes.py) hands
the body over the collector's control channel (collector/control.py), so a large batch
costs the collector's process, not the API's answers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from collector import codec
from collector.control import JsonAnswer
from stacklens import wire

if TYPE_CHECKING:
    from collector.ingest.server import IngestServer

log = logging.getLogger(__name__)


def _text_field(size: int, id_rule: bool) -> AfterValidator:
    """A validator for a text field of `size` bytes: never longer (never cut), valid
    Unicode, no NUL; ids (job, host) also without any control character."""

    def check(value: str) -> str:
        if id_rule and not wire.clean_text(value):
            raise ValueError("must be UTF-8 text without control characters")
        try:
            length = len(value.encode())
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode (no lone surrogates)") from None
        if "\0" in value:
            raise ValueError("must not contain NUL")
        if length > size:
            raise ValueError(f"is {length} bytes in UTF-8; at most {size}")
        return value

    return AfterValidator(check)


def _header_size(field: str) -> int:
    return int(wire.fields_of(wire.HEADER_DTYPE)[field][0].itemsize)


def _rank_info_size(field: str) -> int:
    return int(wire.fields_of(wire.SPEC.table("rank_info").dtype)[field][0].itemsize)


JobId = Annotated[str, Field(min_length=1), _text_field(_header_size("job_id"), True)]
HostName = Annotated[str, _text_field(_header_size("host"), True)]
Command = Annotated[str, _text_field(_rank_info_size("command"), False)]
UserName = Annotated[str, _text_field(_rank_info_size("user"), False)]
RunLabel = Annotated[str, _text_field(_rank_info_size("run_label"), False)]
BuildId = Annotated[str, _text_field(_rank_info_size("exe_build_id"), False)]
NetDevices = Annotated[str, _text_field(_rank_info_size("net_devices"), False)]
ExePath = Annotated[str, _text_field(_rank_info_size("exe_path"), False)]


class JsonFrame(BaseModel):
    """One interval of one rank, as a third-party producer sends it.

    `tables` maps a wire table name (p2p, op, hist, coll, rma, io, health) to records
    whose keys are that table's field names (see contract/stacklens_wire.def);
    missing fields are zero, text fields are strings.
    """

    job: JobId
    run_id: int = Field(
        ge=0,
        lt=2**64,
        description="the launch this frame belongs to, the same for every rank of it (e.g. "
        "random, drawn once per launch); 0 = the job's run of processes without MPI (then "
        "world_rank 0, world_size 1 and a non-zero proc_start_ns)",
    )
    proc_start_ns: int = Field(
        default=0,
        ge=0,
        lt=2**64,
        description="start of the process; with host and pid the key of a process without MPI",
    )
    world_rank: int = Field(ge=0, lt=2**32)
    world_size: int = Field(ge=1, lt=2**32)
    seq: int = Field(ge=0, lt=2**63)
    interval_start_ns: int = Field(ge=0, lt=2**63)
    interval_end_ns: int = Field(ge=0, lt=2**63)
    host: HostName = ""
    pid: int = Field(default=0, ge=0, lt=2**32)
    final: bool = False
    killed: bool = Field(
        default=False, description="a final frame of a rank that ended by a signal (implies final)"
    )
    command: Command | None = None
    user: UserName | None = None
    run_label: RunLabel | None = Field(default=None, description="e.g. a step id")
    exe_build_id: BuildId | None = Field(
        default=None, description="the executable's GNU build-id in hex, when it has one"
    )
    net_devices: NetDevices | None = Field(
        default=None, description="the network devices the rank was told to use, NAME=value"
    )
    exe_path: ExePath | None = Field(
        default=None, description="the path of the process's executable (/proc/self/exe)"
    )
    tables: dict[str, list[dict[str, int | str]]] = Field(default_factory=dict)


class JsonBatch(BaseModel):
    """A batch of frames, stored all or nothing."""

    frames: list[JsonFrame] = Field(min_length=1, max_length=10_000)


def to_frame(item: JsonFrame, limits: codec.Limits) -> bytes:
    """Encode a JSON frame as a binary one and validate it exactly like a hook frame."""
    tables = dict(item.tables)
    info = (item.command, item.user, item.run_label, item.exe_build_id, item.net_devices,
            item.exe_path)  # fmt: skip
    if any(value is not None for value in info):
        tables["rank_info"] = [
            {
                "command": item.command or "",
                "user": item.user or "",
                "run_label": item.run_label or "",
                "exe_build_id": item.exe_build_id or "",
                "net_devices": item.net_devices or "",
                "exe_path": item.exe_path or "",
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


def _validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """The items of a batch that does not validate, as FastAPI reports a body's (located
    under "body"; the values sent are left out)."""
    return [
        {"loc": ["body", *e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False, include_context=False)
    ]


def _encode(body: bytes, limits: codec.Limits) -> tuple[list[bytes], list[tuple[str, str]]]:
    """The frames of the JSON batch `body`, each encoded and checked against `limits`,
    and the reason each invalid one is refused for (its /metrics label and a line of
    text); ValidationError if `body` is no batch."""
    frames: list[bytes] = []
    refused: list[tuple[str, str]] = []
    for i, item in enumerate(JsonBatch.model_validate_json(body).frames):
        try:
            frames.append(to_frame(item, limits))
        except wire.FrameError as error:
            refused.append((error.label, f"frame {i}: {error.reason} [{error.status.name}]"))
    return frames, refused


async def store_batch(ingest: IngestServer, body: bytes) -> JsonAnswer:
    """Validate every frame of the JSON batch `body`, then store them all (the answer
    comes after COMMIT); counted among `ingest`'s received and rejected frames.

    A batch with any invalid frame is rejected whole (422, with each reason) and stores
    nothing; so is a batch that needs more days without a partition than its owner may
    still bring this hour (the ingest's NewDayBudget, shared with the owner's TCP
    connections); a batch beyond the bytes its owner may have stored this hour
    (StorageBudget, shared likewise) or beyond what it may have stored in all (StorageQuota)
    is answered 503: resend it later. Resent frames are
    stored once. The batch is parsed and encoded on a worker thread, so the event loop
    keeps taking and acknowledging hook frames meanwhile (a batch at the HTTP body cap
    takes seconds).
    """
    limits = ingest.limits()
    try:
        frames, refused = await asyncio.to_thread(_encode, body, limits)
    except ValidationError as exc:
        return JsonAnswer(422, errors=_validation_errors(exc))
    for label, _ in refused:
        ingest.stats.rejected[label] += 1
    if refused:
        return JsonAnswer(422, detail=[reason for _, reason in refused])
    scanned = codec.scan(b"".join(frames), limits)[0]
    if (fit := ingest.frames_within_new_days(scanned, scanned.owner, whole=True)) < len(frames):
        ingest.stats.rejected["partition_limit"] += len(frames) - fit
        return JsonAnswer(422, detail=[
            f"frame {fit}: the batch needs more days without a partition than the "
            f"{ingest.new_days.per_hour} its owner may still bring this hour "
            "(STACKLENS_MAX_NEW_DAYS_PER_HOUR); send those frames later"
        ])  # fmt: skip
    if (fit := ingest.frames_within_storage(scanned, scanned.owner, whole=True)) < len(frames):
        ingest.stats.rejected["storage_limit"] += len(frames) - fit
        return JsonAnswer(503, detail=[
            f"frame {fit}: the batch is beyond the {ingest.storage.per_hour >> 20} MiB of "
            "frames its owner may have stored per hour (STACKLENS_MAX_MB_PER_HOUR); resend it "
            "later"
        ])  # fmt: skip
    if (fit := ingest.frames_within_quota(scanned, scanned.owner)) < len(frames):
        ingest.stats.rejected["storage_quota"] += len(frames) - fit
        log.warning(
            "rejected an HTTP batch of uid %d: beyond the %d MiB it may have stored "
            "(STACKLENS_MAX_STORED_MB)",
            scanned.owner,
            ingest.quota.limit >> 20,
        )
        return JsonAnswer(503, detail=[
            f"frame {fit}: the batch is beyond the {ingest.quota.limit >> 20} MiB of frames "
            "its owner may have stored (STACKLENS_MAX_STORED_MB); resend it once the "
            "retention has made room"
        ])  # fmt: skip
    ingest.stats.frames_received += len(frames)
    try:
        await ingest.submit(scanned, atomic=True)
    except wire.FrameError as error:
        ingest.stats.rejected[error.label] += 1
        return JsonAnswer(422, detail=[error.reason])
    except Exception as exc:  # the writer logged it
        return JsonAnswer(503, detail=f"could not store the batch, resend it: {exc}")
    return JsonAnswer(200, stored=len(frames))
