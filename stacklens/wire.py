"""The stacklens wire format, read from the same X-macro file the C library compiles.

`contract/stacklens_wire.def` is the single source of truth: this module
parses it into numpy dtypes for the frame header, the acknowledgement, the connection's
hello, welcome and credential message (proven mode) and every counter table, then decodes
and validates frames with vectorised numpy views (no Python loop per record) and encodes
frames for tests and load generators.
"""

from __future__ import annotations

import enum
import hmac
import re
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contract import WIRE_DEF
from stacklens.mpi_ops import op_names

MAGIC = 0x534E4C53  # b"SLNS" little-endian
ACK_MAGIC = 0x4B414C53  # b"SLAK" little-endian
HELLO_MAGIC = 0x49484C53  # b"SLHI" little-endian
WELCOME_MAGIC = 0x45574C53  # b"SLWE" little-endian
CRED_MAGIC = 0x52434C53  # b"SLCR" little-endian
VERSION = 2  # version 1 (no runs) is refused with bad_version
SECTION_HEADER = np.dtype([("table", "<u2"), ("record_size", "<u2"), ("count", "<u4")])

#: Frames whose interval ends further than this after the collector's clock are rejected
#: (default of STACKLENS_MAX_CLOCK_SKEW_S).
MAX_CLOCK_SKEW_NS = 300 * 10**9

_TYPE = r"(u16|u32|u64|text\(\d+\))"
_DOC = r'"((?:[^"\\]|\\.)*)"'


def _numpy_type(wire_type: str) -> str:
    """numpy type string of a .def field type (u16, u32, u64, text(N))."""
    if wire_type.startswith("text("):
        return "S" + wire_type[5:-1]
    return {"u16": "<u2", "u32": "<u4", "u64": "<u8"}[wire_type]


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


@dataclass(frozen=True)
class Table:
    """One counter table of the wire format."""

    id: int
    name: str
    doc: str
    dtype: np.dtype


@dataclass(frozen=True)
class WireSpec:
    """Everything the .def file defines, as numpy dtypes, enums and bounds."""

    header: np.dtype
    ack: np.dtype
    tables: dict[int, Table]
    statuses: dict[str, int]
    frame_types: dict[str, int]
    bounds: dict[str, int]
    hello: np.dtype
    welcome: np.dtype
    cred: np.dtype
    proofs: dict[str, int]
    io_layers: dict[int, tuple[str, str]]  # SL_IO_LAYER: id -> (name, label)

    def table(self, name: str) -> Table:
        """The table called `name`."""
        for table in self.tables.values():
            if table.name == name:
                return table
        raise KeyError(name)


def load_spec(path: Path = WIRE_DEF) -> WireSpec:
    """Parse the wire definition file into a WireSpec."""
    text = _strip_comments(path.read_text())
    header, ack, hello, welcome, cred = (
        [
            (m[0], _numpy_type(m[1]))
            for m in re.findall(rf"{macro}\(\s*(\w+)\s*,\s*{_TYPE}\s*,\s*{_DOC}\s*\)", text)
        ]
        for macro in (
            "SL_HEADER_FIELD",
            "SL_ACK_FIELD",
            "SL_HELLO_FIELD",
            "SL_WELCOME_FIELD",
            "SL_CRED_FIELD",
        )
    )
    statuses, frame_types, proofs = (
        {
            m[1]: int(m[0])
            for m in re.findall(rf"{macro}\(\s*(\d+)\s*,\s*(\w+)\s*,\s*{_DOC}\s*\)", text)
        }
        for macro in ("SL_STATUS", "SL_FRAME_TYPE", "SL_PROOF")
    )
    bounds = {
        m[0]: int(m[1])
        for m in re.findall(rf"SL_BOUND\(\s*(\w+)\s*,\s*(\d+)\s*,\s*{_DOC}\s*\)", text)
    }
    io_layers = {
        int(m[0]): (m[1], m[2])
        for m in re.findall(
            rf"SL_IO_LAYER\(\s*(\d+)\s*,\s*(\w+)\s*,\s*{_DOC}\s*,\s*{_DOC}\s*\)", text
        )
    }
    tables: dict[int, Table] = {}
    for m in re.finditer(rf"SL_TABLE\(\s*(\d+)\s*,\s*(\w+)\s*,\s*{_DOC}\s*\)", text):
        table_id, name, doc = int(m[1]), m[2], m[3]
        fields = [
            (f[0], _numpy_type(f[1]))
            for f in re.findall(
                rf"SL_FIELD\(\s*{name}\s*,\s*(\w+)\s*,\s*{_TYPE}\s*,\s*{_DOC}\s*\)", text
            )
        ]
        tables[table_id] = Table(table_id, name, doc, np.dtype(fields))
    return WireSpec(
        np.dtype(header), np.dtype(ack), tables, statuses, frame_types, bounds,
        np.dtype(hello), np.dtype(welcome), np.dtype(cred), proofs, io_layers,
    )  # fmt: skip


