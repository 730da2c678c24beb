"""JSON form of a frame: the same fields and tables as the binary wire format."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field

from stacklens import wire


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
    tables: dict[str, list[dict[str, int | str]]] = Field(default_factory=dict)


class JsonBatch(BaseModel):
    """A batch of frames, stored all or nothing."""

    frames: list[JsonFrame] = Field(min_length=1, max_length=10_000)


class IngestResult(BaseModel):
    """Answer to a stored batch (sent only after COMMIT)."""

    stored: int
