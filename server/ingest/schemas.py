"""JSON form of a frame: the same fields and tables as the binary wire format."""

from __future__ import annotations

from pydantic import BaseModel, Field


class JsonFrame(BaseModel):
    """One interval of one rank, as a third-party producer sends it.

    `tables` maps a wire table name (p2p, op, hist, coll, rma, io, health) to records
    whose keys are that table's field names (see contract/stacklens_wire.def);
    missing fields are zero, text fields are strings.
    """

    job: str = Field(min_length=1, max_length=63)
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
    host: str = Field(default="", max_length=63)
    pid: int = Field(default=0, ge=0, lt=2**32)
    final: bool = False
    killed: bool = Field(
        default=False, description="a final frame of a rank that ended by a signal (implies final)"
    )
    command: str | None = Field(default=None, max_length=255)
    user: str | None = Field(default=None, max_length=63)
    run_label: str | None = Field(default=None, max_length=63, description="e.g. a step id")
    tables: dict[str, list[dict[str, int | str]]] = Field(default_factory=dict)


class JsonBatch(BaseModel):
    """A batch of frames, stored all or nothing."""

    frames: list[JsonFrame] = Field(min_length=1, max_length=10_000)


class IngestResult(BaseModel):
    """Answer to a stored batch (sent only after COMMIT)."""

    stored: int