def fields_of(dtype: np.dtype) -> Mapping[str, tuple[Any, ...]]:
    """The fields of a structured dtype: name -> (field dtype, offset), in order."""
    if dtype.fields is None:
        raise TypeError(f"{dtype} is not a structured dtype")
    return dtype.fields


def _struct_of(dtype: np.dtype) -> struct.Struct:
    """A struct.Struct with the same layout as a little-endian structured dtype."""
    codes = {"<u2": "H", "<u4": "I", "<u8": "Q"}
    return struct.Struct(
        "<" + "".join(codes.get(f.str, f"{f.itemsize}s") for f, *_ in fields_of(dtype).values())
    )


SPEC = load_spec()
HEADER_DTYPE = SPEC.header
_HEADER_STRUCT = _struct_of(HEADER_DTYPE)
_SECTION_STRUCT = _struct_of(SECTION_HEADER)
HEADER_SIZE = HEADER_DTYPE.itemsize
ACK_DTYPE = SPEC.ack
ACK_SIZE = ACK_DTYPE.itemsize
HELLO_DTYPE = SPEC.hello
HELLO_SIZE = HELLO_DTYPE.itemsize
WELCOME_DTYPE = SPEC.welcome
WELCOME_SIZE = WELCOME_DTYPE.itemsize
CRED_DTYPE = SPEC.cred
CRED_SIZE = CRED_DTYPE.itemsize


def _def_enum(name: str, codes: dict[str, int]) -> Any:
    """An IntEnum of codes listed in the .def file (members from the file, so typed Any: a
    type checker cannot list them)."""
    return enum.IntEnum(name, {key.upper(): code for key, code in codes.items()})


#: The acknowledgement statuses (the .def's SL_STATUS list).
Status = _def_enum("Status", SPEC.statuses)

#: How a sender proves who it is (the .def's SL_PROOF list): PEER (Unix socket), MUNGE.
Proof = _def_enum("Proof", SPEC.proofs)

#: Kinds of frames a rank sends (the .def's SL_FRAME_TYPE list): INTERVAL (data), FINAL
#: (ended normally: MPI_Finalize, exit, exec), KILLED (ended by a signal), ABORTED
#: (called MPI_Abort; carries one abort record), EXITED (an MPI rank's process ended without
#: MPI_Finalize), LAUNCH (how a launch by `stacklens run` ended, sent by it).
FrameType = _def_enum("FrameType", SPEC.frame_types)

#: Frame types that end a rank.
FINAL_TYPES = (FrameType.FINAL, FrameType.KILLED, FrameType.ABORTED, FrameType.EXITED)

#: The limits both the hooks and the collector keep (the .def's SL_BOUND list).
BOUNDS = SPEC.bounds

#: Largest MPI_COMM_WORLD accepted (ranks, peers, RMA targets and roots are below it).
MAX_WORLD_SIZE = BOUNDS["max_world_size"]


#: The reason of a frame outside the clock-skew window (the compiled scanner's words too).
CLOCK_SKEW_REASON = (
    "clock skew: interval ends after the collector's clock plus the skew window "
    "(check the sender's clock)"
)
#: The reason of a frame older than the ingest horizon (the compiled scanner's words too).
TOO_OLD_REASON = "too old: interval ends before the ingest horizon (retention or horizon days)"
#: The /metrics reason of the time-window rules, by their reason text: counted apart from
#: malformed frames (a sender's clock or a stale spool, not a broken sender).
TIME_CHECKS = {CLOCK_SKEW_REASON: "clock_skew", TOO_OLD_REASON: "too_old"}


