"""The collector's compiled frame path: libslcodec.so (collector/csrc) over ctypes.

`scan()` finds and validates the complete frames in a receive buffer in one call, and
returns them as a `FrameBatch` (the bytes plus a numpy record per frame); the writer
encodes a batch's array-layout tables with `encode_arrays()` straight into binary COPY
rows, a piece at a time into one buffer that the COPY then sends from (no copy of the
whole payload is ever made). The rules and statuses are those of the reference decoder
in stacklens/wire.py (tests/collector/test_fuzz.py checks that both agree on 100,000
random frames).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stacklens import wire
from stacklens.mpi_ops import op_names

LIBRARY = Path(__file__).resolve().parent / "build" / "libslcodec.so"
_SOURCES = LIBRARY.parent.parent / "csrc"
_CONTRACT = LIBRARY.parent.parent.parent / "contract"
MAX_TABLE_ID = 19

#: numpy view of `sl_frame_info` (slcodec.h): one valid frame of a scanned buffer.
FRAME_INFO = np.dtype(
    [
        ("offset", "<u8"),
        ("seq", "<u8"),
        ("t_start", "<u8"),
        ("t_end", "<u8"),
        ("keys_dropped", "<u8"),
        ("frames_dropped", "<u8"),
        ("frames_spooled", "<u8"),
        ("run_id", "<u8"),
        ("proc_start", "<u8"),
        ("length", "<u4"),
        ("world_rank", "<u4"),
        ("world_size", "<u4"),
        ("pid", "<u4"),
        ("frame_type", "<u4"),
        ("pad", "<u4"),
        ("section", "<u4", (MAX_TABLE_ID + 1,)),
        ("count", "<u4", (MAX_TABLE_ID + 1,)),
        ("job", "S64"),
        ("host", "S64"),
    ]
)

#: numpy view of `sl_column`: how one stored array column is read from a record.
COLUMN = np.dtype(
    [
        ("wire_offset", "<u2"),
        ("wire_width", "u1"),
        ("out_width", "u1"),
        ("is_key", "u1"),
        ("joined", "u1"),  # continues the previous column's array
        ("pad", "u1", (2,)),
        ("element_oid", "<u4"),
    ]
)


class Limits(ctypes.Structure):
    """`sl_limits`: what frames are checked against."""

    _fields_ = [
        ("max_body", ctypes.c_uint64),
        ("newest_end", ctypes.c_uint64),
        ("oldest_end", ctypes.c_uint64),
        ("n_ops", ctypes.c_uint32),
        ("token_len", ctypes.c_uint32),
        ("token", ctypes.c_char * 64),
    ]


class _ScanError(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_uint32),
        ("has_seq", ctypes.c_uint32),
        ("seq", ctypes.c_uint64),
        ("reason", ctypes.c_char * 200),
    ]


_lib: ctypes.CDLL | None = None


def _stale() -> bool:
    """Whether libslcodec.so is missing or older than a source it is built from (a
    library of an older checkout would be called with another argument list)."""
    if not LIBRARY.exists():
        return True
    sources = [_SOURCES / name for name in ("slcodec.c", "slcodec.h", "Makefile")] + [
        _CONTRACT / name for name in ("stacklens_wire.h", "stacklens_text.h", "stacklens_wire.def")
    ]  # its Makefile's prerequisites
    return max(path.stat().st_mtime for path in sources) > LIBRARY.stat().st_mtime


def library() -> ctypes.CDLL:
    """Load libslcodec.so (building it with make if it is missing or stale) and check its
    ABI."""
    global _lib
    if _lib is None:
        if _stale():
            subprocess.run(["make", "-s", "-C", str(_SOURCES)], check=True)
        lib = ctypes.CDLL(str(LIBRARY))
        lib.sl_scan.restype = ctypes.c_int64
        lib.sl_scan.argtypes = [
            ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(Limits), ctypes.c_void_p,
            ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(_ScanError),
        ]  # fmt: skip
        lib.sl_encode_arrays.restype = ctypes.c_int64
        lib.sl_encode_arrays.argtypes = [
            ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p, ctypes.c_uint64,
        ]  # fmt: skip
        check_abi(lib)
        _lib = lib
    return _lib


def check_abi(lib: ctypes.CDLL) -> None:
    """Raise RuntimeError unless the library's structs have the sizes of their mirrors here
    (`Limits`, FRAME_INFO, `_ScanError`, COLUMN)."""
    sizes = (ctypes.c_uint32 * 4)()
    lib.sl_abi_sizes(sizes)
    expected = [ctypes.sizeof(Limits), FRAME_INFO.itemsize, ctypes.sizeof(_ScanError),
                COLUMN.itemsize]  # fmt: skip
    if list(sizes) != expected:
        raise RuntimeError(f"{LIBRARY}: ABI sizes {list(sizes)}, expected {expected}")


def limits(
    token: str,
    max_body: int,
    oldest_ns: int | None = None,
    now_ns: int | None = None,
    max_skew_ns: int = wire.MAX_CLOCK_SKEW_NS,
) -> Limits:
    """Scan limits for the ingest token, the body cap, the ingest horizon (`oldest_ns`) and
    the clock-skew window, at `now_ns` (default: now)."""
    raw = token.encode()
    if len(raw) > 64:
        raise ValueError("the ingest token is longer than 64 bytes")
    return Limits(
        max_body=max_body,
        newest_end=(time.time_ns() if now_ns is None else now_ns) + max_skew_ns,
        oldest_end=max(oldest_ns or 0, 0),
        n_ops=len(op_names()),
        token_len=len(raw),
        token=raw,
    )


@dataclass(frozen=True)
class ScanError:
    """The first invalid frame of a buffer: its status, its seq if readable, and why;
    `check` names a rule counted apart on /metrics (clock_skew, too_old, partition_limit)."""

    status: wire.Status
    seq: int | None
    reason: str
    check: str | None = None

    @property
    def label(self) -> str:
        """The /metrics reason: `check`, else the status name."""
        return self.check or self.status.name.lower()


@dataclass
class FrameBatch:
    """Validated frames: the bytes they lie in (bytes or a read-only view of them), one
    FRAME_INFO record per frame, and the Unix user they belong to (the collector's own
    unless the ingest proved another); `proven`: the ingest proved that owner (its name is
    then the jobs' user, whatever the frames claim)."""

    data: bytes | memoryview
    info: np.ndarray
    owner: int = field(default_factory=os.getuid)
    proven: bool = False

    def __len__(self) -> int:
        return len(self.info)

    def records(self, i: int, table: str) -> np.ndarray:
        """Frame i's records of a wire table, as a structured array (empty if absent)."""
        spec = wire.SPEC.table(table)
        count = int(self.info["count"][i, spec.id])
        if not count:
            return np.zeros(0, dtype=spec.dtype)
        offset = int(self.info["offset"][i] + self.info["section"][i, spec.id])
        return np.frombuffer(self.data, dtype=spec.dtype, count=count, offset=offset)


#: Frame records per sl_scan call (a bigger buffer is scanned in several calls).
_SCAN_SLOTS = 256


def scan(data: bytes, lim: Limits, start: int = 0) -> tuple[FrameBatch, ScanError | None]:
    """The complete valid frames at the start of `data[start:]` (read where they lie, not
    copied), and the error that stopped the scan, if any. `len(batch.data)` is the bytes
    consumed: the rest is an incomplete frame (no error) or starts with the invalid one.
    """
    lib = library()
    base = (ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0) + start
    size = len(data) - start
    parts, offset = [], 0
    consumed, error = ctypes.c_uint64(), _ScanError()
    while True:
        out = np.empty(min(_SCAN_SLOTS, (size - offset) // wire.HEADER_SIZE + 1), FRAME_INFO)
        n = lib.sl_scan(
            base + offset, size - offset, ctypes.byref(lim), out.ctypes.data, len(out),
            ctypes.byref(consumed), ctypes.byref(error),
        )  # fmt: skip
        slots = len(out)
        out = out[:n]
        out["offset"] += offset
        parts.append(out)
        offset += consumed.value
        if n < slots or error.status:  # stopped before the slots ran out
            break
    info = parts[0] if len(parts) == 1 else join_info(parts)
    # the frames' bytes, not copied (a view unless they are all of `data`)
    whole = start == 0 and offset == len(data)
    batch = FrameBatch(data if whole else memoryview(data)[start : start + offset], info)
    if not error.status:
        return batch, None
    reason = error.reason.decode("utf-8", "replace")
    check = wire.TIME_CHECKS.get(reason)
    seq = error.seq if error.has_seq else None
    return batch, ScanError(wire.Status(error.status), seq, reason, check)


def join_info(parts: list[np.ndarray]) -> np.ndarray:
    """FRAME_INFO arrays end to end, as one. Joined as raw bytes: numpy's concatenate of
    structured arrays promotes their fields in Python, one call per array (a transaction
    of ~90 reads spent ~0.6 us per frame there, bench/RESULTS.md "Ingest, sixth pass")."""
    raw = np.concatenate([np.ascontiguousarray(p).view(np.uint8) for p in parts])
    joined: np.ndarray = raw.view(FRAME_INFO)
    return joined


def frame_addresses(batches: list[FrameBatch]) -> np.ndarray:
    """Address of every frame of `batches` in memory, in order (for encode_arrays)."""
    return np.concatenate(
        [np.frombuffer(b.data, np.uint8).ctypes.data + b.info["offset"] for b in batches]
    ).astype(np.uint64)


#: Bytes of COPY rows encoded at a time (encode_arrays): small enough to stay in the
#: CPU's cache while the COPY sends them, large enough that a call per piece costs nothing.
ENCODE_PIECE = 1 << 20


def encode_arrays(
    table_id: int,
    columns: np.ndarray,
    frames: np.ndarray,
    info: np.ndarray,
    job_ids: np.ndarray,
    run_ids: np.ndarray,
    ranks: np.ndarray,
    piece: int = ENCODE_PIECE,
) -> Iterator[memoryview]:
    """Binary COPY rows (no signature or trailer) of one array-layout table, one per frame,
    in pieces of whole rows of about `piece` bytes. Each piece is a view of one buffer that
    the next piece overwrites: write it (or copy it) before asking for the next.

    `frames` are frame addresses (frame_addresses; the batches must stay alive until the
    last piece), `info` their FRAME_INFO records, `job_ids` and `run_ids` their jobs' and
    runs' ids and `ranks` the rank stored for each (its world rank, or a non-MPI process's
    number); every frame must hold the table's section (an empty one becomes a row of
    empty arrays). `columns` is a COLUMN array in table column order.
    """
    lib = library()
    info = np.ascontiguousarray(info)
    frames = np.ascontiguousarray(frames, dtype=np.uint64)
    job_ids = np.ascontiguousarray(job_ids, dtype=np.int64)
    run_ids = np.ascontiguousarray(run_ids, dtype=np.int64)
    ranks = np.ascontiguousarray(ranks, dtype=np.int32)
    args = (table_id, columns.ctypes.data, len(columns), len(info), frames.ctypes.data,
            info.ctypes.data, job_ids.ctypes.data, run_ids.ctypes.data,
            ranks.ctypes.data)  # fmt: skip
    done = ctypes.c_uint32(0)
    buffer = bytearray(piece)
    while done.value < len(info):
        address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
        written = lib.sl_encode_arrays(*args, ctypes.byref(done), address, len(buffer))
        if written == -1:
            raise ValueError(f"table id {table_id} is not an array table")
        if written == -2:  # one row larger than the buffer: a larger one for it
            buffer = bytearray(2 * len(buffer))
            continue
        yield memoryview(buffer)[:written]
