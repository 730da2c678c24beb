"""The launch record of `stacklens run`: how its command ended, sent as one frame of type
launch (contract/stacklens_wire.def, table launch) after the ranks' own frames.

`stacklens run` draws a launch id (64 random non-zero bits) and gives it to its command as
STACKLENS_LAUNCH_ID; every rank sends it in its rank information, so the collector links
the launch to the runs its ranks made. A launch whose ranks never sent a frame (they
crashed first, the binary was missing, the launcher refused the command line) becomes a
run of its own, `failed` or `killed`, with the command, the ranks asked for and the
launcher's last lines of output: a crashed launch is never silent
(collector/store/launches.py).

The command's output reaches the terminal as it comes (both streams, byte for byte); the
last OUTPUT_BYTES of it are kept for the record.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import IO

import numpy as np

from stacklens import wire

#: The environment variable that gives a launch's id to its ranks (hex, 16 digits; a
#: declared hook setting: contract/stacklens_settings.def).
LAUNCH_ID = "STACKLENS_LAUNCH_ID"
#: The output kept for the record (the wire field's size, its NUL excluded).
OUTPUT_BYTES = wire.fields_of(wire.SPEC.table("launch").dtype)["output"][0].itemsize - 1
#: The command kept for the record.
COMMAND_BYTES = wire.fields_of(wire.SPEC.table("launch").dtype)["command"][0].itemsize - 1


def new_launch_id() -> int:
    """A launch id: 64 random bits, never 0."""
    return secrets.randbits(64) or 1


class OutputTail:
    """The last bytes two streams of a command wrote, in the order they came, while they
    are passed on to this process's own streams unchanged."""

    def __init__(self, keep: int = 4 * OUTPUT_BYTES):
        self._keep = keep
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def pump(self, source: IO[bytes], target: IO[bytes]) -> None:
        """Copy `source` to `target` on a thread of its own until it ends, keeping a tail."""
        thread = threading.Thread(target=self._copy, args=(source, target), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _copy(self, source: IO[bytes], target: IO[bytes]) -> None:
        fd = source.fileno()
        while chunk := os.read(fd, 65536):
            try:
                target.write(chunk)
                target.flush()
            except (OSError, ValueError):
                pass  # our own terminal is gone: the command goes on, its tail is kept
            with self._lock:
                self._tail += chunk
                del self._tail[: max(0, len(self._tail) - self._keep)]
        source.close()

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the streams to end (the command's children may hold them open: bounded)."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def text(self, size: int = OUTPUT_BYTES) -> str:
        """The last lines, at most `size` bytes of UTF-8: whole lines where a line break is
        inside the last `size` bytes, else cut at a character boundary."""
        with self._lock:
            raw = bytes(self._tail)
        return last_text(raw.decode("utf-8", "replace"), size)


def last_text(text: str, size: int) -> str:
    """The end of `text` in at most `size` bytes of UTF-8, starting at a line where one
    starts inside them, without NUL."""
    data = text.replace("\0", "").encode()
    if len(data) <= size:
        return data.decode()
    data = data[-size:]
    if (cut := data.find(b"\n")) >= 0 and cut + 1 < len(data):
        data = data[cut + 1 :]
    return data.decode("utf-8", "ignore")


def first_text(text: str, size: int) -> str:
    """The start of `text` in at most `size` bytes of UTF-8, without NUL."""
    return text.replace("\0", "").encode()[:size].decode("utf-8", "ignore")


@dataclass(frozen=True)
class Launch:
    """One launch by `stacklens run`: who, what, and how it ended."""

    job: str
    launch_id: int
    command: str
    ranks_expected: int | None
    started_ns: int
    ended_ns: int
    exit_code: int
    exit_signal: int | None
    forwarded: int | None
    output: str

    def frame(self, token: str = "", sites: np.ndarray | None = None) -> bytes:
        """The launch as a frame of type launch (its header's run id: the launch id; the
        ingest token for a collector in trusted mode), with the call sites resolved on
        this node (`sites`: site_symbol records, stacklens_cli/node_sites.py)."""
        record = np.zeros(1, dtype=wire.SPEC.table("launch").dtype)
        record["ranks_expected"] = self.ranks_expected or 0
        record["exit_code"] = 0 if self.exit_signal else self.exit_code & 0xFFFFFFFF
        record["exit_signal"] = self.exit_signal or 0
        record["forwarded"] = self.forwarded or 0
        record["command"] = first_text(self.command, COMMAND_BYTES).encode()
        record["output"] = last_text(self.output, OUTPUT_BYTES).encode()
        return wire.encode_frame(
            job_id=self.job,
            world_rank=0,
            world_size=1,
            seq=0,
            interval_start_ns=self.started_ns,
            interval_end_ns=max(self.ended_ns, self.started_ns),
            run_id=self.launch_id,
            proc_start_ns=self.started_ns,
            host=os.environ.get("STACKLENS_HOST") or socket.gethostname()[:63],
            pid=os.getpid(),
            token=token,
            frame_type=wire.FrameType.LAUNCH,
            tables={"launch": record, **({"site_symbol": sites} if sites is not None
                                         and len(sites) else {})},
        )  # fmt: skip