class FrameError(Exception):
    """A frame that must be rejected; `status` goes back to the sender in the ack;
    `label` is the reason counted on /metrics (a time-window rule's name, else the status
    name)."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = Status(status)  # a member of Status (its .name is the ack status)
        self.reason = reason
        self.label = TIME_CHECKS.get(reason, self.status.name.lower())


@dataclass(frozen=True)
class Header:
    """Decoded frame header."""

    version: int
    frame_type: int
    body_len: int
    world_rank: int
    world_size: int
    pid: int
    seq: int
    interval_start_ns: int
    interval_end_ns: int
    run_id: int
    proc_start_ns: int
    job_id: str
    host: str
    token: bytes


@dataclass(frozen=True)
class Frame:
    """A validated frame: its header and one structured array per table present."""

    header: Header
    tables: dict[str, np.ndarray]

    @property
    def command(self) -> str | None:
        """The rank's command line, if this frame carries rank information."""
        info = self.tables.get("rank_info")
        if info is None or len(info) == 0:
            return None
        return _text(bytes(info["command"][0]))

    @property
    def user(self) -> str | None:
        """Who runs the rank, if this frame carries rank information."""
        info = self.tables.get("rank_info")
        if info is None or len(info) == 0:
            return None
        return _text(bytes(info["user"][0])) or None


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _header_text(raw: bytes) -> str:
    """A header text field as sent: its padding removed, invalid UTF-8 bytes kept as lone
    surrogates and a NUL before the padding's end kept, so clean_text can judge it."""
    return raw.rstrip(b"\0").decode("utf-8", "surrogateescape")


#: Control characters (C0, DEL, C1): refused in ids.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def clean_text(text: str) -> bool:
    """Whether an id (job id, host) is UTF-8 text without control characters: the rule of
    the compiled scanner (collector/csrc/slcodec.c), also applied to JSON frames."""
    try:
        text.encode("utf-8")  # lone surrogates (invalid bytes, JSON's \ud800) fail here
    except UnicodeEncodeError:
        return False
    return _CONTROL.search(text) is None


def decode_header(raw: bytes, max_body: int) -> Header:
    """Decode and check the fixed part of a header (magic, version, type, body length).

    Raises FrameError with the status to send back.
    """
    if len(raw) < HEADER_SIZE:
        raise FrameError(Status.BAD_LENGTH, f"header truncated: {len(raw)} of {HEADER_SIZE} bytes")
    h = dict(zip(fields_of(HEADER_DTYPE), _HEADER_STRUCT.unpack_from(raw), strict=True))
    if h["magic"] != MAGIC:
        raise FrameError(Status.BAD_MAGIC, f"bad magic 0x{h['magic']:08x}")
    if h["version"] != VERSION:
        raise FrameError(Status.BAD_VERSION, f"unsupported wire version {h['version']}")
    if h["frame_type"] not in SPEC.frame_types.values():
        raise FrameError(Status.BAD_BODY, f"unknown frame type {h['frame_type']}")
    if h["body_len"] > max_body:
        raise FrameError(
            Status.BAD_LENGTH, f"body of {h['body_len']} bytes exceeds the cap of {max_body}"
        )
    del h["magic"]
    h["job_id"], h["host"] = _header_text(h["job_id"]), _header_text(h["host"])
    h["token"] = h["token"].split(b"\0", 1)[0]
    return Header(**h)


