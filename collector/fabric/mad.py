"""MAD source: topology discovery (libibnetdisc) and PMA counter sweeps (libibmad).

Both go through libslfabric.so, the project's small C helper (collector/fabric/csrc),
loaded with ctypes inside a worker subprocess (`python -m collector.fabric.mad`). The
worker keeps one MAD port open and answers length-prefixed pickled requests on its
stdin/stdout. A subprocess, because on the simulator the MAD layer is the LD_PRELOADed
libumad2sim.so (it must be loaded at process start, creates ./sys-<pid> in its working
directory, serves one open port per process and blocks forever without a simulator); a
wedged or crashed worker is killed and restarted instead of taking the collector down.
A sweep costs one in-process MAD round trip per attribute (~30 us on ibsim), not one
process per port. Counters are only read; stacklens never resets them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from collector.fabric.counters import COUNTER_NAMES, RawSweep
from collector.fabric.topology import (
    Link,
    Node,
    NodeType,
    Port,
    Topology,
    capacity_bytes_per_s,
)

CSRC_DIR = Path(__file__).resolve().parent / "csrc"
LIBRARY = Path(__file__).resolve().parent / "build" / "libslfabric.so"

#: Status bits of one target (slfabric.c SLF_OK_*).
OK_EXTENDED = 0x1
OK_BASIC = 0x2
#: PMA ClassPortInfo bits that announce PortCountersExtended.
_PM_EXT_WIDTH = 0x0200 | 0x0400


class MadError(RuntimeError):
    """The MAD layer could not be opened or did not answer."""


_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def load_library(build: bool = True) -> ctypes.CDLL:
    """Load libslfabric.so, building it first with make if `build` (idempotent)."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        if build:
            subprocess.run(["make", "-s", "-C", str(CSRC_DIR)], check=True)
        if not LIBRARY.is_file():
            raise MadError(f"{LIBRARY} is not built: run `make -C {CSRC_DIR}`")
        lib = ctypes.CDLL(str(LIBRARY))
        lib.slf_open.restype = ctypes.c_void_p
        lib.slf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.slf_close.argtypes = [ctypes.c_void_p]
        lib.slf_free.argtypes = [ctypes.c_void_p]
        lib.slf_discover.restype = ctypes.c_int
        lib.slf_discover.argtypes = [
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_void_p),
        ]
        ptr = np.ctypeslib.ndpointer
        lib.slf_cpi.restype = ctypes.c_int
        lib.slf_cpi.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ptr(np.uint16, flags="C"),
            ptr(np.uint32, flags="C"),
        ]
        lib.slf_sweep.restype = ctypes.c_int
        lib.slf_sweep.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ptr(np.uint16, flags="C"),
            ptr(np.uint8, flags="C"),
            ptr(np.uint8, flags="C"),
            ptr(np.uint64, flags="C"),
            ptr(np.uint8, flags="C"),
        ]
        _lib = lib
        return lib


def parse_discovery(text: str) -> Topology:
    """Build a Topology from slf_discover's text (N, P and F lines, tab-separated)."""
    nodes: dict[int, Node] = {}
    ports: dict[tuple[int, int], Port] = {}
    remote: dict[tuple[int, int], tuple[int, int]] = {}
    lfts: dict[int, np.ndarray] = {}
    for line in text.splitlines():
        f = line.split("\t")
        if f[0] == "N":
            guid = int(f[2], 16)
            nodes[guid] = Node(guid, NodeType(int(f[1])), f[4], int(f[3]))
        elif f[0] == "P":
            key = (int(f[1], 16), int(f[2]))
            width, speed, speed_ext = int(f[7]), int(f[8]), int(f[9])
            ports[key] = Port(
                guid=key[0],
                port=key[1],
                port_guid=int(f[3], 16),
                lid=int(f[4]),
                state=int(f[5]),
                phys_state=int(f[6]),
                width=width,
                speed=speed,
                speed_ext=speed_ext,
                capacity_bytes_per_s=capacity_bytes_per_s(width, speed, speed_ext),
            )
            if int(f[10], 16):
                remote[key] = (int(f[10], 16), int(f[11]))
        elif f[0] == "F":
            lfts[int(f[1], 16)] = np.array([int(x) for x in f[3].split(",")], dtype=np.uint8)
    for node in nodes.values():
        if node.type == NodeType.SWITCH and (node.guid, 0) in ports:
            node.lid = ports[(node.guid, 0)].lid
        else:
            node.lid = min((p.lid for k, p in ports.items() if k[0] == node.guid), default=0)
    links = {Link.of(a, b) for a, b in remote.items()}
    return Topology(nodes=nodes, ports=ports, links=sorted(links), lfts=lfts)


