"""MAD source: topology discovery (libibnetdisc) and PMA counter sweeps (libibmad).

Both go through libslfabric.so, the project's small C helper (collector/fabric/csrc),
loaded with ctypes inside worker subprocesses (`python -m collector.fabric.mad`). A
worker keeps one MAD port open and answers length-prefixed pickled requests on its
stdin/stdout. Subprocesses, because on the simulator the MAD layer is the LD_PRELOADed
libumad2sim.so (it must be loaded at process start, creates ./sys-<pid> in its working
directory, serves one open port per process and blocks forever without a simulator); a
wedged or crashed worker is killed and restarted instead of taking the collector down.
A sweep is split into contiguous slices over up to `sweep_workers` workers (each its own
MAD port: its own umad2sim client on ibsim, its own umad agent on real hardware) that
query their slices concurrently; the slices are merged back in target order. Each worker
issues one in-process MAD round trip per attribute (~30 us on ibsim), not one process per
port. Counters are only read; stacklens never resets them.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from collector.fabric.counters import PortState, RawSweep
from collector.fabric.topology import (
    Link,
    Node,
    NodeType,
    Port,
    Topology,
    capacity_bytes_per_s,
)
from stacklens.constants import PORT_COUNTERS

CSRC_DIR = Path(__file__).resolve().parent / "csrc"
LIBRARY = Path(__file__).resolve().parent / "build" / "libslfabric.so"

#: Status bits of one target (slfabric.c SLF_OK_*).
OK_EXTENDED = 0x1
OK_BASIC = 0x2
#: PMA ClassPortInfo bits that announce PortCountersExtended.
_PM_EXT_WIDTH = 0x0200 | 0x0400
#: Fewest targets worth a worker of their own: smaller sweeps use fewer workers.
MIN_TARGETS_PER_WORKER = 16


def default_sweep_workers() -> int:
    """Worker processes a sweep is split over by default: min(4, CPU count)."""
    return min(4, os.cpu_count() or 1)


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
            ctypes.c_int,
            ptr(np.uint16, flags="C"),
            ptr(np.uint8, flags="C"),
            ptr(np.uint8, flags="C"),
        ]
        check_abi(lib)
        _lib = lib
        return lib


def check_abi(lib: ctypes.CDLL) -> None:
    """Raise MadError unless the library's sweep rows are what `_Lib.sweep` reads: one
    uint64 per counter of PORT_COUNTERS, in that order, and the status bits OK_*."""
    lib.slf_abi.argtypes = [ctypes.POINTER(ctypes.c_uint32)]
    lib.slf_counter_name.restype = ctypes.c_char_p
    lib.slf_counter_name.argtypes = [ctypes.c_int]
    abi = (ctypes.c_uint32 * 4)()
    lib.slf_abi(abi)
    expected = [len(PORT_COUNTERS), np.dtype(np.uint64).itemsize, OK_EXTENDED, OK_BASIC]
    names = [lib.slf_counter_name(i) for i in range(len(PORT_COUNTERS) + 1)]
    columns = [n.decode() for n in names if n is not None]
    if list(abi) != expected or tuple(columns) != PORT_COUNTERS:
        raise MadError(
            f"{LIBRARY}: ABI {list(abi)} with columns {columns}, expected {expected} with "
            f"{list(PORT_COUNTERS)}: rebuild it (make -C {CSRC_DIR})"
        )


def parse_discovery(text: str) -> Topology:
    """Build a Topology from slf_discover's text (N, P, F and S lines, tab-separated)."""
    subnet_prefix = sm_lid = 0
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
            width, speed, speed_ext, mlnx_speed = int(f[7]), int(f[8]), int(f[9]), int(f[10])
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
                mlnx_speed=mlnx_speed,
                capacity_bytes_per_s=capacity_bytes_per_s(width, speed, speed_ext, mlnx_speed),
            )
            if int(f[11], 16):
                remote[key] = (int(f[11], 16), int(f[12]))
        elif f[0] == "F":
            lfts[int(f[1], 16)] = np.array([int(x) for x in f[3].split(",")], dtype=np.uint8)
        elif f[0] == "S":
            subnet_prefix, sm_lid = int(f[1], 16), int(f[2])
    for node in nodes.values():
        if node.type == NodeType.SWITCH and (node.guid, 0) in ports:
            node.lid = ports[(node.guid, 0)].lid
        else:
            node.lid = min((p.lid for k, p in ports.items() if k[0] == node.guid), default=0)
    links = {Link.of(a, b) for a, b in remote.items()}
    return Topology(
        nodes=nodes,
        ports=ports,
        links=sorted(links),
        lfts=lfts,
        subnet_prefix=subnet_prefix,
        sm_lid=sm_lid,
    )