def check_header(
    header: Header,
    token: str,
    now_ns: int | None = None,
    oldest_ns: int | None = None,
    max_skew_ns: int = MAX_CLOCK_SKEW_NS,
) -> None:
    """Check the authorisation and the ranges of a decoded header; raise FrameError.

    `oldest_ns`: intervals ending before it (the ingest horizon) are rejected;
    so are intervals ending more than `max_skew_ns` after `now_ns` (the clock-skew window).
    """
    if not hmac.compare_digest(header.token, token.encode()):
        raise FrameError(Status.BAD_TOKEN, "wrong ingest token")
    if not header.job_id or header.job_id.startswith("\0"):
        raise FrameError(Status.OUT_OF_RANGE, "empty job id")
    if not clean_text(header.job_id):
        raise FrameError(Status.OUT_OF_RANGE, "job id is not UTF-8 text without control characters")
    if not clean_text(header.host):
        raise FrameError(Status.OUT_OF_RANGE, "host is not UTF-8 text without control characters")
    if not 0 < header.world_size <= MAX_WORLD_SIZE or header.world_rank >= header.world_size:
        raise FrameError(
            Status.OUT_OF_RANGE,
            f"rank {header.world_rank} out of range for world size {header.world_size} "
            f"(at most {MAX_WORLD_SIZE})",
        )
    if header.pid > BOUNDS["max_pid"]:
        raise FrameError(Status.OUT_OF_RANGE, f"pid {header.pid} out of range")
    if header.run_id == 0 and (header.world_size != 1 or header.proc_start_ns == 0):
        raise FrameError(
            Status.OUT_OF_RANGE, "a non-MPI frame (run 0) needs world size 1 and a start time"
        )
    if header.seq >> BOUNDS["max_counter_bits"]:
        raise FrameError(Status.OUT_OF_RANGE, "sequence number out of range")
    if header.interval_end_ns < header.interval_start_ns:
        raise FrameError(Status.OUT_OF_RANGE, "interval ends before it starts")
    now_ns = time.time_ns() if now_ns is None else now_ns
    if header.interval_end_ns > now_ns + max_skew_ns:
        raise FrameError(Status.OUT_OF_RANGE, CLOCK_SKEW_REASON)
    if oldest_ns is not None and header.interval_end_ns < oldest_ns:
        raise FrameError(Status.OUT_OF_RANGE, TOO_OLD_REASON)


def decode_body(header: Header, body: bytes) -> Frame:
    """Split a body into its sections and view each as a structured array; raise FrameError."""
    if len(body) != header.body_len:
        raise FrameError(
            Status.BAD_LENGTH, f"body truncated: {len(body)} of {header.body_len} bytes"
        )
    tables: dict[str, np.ndarray] = {}
    offset = 0
    while offset < len(body):
        if len(body) - offset < SECTION_HEADER.itemsize:
            raise FrameError(Status.BAD_BODY, f"section header truncated at byte {offset}")
        table_id, record_size, count = _SECTION_STRUCT.unpack_from(body, offset)
        offset += SECTION_HEADER.itemsize
        table = SPEC.tables.get(table_id)
        if table is None:
            raise FrameError(Status.BAD_BODY, f"unknown table id {table_id}")
        if record_size != table.dtype.itemsize:
            raise FrameError(
                Status.BAD_BODY,
                f"table {table.name}: record size {record_size}, expected {table.dtype.itemsize}",
            )
        if table.name in tables:
            raise FrameError(Status.BAD_BODY, f"table {table.name} appears twice")
        size = count * table.dtype.itemsize
        if size > len(body) - offset:
            raise FrameError(Status.BAD_LENGTH, f"table {table.name} runs past the body")
        tables[table.name] = np.frombuffer(body, dtype=table.dtype, count=count, offset=offset)
        offset += size
    _check_ranges(header, tables)
    return Frame(header, tables)


#: u64 fields that use all 64 bits (stored as two's complement), exempt from the 2^63 limit.
_FULL_WIDTH = {("hca", "node_guid"), ("rank_info", "launch_id")}


def _signed_words(table: Table) -> np.ndarray:
    """Indices, in a record seen as 8-byte words, of the u64 fields that must be < 2^63."""
    return np.array(
        [
            offset // 8
            for field, (dtype, offset, *_) in fields_of(table.dtype).items()
            if dtype == np.dtype("<u8") and (table.name, field) not in _FULL_WIDTH
        ],
        dtype=np.intp,
    )


# Records are multiples of 8 bytes with 8-aligned u64 fields (the .def's rule).
if any(t.dtype.itemsize % 8 for t in SPEC.tables.values()):
    raise RuntimeError(f"{WIRE_DEF}: every record must be a multiple of 8 bytes")
_SIGNED_WORDS = {t.name: _signed_words(t) for t in SPEC.tables.values()}


