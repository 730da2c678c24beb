"""Fabric emulator: ibsim + opensm running a generated fat tree, and traffic as counter moves.

FabricSim starts ibsim on a generated topology with a console FIFO (its stdin; this
process holds the FIFO open, others may write commands to it), brings the subnet up with
`opensm -o`, and stops everything it started. The simulator carries no data: the
TrafficEmulator turns flows (MPI traffic, I/O to storage nodes, background noise) into
counter movements on every port of each flow's route (from the switches' forwarding
tables), by reading the current PortCountersExtended of those ports and setting them to
value + flow with the console's PerformanceSet. Faults (unlink/relink, PortXmitWait,
error counters) are console commands too; a relinked port is brought back to Active by an
opensm sweep, as the subnet manager of a real fabric would. The console's output is read
incrementally from where the previous command's ended (bounded memory, however long the
emulator runs).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from collector.fabric.mad import MadSource
from collector.fabric.topology import Topology
from emulator.fattree import FatTree
from stacklens.port_counters import PORT_COUNTER_TABLE

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
#: Bytes per packet assumed when a flow's bytes are turned into packet counts: the IB MTU
#: the simulated subnet runs (ibsim's ports: NeighborMTU 2048).
MTU_BYTES = 2048
#: The IB link-local GID prefix (fe80::/64), opensm's default subnet prefix.
LINK_LOCAL_PREFIX = 0xFE80_0000_0000_0000
#: The simulator's log (its console output) is emptied once past this size: it is read
#: incrementally and never held whole, so neither memory nor disk grows with uptime.
LOG_MAX_BYTES = 1 << 20
#: Counters a fault can raise (errors and PortXmitWait), by their PortCounters field names
#: (contract/port_counters.def).
ERROR_FIELDS = {c.name: c.ibsim for c in PORT_COUNTER_TABLE if c.kind in ("error", "wait")}
#: Counters a flow moves (data and packets, PortCountersExtended), in the order of
#: TrafficEmulator.port_moves: xmit bytes, rcv bytes, xmit packets, rcv packets.
MOVED = tuple(c for c in PORT_COUNTER_TABLE if c.kind in ("data", "packets"))


class SimError(RuntimeError):
    """The simulator could not be started or did not respond."""


@dataclass(frozen=True)
class Flow:
    """`nbytes` sent from HCA `src` to HCA `dst` (node names); kind: mpi_p2p, mpi_coll,
    mpi_rma, io, noise."""

    src: str
    dst: str
    nbytes: int
    kind: str = "mpi_p2p"


def port_ref(node: str, port: int) -> str:
    """A port as ibsim's console names it: `"node"[port]`."""
    return f'"{node}"[{port}]'


def umad2sim_library() -> Path:
    """Path of libumad2sim.so (Debian's libumad2sim0 package)."""
    if UMAD2SIM.is_file():
        return UMAD2SIM
    found = subprocess.run(["dpkg", "-L", "libumad2sim0"], capture_output=True, text=True)
    for line in found.stdout.splitlines():
        if line.endswith("libumad2sim.so"):
            return Path(line)
    raise SimError("libumad2sim.so not found: apt-get install libumad2sim0")