class _Lib:
    """The C helper in this process, with one MAD port opened lazily."""

    def __init__(self, ca: str | None, ca_port: int, timeout_ms: int, retries: int):
        self.lib = load_library(build=False)
        self.ca = ca.encode() if ca else None
        self.ca_port = ca_port
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.handle: int | None = None
        self.ext_by_lid: dict[int, bool] = {}

    def open(self) -> int:
        """The open MAD port (opened on first use)."""
        if self.handle is None:
            h = self.lib.slf_open(self.ca, self.ca_port, self.timeout_ms, self.retries)
            if not h:
                raise MadError("could not open a MAD port (no HCA or no simulator?)")
            self.handle = h
        return self.handle

    def close(self) -> None:
        """Close the MAD port."""
        if self.handle is not None:
            self.lib.slf_close(self.handle)
            self.handle = None

    def discover(self) -> tuple[str, int]:
        """(discovery text, LFT blocks not read); learns which PMAs have extended counters."""
        self.close()  # umad2sim serves one open MAD port per process
        out = ctypes.c_void_p()
        rc = self.lib.slf_discover(self.ca, self.ca_port, self.timeout_ms * 5, 1, ctypes.byref(out))
        if rc < 0 or not out.value:
            raise MadError(f"fabric discovery failed ({rc})")
        try:
            text = ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            self.lib.slf_free(out)
        lids = sorted(
            {
                int(f[4])
                for f in (ln.split("\t") for ln in text.splitlines())
                if f[0] == "P" and int(f[4])
            }
        )
        arr = np.array(lids, dtype=np.uint16)
        caps = np.zeros(len(arr), dtype=np.uint32)
        self.lib.slf_cpi(self.open(), len(arr), arr, caps)
        self.ext_by_lid = {
            int(lid): bool(c & _PM_EXT_WIDTH) for lid, c in zip(arr, caps, strict=True)
        }
        return text, rc

    def sweep(self, lids: np.ndarray, ports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(raw values (n, 11), status bits (n,)) of the targets."""
        n = len(lids)
        lids = np.ascontiguousarray(lids, dtype=np.uint16)
        ports = np.ascontiguousarray(ports, dtype=np.uint8)
        ext = np.array([self.ext_by_lid.get(int(x), True) for x in lids], dtype=np.uint8)
        values = np.zeros((n, len(COUNTER_NAMES)), dtype=np.uint64)
        status = np.zeros(n, dtype=np.uint8)
        self.lib.slf_sweep(self.open(), n, lids, ports, ext, values, status)
        return values, status


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def _recv_exact(fd: int, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("MAD worker did not answer in time")
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("MAD worker exited")
        buf += chunk
    return bytes(buf)


def _recv(fd: int, deadline: float | None):
    (size,) = struct.unpack("<I", _recv_exact(fd, 4, deadline))
    return pickle.loads(_recv_exact(fd, size, deadline))


def worker_main() -> int:
    """Serve requests from the parent MadSource until stdin closes."""
    args = _recv(sys.stdin.fileno(), None)
    lib = _Lib(**args)
    out = sys.stdout.buffer
    while True:
        try:
            op, payload = _recv(sys.stdin.fileno(), None)
        except EOFError:
            lib.close()
            return 0
        try:
            if op == "discover":
                result = ("ok", lib.discover())
            elif op == "sweep":
                result = ("ok", lib.sweep(*payload))
            else:
                result = ("error", f"unknown request {op!r}")
        except MadError as exc:
            result = ("error", str(exc))
        _send(out, result)


class MadSource:
    """Discovery and counter sweeps over real MADs, through a worker subprocess.

    `env` is added to the worker's environment (on the simulator: LD_PRELOAD of
    libumad2sim.so, SIM_HOST, IBSIM_SOCKNAME); `workdir` is its working directory.
    """

    name = "mad"

    def __init__(
        self,
        ca: str | None = None,
        ca_port: int = 0,
        env: dict[str, str] | None = None,
        workdir: Path | None = None,
        timeout_ms: int = 200,
        retries: int = 2,
        request_timeout_s: float = 30.0,
    ):
        load_library()  # build it here, not under the preload
        self._args = {"ca": ca, "ca_port": ca_port, "timeout_ms": timeout_ms, "retries": retries}
        self._env = env or {}
        self._workdir = workdir
        self._request_timeout_s = request_timeout_s
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._targets: list[tuple[int, int, int]] = []

    def _worker(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            src_root = str(Path(__file__).resolve().parents[2])
            env = {**os.environ, **self._env}
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (src_root, os.environ.get("PYTHONPATH", "")) if p
            )
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "collector.fabric.mad"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                cwd=self._workdir,
                start_new_session=True,
            )
            _send(self._proc.stdin, self._args)
        return self._proc

    def _call(self, op: str, payload=None):
        with self._lock:
            proc = self._worker()
            try:
                _send(proc.stdin, (op, payload))
                status, result = _recv(
                    proc.stdout.fileno(), time.monotonic() + self._request_timeout_s
                )
            except (TimeoutError, EOFError, BrokenPipeError) as exc:
                self._kill()
                raise MadError(f"MAD worker failed during {op}: {exc}") from exc
        if status != "ok":
            raise MadError(result)
        return result

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        """Stop the worker (closing its stdin lets it close its MAD port and exit)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=5)
            self._kill()

    def __enter__(self) -> MadSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def discover(self) -> Topology:
        """Discover nodes, ports, links and forwarding tables.

        Each discovery runs in a fresh worker: umad2sim does not release what a closed MAD
        port registered, so a long-lived process could discover only a few times.
        """
        self.close()
        text, lft_errors = self._call("discover")
        topo = parse_discovery(text)
        topo.lft_errors = lft_errors
        self._targets = topo.sweep_targets()
        return topo

    def sweep(self, targets: list[tuple[int, int, int]] | None = None) -> RawSweep:
        """Read the counters of `targets` [(guid, port, lid)] (default: every connected port
        of the last discovery)."""
        if targets is None:
            targets = self._targets
        lids = np.array([t[2] for t in targets], dtype=np.uint16)
        ports = np.array([t[1] for t in targets], dtype=np.uint8)
        t0 = time.time_ns()
        values, status = self._call("sweep", (lids, ports))
        t1 = time.time_ns()
        return RawSweep.from_words(
            guids=[t[0] for t in targets],
            ports=ports,
            values=values,
            extended=(status & OK_EXTENDED) != 0,
            # PortCounters is mandatory for a PMA: without its answer the errors are unknown.
            answered=(status & OK_BASIC) != 0,
            t_start_ns=t0,
            t_end_ns=t1,
        )


if __name__ == "__main__":
    sys.exit(worker_main())