def _check_ranges(header: Header, tables: dict[str, np.ndarray]) -> None:
    """Reject values no correct sender produces; raise FrameError(OUT_OF_RANGE)."""

    def reject(reason: str) -> None:
        raise FrameError(Status.OUT_OF_RANGE, reason)

    for name, records in tables.items():
        if name in ("rank_info", "health", "abort", "launch") and len(records) > 1:
            reject(f"table {name} must have at most one record")
        if not len(records):
            continue
        words = _SIGNED_WORDS[name]
        counters = records.view("<u8").reshape(len(records), -1)[:, words]
        if len(words) and int(counters.max()) >> BOUNDS["max_counter_bits"]:
            reject(f"table {name}: a counter is negative or too large")
        if "op_id" in fields_of(records.dtype) and int(records["op_id"].max()) >= len(op_names()):
            reject(f"table {name}: unknown MPI operation id")
    ranks = header.world_size
    if _max(tables, "p2p", "peer") >= ranks:
        reject("peer rank out of range for the world size")
    p2p = tables.get("p2p")
    msgs = p2p["msgs_sent"] | p2p["msgs_recv"] if p2p is not None and len(p2p) else [0]
    if int(np.max(msgs)) >> BOUNDS["max_msgs_bits"]:
        reject("message count out of range")  # collector/csrc/slcodec.c says why
    if _max(tables, "monitored", "peer") >= ranks:
        reject("monitored peer rank out of range for the world size")
    if _max(tables, "monitored", "msgs") >= 1 << BOUNDS["max_msgs_bits"]:
        reject("monitored message count out of range")
    if _max(tables, "rma", "target") >= ranks:
        reject("RMA target rank out of range for the world size")
    if _max(tables, "hist", "bucket") > BOUNDS["max_bucket"]:
        reject("histogram bucket out of range")
    if (coll := tables.get("coll")) is not None and len(coll):
        roots = coll["root"][coll["root"] != BOUNDS["no_rank"]]
        if len(roots) and int(roots.max()) >= ranks:
            reject("collective root out of range for the world size")
        # Communicators may outgrow the world (spawn, connect/accept), never past the bound;
        # size 0 only in an overflow record (its communicators differ).
        empty = (coll["comm_size"] == 0) & (coll["comm_id"] != BOUNDS["overflow_comm"])
        if empty.any() or int(coll["comm_size"].max()) > BOUNDS["max_world_size"]:
            reject("communicator size out of range")
    if (comm := tables.get("comm")) is not None and len(comm):
        if int(comm["made"].min()) < 1 or int(comm["made"].max()) > BOUNDS["max_comm_made"]:
            reject("unknown way of making a communicator")
        size = comm["comm_size"]
        if (
            int(size.min()) == 0
            or int(size.max()) > BOUNDS["max_world_size"]
            or (comm["comm_rank"] >= size).any()
            or (comm["comm_id"] == BOUNDS["overflow_comm"]).any()
        ):
            reject("communicator description out of range")
    if (cs := tables.get("callsite")) is not None and len(cs):
        if int(cs["layer"].max()) > BOUNDS["max_site_layer"]:
            reject("unknown call-site layer")
        if int(cs["bucket"].max()) > BOUNDS["max_bucket"]:
            reject("call-site size bucket out of range")
    if (cf := tables.get("callsite_frame")) is not None and len(cf):
        depth = cf["depth"]
        if (
            int(depth.min()) < 1
            or int(depth.max()) > BOUNDS["max_site_depth"]
            or (cf["frame"] >= depth).any()
            or (cf["site_id"] == BOUNDS["overflow_site"]).any()
        ):
            reject("call-site frame out of range")
    if (cp := tables.get("comm_p2p")) is not None and len(cp):
        # a peer in the world, or no peer in (only) an op's overflow record
        overflow = cp["comm_id"] == BOUNDS["overflow_comm"]
        if (cp["peer"][overflow] != BOUNDS["no_rank"]).any() or (
            cp["peer"][~overflow] >= ranks
        ).any():
            reject("communicator peer rank out of range for the world size")
        if int(cp["msgs"].max()) >> BOUNDS["max_msgs_bits"]:
            reject("communicator message count out of range")
        if int(cp["received"].max()) > 1:
            reject("communicator message direction unknown")
    if (io := tables.get("io")) is not None and len(io):
        if int(io["layer"].min()) < 1 or int(io["layer"].max()) > BOUNDS["max_io_layer"]:
            reject("unknown I/O layer")
        if int(io["phase"].max()) > BOUNDS["max_io_phase"]:
            reject("unknown I/O phase")
    if (hca := tables.get("hca")) is not None and len(hca):
        names = list(fields_of(hca.dtype))
        valid_bits = len(names) - names.index("node_guid") - 1
        if int(hca["valid"].max()) >= 1 << valid_bits:
            reject("hca valid mask has bits beyond the counters")
    aborts = tables.get("abort")
    if (header.frame_type == FrameType.ABORTED) != (aborts is not None and len(aborts) == 1):
        reject("an abort record belongs in exactly the frames of type aborted")
    if header.frame_type == FrameType.LAUNCH:
        if any(name not in ("launch", "site_symbol") for name in tables):
            reject(
                "a frame of type launch carries its launch record and the call sites "
                "resolved on its node only"
            )
        launch = tables.get("launch")
        if launch is None or len(launch) != 1 or header.run_id == 0:
            reject("a frame of type launch has one launch record and a launch id")
        symbols = tables.get("site_symbol")
        if symbols is not None and len(symbols) and not np.isin(symbols["quality"], (1, 2)).all():
            reject("site_symbol quality is 1 or 2")
    elif "launch" in tables or "site_symbol" in tables:
        reject("launch and site_symbol records belong in frames of type launch only")