class FabricSim:
    """An ibsim simulator of `tree` in `workdir`, with its subnet brought up by opensm.

    Each simulator is a subnet of its own, as two real fabrics are: its subnet prefix
    (`subnet_prefix`, set by opensm) is the link-local prefix with 32 bits drawn from its
    socket name, unless given.
    """

    def __init__(
        self,
        tree: FatTree,
        workdir: Path,
        sockname: str | None = None,
        subnet_prefix: int | None = None,
    ):
        self.tree = tree
        self.workdir = Path(workdir)
        self.sockname = sockname or f"stacklens-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        if subnet_prefix is None:
            subnet_prefix = LINK_LOCAL_PREFIX | zlib.crc32(self.sockname.encode())
        self.subnet_prefix = subnet_prefix
        self.attach = tree.hcas[0]
        self.net_file = self.workdir / "net"
        self.fifo = self.workdir / "console"
        self.log_file = self.workdir / "ibsim.log"
        self._proc: subprocess.Popen | None = None
        self._fifo_fd: int | None = None
        self._log_pos = 0  # where the next read of the log starts

    def client_env(self, host: str | None = None) -> dict[str, str]:
        """Environment of a MAD client attached to `host` (default: the first host)."""
        return {
            "LD_PRELOAD": str(umad2sim_library()),
            "SIM_HOST": host or self.attach,
            "IBSIM_SOCKNAME": self.sockname,
        }

    def start(self, timeout: float = 30.0) -> None:
        """Write the topology, start ibsim with the FIFO console, run opensm once."""
        if shutil.which("ibsim") is None or shutil.which("opensm") is None:
            raise SimError("ibsim/opensm not installed: scripts/install-debian-packages.sh")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.net_file.write_text(self.tree.to_ibsim())
        if self.fifo.exists():
            self.fifo.unlink()
        os.mkfifo(self.fifo)
        # O_RDWR: this process is a writer for as long as the simulator lives, so ibsim
        # never sees EOF on its console (at EOF it would spin at 100 % CPU).
        self._fifo_fd = os.open(self.fifo, os.O_RDWR)
        self._log_pos = 0
        # Append mode: once the log is emptied (LOG_MAX_BYTES), ibsim writes at its start.
        with open(self.log_file, "wb") as fresh, open(self.log_file, "ab") as log:
            fresh.truncate()
            self._proc = subprocess.Popen(
                ["ibsim", "-s", str(self.net_file)],
                stdin=self._fifo_fd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "IBSIM_SOCKNAME": self.sockname},
                cwd=self.workdir,
                start_new_session=True,
            )
        try:
            self._wait_log(1, timeout, "ibsim did not start")
            self.run_opensm(timeout)
        except BaseException:
            self.stop()
            raise

    def _read_log(self) -> str:
        """The log written since the last read (nothing if it was emptied meanwhile)."""
        with open(self.log_file, "rb") as log:
            size = os.fstat(log.fileno()).st_size
            if size < self._log_pos:
                self._log_pos = 0
            log.seek(self._log_pos)
            data = log.read(size - self._log_pos)
        self._log_pos += len(data)
        return data.decode(errors="replace")

    def _wait_log(self, prompts: int, timeout: float, what: str, keep: bool = False) -> str:
        """Read the log on until `prompts` more "sim> " prompts arrived; the text read if
        `keep` (else only the count is kept)."""
        deadline = time.monotonic() + timeout
        marker = "sim> "
        seen, tail, kept = 0, "", []
        while time.monotonic() < deadline:
            chunk = self._read_log()
            if chunk:
                seen += (tail + chunk).count(marker)  # tail is shorter than the marker
                tail = (tail + chunk)[-(len(marker) - 1) :]
                if keep:
                    kept.append(chunk)
            if seen >= prompts:
                return "".join(kept)
            if self._proc is None or self._proc.poll() is not None:
                raise SimError(f"{what}: ibsim exited; see {self.log_file}")
            time.sleep(0.005)
        raise SimError(f"{what} within {timeout} s; see {self.log_file}")

    def _trim_log(self) -> None:
        """Empty the log once it is past LOG_MAX_BYTES and read to its end."""
        if self._log_pos >= LOG_MAX_BYTES and self.log_file.stat().st_size == self._log_pos:
            os.truncate(self.log_file, 0)
            self._log_pos = 0

    def run_opensm(self, timeout: float = 30.0) -> None:
        """Bring the subnet up once (LIDs, Active ports, forwarding tables) with `opensm -o`."""
        env = {
            **os.environ,
            **self.client_env(),
            "OSM_TMP_DIR": str(self.workdir),
            "OSM_CACHE_DIR": str(self.workdir),
        }
        done = subprocess.run(
            ["timeout", "-s", "KILL", str(int(timeout)), "opensm", "-o", "-f", "osm.log"]
            + ["--subnet_prefix", f"{self.subnet_prefix:#018x}"],
            env=env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SimError(f"opensm -o failed ({done.returncode}): {done.stdout[-500:]}")

    def console(self, commands: list[str], timeout: float = 30.0, output: bool = False) -> str:
        """Send console commands and wait until ibsim has handled all of them; its output if
        `output` (else "")."""
        if self._fifo_fd is None:
            raise SimError("simulator is not running")
        self._read_log()  # anything printed before these commands is not their output
        data = "".join(c.rstrip("\n") + "\n" for c in commands).encode()
        # Each handled line is followed by a new "sim> " prompt.
        view = memoryview(data)
        while view:
            n = os.write(self._fifo_fd, view[:4096])
            view = view[n:]
        text = self._wait_log(len(commands), timeout, "console", keep=output)
        self._trim_log()
        return text

    def stale_clients(self) -> list[int]:
        """Simulator client numbers whose process no longer exists (e.g. killed tools)."""
        out = self.console(["Attached"], output=True)
        stale = []
        for num, pid in re.findall(r"Client (\d+): pid (\d+) connected", out):
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                stale.append(int(num))
        return stale

    def free_stale_clients(self) -> int:
        """Disconnect clients whose process died (ibsim allows only 10 clients)."""
        stale = self.stale_clients()
        if stale:
            self.console([f"X {n}" for n in stale])
        return len(stale)

    def stop(self) -> None:
        """Kill ibsim (and anything in its session) and remove the console FIFO."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
        if self._fifo_fd is not None:
            os.close(self._fifo_fd)
            self._fifo_fd = None
        with contextlib.suppress(FileNotFoundError):
            self.fifo.unlink()

    @property
    def running(self) -> bool:
        """Whether ibsim is alive."""
        return self._proc is not None and self._proc.poll() is None

    def write_state(self, path: Path) -> None:
        """Record how clients attach (for `stacklens up` and tools in other processes)."""
        state = {
            "pid": self._proc.pid if self._proc else None,
            "console": str(self.fifo),
            "workdir": str(self.workdir),
            "env": self.client_env(),
            "storage": self.tree.storage,
        }
        path.write_text(json.dumps(state, indent=2))

    def __enter__(self) -> FabricSim:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class TrafficEmulator:
    """Moves the simulator's counters as flows would: every port on each route, exactly."""

    def __init__(self, sim: FabricSim, source: MadSource, topology: Topology | None = None):
        self.sim = sim
        self.source = source
        self.topology = topology or source.discover()

    def port_moves(self, flows: list[Flow]) -> dict[tuple[int, int], list[int]]:
        """Per (GUID, port): [xmit bytes, rcv bytes, xmit packets, rcv packets] to add."""
        moves: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for flow in flows:
            if flow.nbytes <= 0 or flow.src == flow.dst:
                continue
            pkts = math.ceil(flow.nbytes / MTU_BYTES)
            src = self.topology.node(flow.src).guid
            dst = self.topology.node(flow.dst).guid
            for hop in self.topology.route(src, dst):
                tx, rx = moves[hop.tx], moves[hop.rx]
                tx[0] += flow.nbytes
                tx[2] += pkts
                rx[1] += flow.nbytes
                rx[3] += pkts
        return dict(moves)

    def apply(self, flows: list[Flow]) -> dict[tuple[int, int], list[int]]:
        """Add the flows to the counters of every port on their routes; return the moves.

        Byte counts are rounded down to whole 4-octet words per port (the counters' unit);
        the remainder is lost, so emulate flows in multiples of 4 bytes for exact figures.
        """
        moves = self.port_moves(flows)
        if not moves:
            return moves
        ends = sorted(moves)
        targets = [(g, p, self.topology.port_lid((g, p))) for g, p in ends]
        now = self.source.sweep(targets)
        commands = []
        for g, p in ends:
            name = self.topology.nodes[g].description
            add = moves[(g, p)]
            try:
                current = [now.value(g, p, c.name) for c in MOVED]
            except KeyError:  # unreachable (unlinked): a dead port moves no data
                continue
            for i, counter in enumerate(MOVED):
                if add[i]:
                    value = (current[i] + add[i]) // counter.scale
                    commands.append(
                        f"PerformanceSet {port_ref(name, p)} PortCountersExtended."
                        f"{counter.ibsim}={value}"
                    )
        self.sim.console(commands)
        return moves

    def raise_counter(self, node: str, port: int, counter: str, amount: int) -> None:
        """Fault: raise an error counter or PortXmitWait of one port by `amount`."""
        guid = self.topology.node(node).guid
        end = (guid, port)
        now = self.source.sweep([(guid, port, self.topology.port_lid(end))])
        value = now.value(guid, port, counter) + amount
        self.sim.console(
            [f"PerformanceSet {port_ref(node, port)} PortCounters.{ERROR_FIELDS[counter]}={value}"]
        )

    def unlink(self, node: str, port: int) -> None:
        """Fault: pull the cable at node[port]."""
        self.sim.console([f"Unlink {port_ref(node, port)}"])

    def relink(self, node: str, port: int) -> None:
        """Undo `unlink`: the cable is back, and an opensm sweep brings the port from
        Initialize to Active (LIDs, forwarding tables), as a fabric's subnet manager does."""
        self.sim.console([f"ReLink {port_ref(node, port)}"])
        self.sim.run_opensm()


def io_flows(hosts: list[str], storage: list[str], nbytes: int, rng: random.Random) -> list[Flow]:
    """Synthetic I/O: each host writes `nbytes` (a multiple of 4) to one storage node."""
    if not storage:
        return []
    return [Flow(h, rng.choice(storage), nbytes, "io") for h in hosts]


def noise_flows(hcas: list[str], count: int, max_bytes: int, rng: random.Random) -> list[Flow]:
    """Background noise: `count` random host pairs exchanging up to `max_bytes` each."""
    out = []
    for _ in range(count):
        a, b = rng.sample(hcas, 2)
        out.append(Flow(a, b, 4 * rng.randint(1, max(1, max_bytes // 4)), "noise"))
    return out