class _Lib:
    """The C helper in this process, with one MAD port opened lazily."""

    def __init__(self, ca: str | None, ca_port: int, timeout_ms: int, retries: int):
        self.lib = load_library(build=False)
        self.ca = ca.encode() if ca else None
        self.ca_port = ca_port
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.handle: int | None = None

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

    def discover(self) -> tuple[str, int, dict[int, bool]]:
        """(discovery text, LFT blocks not read, {LID: PMA has extended counters})."""
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
        ext_by_lid = {int(lid): bool(c & _PM_EXT_WIDTH) for lid, c in zip(arr, caps, strict=True)}
        return text, rc, ext_by_lid

    def sweep(
        self,
        lids: np.ndarray,
        ports: np.ndarray,
        ext: np.ndarray,
        probe_lids: np.ndarray,
        probe_ports: np.ndarray,
    ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(this process's pid, raw values (n, 11), status bits (n,), probed states (m,))
        of the targets and probes; `ext[i]` != 0: try PortCountersExtended for target i. A
        probed state is PortState | PortPhysicalState << 4 of switch port
        (probe_lids[j], probe_ports[j]), 0 if it did not answer."""
        n, m = len(lids), len(probe_lids)
        lids = np.ascontiguousarray(lids, dtype=np.uint16)
        ports = np.ascontiguousarray(ports, dtype=np.uint8)
        ext = np.ascontiguousarray(ext, dtype=np.uint8)
        probe_lids = np.ascontiguousarray(probe_lids, dtype=np.uint16)
        probe_ports = np.ascontiguousarray(probe_ports, dtype=np.uint8)
        values = np.zeros((n, len(PORT_COUNTERS)), dtype=np.uint64)
        status = np.zeros(n, dtype=np.uint8)
        states = np.zeros(m, dtype=np.uint8)
        self.lib.slf_sweep(
            self.open(), n, lids, ports, ext, values, status, m, probe_lids, probe_ports, states
        )
        return os.getpid(), values, status, states


def _send(stream, obj) -> None:
    """Write one length-prefixed pickled message."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def _recv_exact(fd: int, n: int) -> bytes:
    """Read exactly n bytes from fd (blocking); EOFError if the writer exits first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError("MAD worker exited")
        buf += chunk
    return bytes(buf)


def _recv(fd: int):
    """Read one length-prefixed pickled message from fd (blocking)."""
    (size,) = struct.unpack("<I", _recv_exact(fd, 4))
    return pickle.loads(_recv_exact(fd, size))


def worker_main() -> int:
    """Serve requests from the parent MadSource until stdin closes."""
    args = _recv(sys.stdin.fileno())
    lib = _Lib(**args)
    out = sys.stdout.buffer
    while True:
        try:
            op, payload = _recv(sys.stdin.fileno())
        except EOFError:
            lib.close()
            return 0
        result: tuple[str, Any]
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


class _Worker:
    """One MAD worker subprocess (its own MAD port), spoken to over its stdin/stdout.

    `env` is added to its environment, `workdir` is its working directory; `args` are
    _Lib's keyword arguments, sent as the first message.
    """

    def __init__(self, args: dict, env: dict[str, str], workdir: Path | None):
        src_root = str(Path(__file__).resolve().parents[2])
        full_env = {**os.environ, **env}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (src_root, os.environ.get("PYTHONPATH", "")) if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collector.fabric.mad"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=full_env,
            cwd=workdir,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None  # PIPE both
        #: the worker's request and reply pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        with contextlib.suppress(BrokenPipeError):  # died at once: its first request sees EOF
            _send(self.stdin, args)

    @property
    def pid(self) -> int:
        """The worker's process id."""
        return self.proc.pid

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker's session (it may be blocked inside umad2sim), reap it and
        close the pipes."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for pipe in (self.stdin, self.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


def _recv_all(fds: list[int], deadline: float) -> list:
    """One message from each of `fds`, read concurrently until `deadline` (time.monotonic()).

    An fd whose writer exited gets an EOFError, one whose message is incomplete at the
    deadline a TimeoutError, in place of the message: a stuck worker never delays reading
    the others' replies.
    """
    bufs = {fd: bytearray() for fd in fds}
    need = dict.fromkeys(fds, 4)  # the length prefix first, then prefix + message
    done: dict[int, object] = {}
    while len(done) < len(fds):
        pending = [fd for fd in fds if fd not in done]
        ready = select.select(pending, [], [], max(0.0, deadline - time.monotonic()))[0]
        if not ready:
            done.update((fd, TimeoutError("MAD worker did not answer in time")) for fd in pending)
            break
        for fd in ready:
            chunk = os.read(fd, need[fd] - len(bufs[fd]))
            if not chunk:
                done[fd] = EOFError("MAD worker exited")
                continue
            bufs[fd] += chunk
            if len(bufs[fd]) == need[fd] == 4:
                need[fd] += struct.unpack("<I", bufs[fd])[0]
            elif len(bufs[fd]) == need[fd]:
                done[fd] = pickle.loads(bytes(bufs[fd][4:]))
    return [done[fd] for fd in fds]


class MadSource:
    """Discovery and counter sweeps over real MADs, through worker subprocesses.

    `env` is added to the workers' environment (on the simulator: LD_PRELOAD of
    libumad2sim.so, SIM_HOST, IBSIM_SOCKNAME): every worker attaches at the same host, so
    the MADs of a sweep cross the same links whatever the number of workers.
    `workdir` is their working directory. A sweep of n targets is split over
    min(`sweep_workers`, n // MIN_TARGETS_PER_WORKER) workers (at least one; default
    sweep_workers: default_sweep_workers()). On ibsim each worker is one of its 10 clients.
    Every request has a deadline of `request_timeout_s`; a worker that misses it or dies
    is killed (and started again by the next request) and the request fails with MadError.
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
        sweep_workers: int | None = None,
    ):
        load_library()  # build it here, not under the preload
        self._args = {"ca": ca, "ca_port": ca_port, "timeout_ms": timeout_ms, "retries": retries}
        self._env = env or {}
        self._workdir = workdir
        self._request_timeout_s = request_timeout_s
        self.sweep_workers = sweep_workers or default_sweep_workers()
        if self.sweep_workers < 1:
            raise ValueError("sweep_workers must be at least 1")
        #: Process ids of the workers that answered the last sweep, in slice order.
        self.last_sweep_pids: list[int] = []
        self._workers: list[_Worker | None] = []
        self._lock = threading.Lock()
        self._targets: list[tuple[int, int, int]] = []
        self._ext_by_lid: dict[int, bool] = {}

    def _worker(self, i: int) -> _Worker:
        """Worker i, started (again) if it is not running."""
        self._workers += [None] * (i + 1 - len(self._workers))
        worker = self._workers[i]
        if worker is None or not worker.alive():
            if worker is not None:
                worker.kill()
            worker = self._workers[i] = _Worker(self._args, self._env, self._workdir)
        return worker

    def _request(self, op: str, payloads: list) -> list:
        """Send payloads[i] to worker i (all before reading any reply), collect every reply
        by one deadline; results in payload order. Failed workers are killed, then MadError."""
        with self._lock:
            workers = [self._worker(i) for i in range(len(payloads))]
            for worker, payload in zip(workers, payloads, strict=True):
                with contextlib.suppress(BrokenPipeError):  # a dead worker: EOF below
                    _send(worker.stdin, (op, payload))
            deadline = time.monotonic() + self._request_timeout_s
            replies = _recv_all([w.stdout.fileno() for w in workers], deadline)
            failures = []
            for i, (worker, reply) in enumerate(zip(workers, replies, strict=True)):
                if isinstance(reply, EOFError | TimeoutError):
                    failures.append(f"worker {worker.pid}: {reply}")
                    worker.kill()
                    self._workers[i] = None
        if failures:
            raise MadError(f"MAD worker failed during {op}: {'; '.join(failures)}")
        errors = [result for status, result in replies if status != "ok"]
        if errors:
            raise MadError(errors[0])
        return [result for _, result in replies]

    def close(self) -> None:
        """Stop every worker: closing their stdin lets them close their MAD ports and exit;
        whatever still runs after 5 s is killed."""
        with self._lock:
            workers = [w for w in self._workers if w is not None]
            self._workers = []
            for worker in workers:
                with contextlib.suppress(OSError):
                    worker.stdin.close()
            deadline = time.monotonic() + 5.0
            for worker in workers:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                worker.kill()

    def __enter__(self) -> MadSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def discover(self) -> Topology:
        """Discover nodes, ports, links and forwarding tables.

        Each discovery runs in a fresh worker (then worker 0 of the sweeps): umad2sim does
        not release what a closed MAD port registered, so a long-lived process could
        discover only a few times.
        """
        self.close()
        ((text, lft_errors, self._ext_by_lid),) = self._request("discover", [None])
        topo = parse_discovery(text)
        topo.lft_errors = lft_errors
        self._targets = topo.sweep_targets()
        return topo

    def sweep(
        self,
        targets: list[tuple[int, int, int]] | None = None,
        probes: Sequence[tuple[int, int, int]] = (),
    ) -> RawSweep:
        """Read the counters of `targets` [(guid, port, lid)] (default: every connected port
        of the last discovery), contiguous slices in parallel workers, merged in order; and,
        in the same passes (a slice per worker too), the PortInfo state of the switch ports
        `probes` [(guid, port, switch lid)] (`port_states` of the result: those that
        answered)."""
        if targets is None:
            targets = self._targets
        lids = np.array([t[2] for t in targets], dtype=np.uint16)
        ports = np.array([t[1] for t in targets], dtype=np.uint8)
        ext = np.array([self._ext_by_lid.get(int(x), True) for x in lids], dtype=np.uint8)
        k = max(1, min(self.sweep_workers, len(targets) // MIN_TARGETS_PER_WORKER))
        probe_lids = np.array([t[2] for t in probes], dtype=np.uint16)
        probe_ports = np.array([t[1] for t in probes], dtype=np.uint8)
        payloads = list(
            zip(
                np.array_split(lids, k),
                np.array_split(ports, k),
                np.array_split(ext, k),
                np.array_split(probe_lids, k),
                np.array_split(probe_ports, k),
                strict=True,
            )
        )
        t0 = time.time_ns()
        replies = self._request("sweep", payloads)
        t1 = time.time_ns()
        self.last_sweep_pids = [pid for pid, _, _, _ in replies]
        values = np.concatenate([v for _, v, _, _ in replies])
        status = np.concatenate([s for _, _, s, _ in replies])
        states = np.concatenate([x for _, _, _, x in replies])
        return RawSweep.from_words(
            guids=[t[0] for t in targets],
            ports=ports,
            values=values,
            extended=(status & OK_EXTENDED) != 0,
            # PortCounters is mandatory for a PMA: without its answer the errors are unknown.
            answered=(status & OK_BASIC) != 0,
            t_start_ns=t0,
            t_end_ns=t1,
            port_states={
                (g, p): PortState(int(x) & 0xF, int(x) >> 4)
                for (g, p, _), x in zip(probes, states, strict=True)
                if x
            },
        )


if __name__ == "__main__":
    sys.exit(worker_main())