def _max(tables: dict[str, np.ndarray], table: str, field: str) -> int:
    """Largest value of a field over a table's records, -1 when absent or empty."""
    records = tables.get(table)
    return int(records[field].max()) if records is not None and len(records) else -1


def encode_frame(
    *,
    job_id: str,
    world_rank: int,
    world_size: int,
    seq: int,
    interval_start_ns: int,
    interval_end_ns: int,
    run_id: int = 1,
    proc_start_ns: int = 0,
    host: str = "localhost",
    pid: int = 0,
    token: str = "",
    frame_type: int = FrameType.INTERVAL,
    tables: dict[str, np.ndarray] | None = None,
) -> bytes:
    """Encode one frame (used by tests, the load generator and replay tools).

    `run_id` 1 by default: one MPI run; 0 = the job's non-MPI run (world size 1, needs a
    non-zero `proc_start_ns`).
    """
    body = bytearray()
    for name, records in (tables or {}).items():
        table = SPEC.table(name)
        records = np.asarray(records, dtype=table.dtype)
        section = np.zeros(1, dtype=SECTION_HEADER)
        section["table"], section["record_size"], section["count"] = (
            table.id,
            table.dtype.itemsize,
            len(records),
        )
        body += section.tobytes() + records.tobytes()
    header = np.zeros(1, dtype=HEADER_DTYPE)
    values = {
        "magic": MAGIC,
        "version": VERSION,
        "frame_type": int(frame_type),
        "body_len": len(body),
        "world_rank": world_rank,
        "world_size": world_size,
        "pid": pid,
        "seq": seq,
        "interval_start_ns": interval_start_ns,
        "interval_end_ns": interval_end_ns,
        "run_id": run_id,
        "proc_start_ns": proc_start_ns,
        "job_id": job_id.encode(),
        "host": host.encode(),
        "token": token.encode(),
    }
    for key, value in values.items():
        _check_fits(HEADER_DTYPE, key, value)
        header[key] = np.array(value, dtype=HEADER_DTYPE[key])  # u64 values up to 2^64 - 1
    return header.tobytes() + bytes(body)


def _check_fits(dtype: np.dtype, field: str, value: Any) -> None:
    """Raise ValueError if a text value is longer than its field (numpy would cut it)."""
    kind = fields_of(dtype)[field][0]
    if kind.kind == "S" and len(value) > kind.itemsize:
        raise ValueError(f"{field} is {len(value)} bytes long; the field holds {kind.itemsize}")


def records(table_name: str, rows: list[dict[str, Any]]) -> np.ndarray:
    """Build a structured array for `table_name` from dicts (missing fields are zero).
    A text value longer than its field raises ValueError (never cut)."""
    dtype = SPEC.table(table_name).dtype
    out = np.zeros(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        for key, value in row.items():
            _check_fits(dtype, key, value)
            out[i][key] = value
    return out


def encode_acks(statuses, seqs) -> bytes:
    """Encode the acknowledgements of many frames (a status each, or one for all)."""
    acks = np.zeros(len(seqs), dtype=ACK_DTYPE)
    acks["magic"], acks["status"], acks["seq"] = ACK_MAGIC, statuses, seqs
    return acks.tobytes()


def encode_ack(status: int, seq: int) -> bytes:
    """Encode an acknowledgement."""
    return encode_acks(int(status), [seq])


def decode_ack(raw: bytes) -> tuple[int, int]:
    """Decode an acknowledgement into (status, seq)."""
    ack = np.frombuffer(raw, dtype=ACK_DTYPE, count=1)[0]
    if int(ack["magic"]) != ACK_MAGIC:
        raise ValueError(f"bad ack magic 0x{int(ack['magic']):08x}")
    return int(ack["status"]), int(ack["seq"])


@dataclass(frozen=True)
class Hello:
    """The hello that begins a connection in proven mode."""

    proof: int
    owner_uid: int
    nonce: bytes  # the sender's, 16 bytes: nonce0 then nonce1, little-endian

    def encode(self) -> bytes:
        """The hello's bytes."""
        out = np.zeros(1, dtype=HELLO_DTYPE)
        out["magic"], out["proof"], out["owner_uid"] = HELLO_MAGIC, self.proof, self.owner_uid
        out["nonce0"], out["nonce1"] = struct.unpack("<QQ", self.nonce)
        return out.tobytes()

    @classmethod
    def decode(cls, raw: bytes) -> Hello:
        """The hello of the first HELLO_SIZE bytes of `raw`; ValueError if it is not one."""
        hello = np.frombuffer(raw, dtype=HELLO_DTYPE, count=1)[0]
        if int(hello["magic"]) != HELLO_MAGIC:
            raise ValueError("the connection did not begin with a hello")
        nonce = struct.pack("<QQ", int(hello["nonce0"]), int(hello["nonce1"]))
        return cls(int(hello["proof"]), int(hello["owner_uid"]), nonce)


@dataclass(frozen=True)
class Welcome:
    """The collector's answer: a challenge (status committed, its nonce, its credential
    following) or the final verdict (cred_len 0)."""

    status: int
    cred_len: int = 0
    owner_uid: int = 0
    nonce: bytes = bytes(16)  # the collector's (challenge), zeros in a final welcome

    def encode(self, credential: bytes = b"") -> bytes:
        """The welcome's bytes, followed by `credential` (its length is cred_len)."""
        out = np.zeros(1, dtype=WELCOME_DTYPE)
        out["magic"], out["status"], out["cred_len"] = WELCOME_MAGIC, self.status, len(credential)
        out["owner_uid"] = self.owner_uid
        out["nonce0"], out["nonce1"] = struct.unpack("<QQ", self.nonce)
        return out.tobytes() + credential

    @classmethod
    def decode(cls, raw: bytes) -> Welcome:
        """The welcome of the first WELCOME_SIZE bytes; ValueError if it is not one."""
        w = np.frombuffer(raw, dtype=WELCOME_DTYPE, count=1)[0]
        if int(w["magic"]) != WELCOME_MAGIC:
            raise ValueError(f"bad welcome magic 0x{int(w['magic']):08x}")
        nonce = struct.pack("<QQ", int(w["nonce0"]), int(w["nonce1"]))
        return cls(int(w["status"]), int(w["cred_len"]), int(w["owner_uid"]), nonce)


def encode_cred(credential: bytes) -> bytes:
    """The sender's credential message followed by the credential."""
    return struct.pack("<II", CRED_MAGIC, len(credential)) + credential


def decode_cred(raw: bytes) -> int:
    """The credential length of a credential message; ValueError if it is not one."""
    magic, length = struct.unpack_from("<II", raw)
    if magic != CRED_MAGIC:
        raise ValueError("expected the sender's credential")
    return int(length)
