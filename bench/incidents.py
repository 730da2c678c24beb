"""Incident detection over a scripted hour: precision, recall and detection latency of the
detectors against injected faults on mixed normal load, and the cost of a detector pass.

The script runs second by second on a simulated clock, so an hour takes minutes. A fat
tree (default 64 hosts) with up-down forwarding tables is written through the real
FabricStore into an embedded PostgreSQL; every port moves background traffic (5-35 % of
its capacity, PortXmitWait up to 20 k ticks/s) with bursts that stay under the congestion
thresholds (50-70 %, 100-600 k ticks/s, 2 to 7 sweeps), and about every 1.5 minutes
away from the faults (the script's length / 40, at least 45 s) a blip the detectors must
not report: a link over both thresholds (90 %, 1.5 M ticks/s) for 1 to 3 sweeps, or a
job's times 4x for 1 or 2 steps. Six jobs of eight ranks (one rank
per leaf; four on a 32-host tree) send their intervals through the real collector
(trusted ingest), each with its own phase within the second and step-to-step noise:

- `cfd` (alice): a balanced halo exchange (Isend/Irecv/Waitall) and Allreduce, +-3 %;
- `md` (bob): blocking MPI_Sendrecv halos and a small Allreduce, +-18 % step noise;
- `ckpt` (carol): a ring of MPI_Send/MPI_Recv; every 2 minutes a 10-second checkpoint
  burst (64x the bytes, times to match, MPI-IO writes);
- `run1` (dave): steady POSIX reads and writes beside a small Allreduce, +-15 %;
- `wrf-3` (erin): a halo exchange that ends a third of the way in (its last interval
  short, its ranks' final frames);
- `lulesh` (frank): starts after that: three steps reading and broadcasting its input,
  then a halo exchange.

A slowed job keeps its bytes per step (the detector reads time per byte, which a real
job's fewer iterations per second would not change). Faults, each kind injected
`--repeat` times (default 2), evenly apart, each at most 40 s:

- `congestion`: a spine -> leaf hop's PortXmitWait rises 5 M ticks/s (75 % utilisation)
  while `ckpt`, one of whose ranks shares the victim's host, bursts through it: found
  when an incident on the link names `ckpt` the likely aggressor;
- `victim_collectives` / `victim_p2p`: in that congestion `cfd`'s Waitall and Allreduce
  time (the first), `md`'s MPI_Sendrecv time (the second) is 5x: found when the link's
  incident names the job a victim with an MPI slowdown;
- `saturated`: a spine -> leaf port's PortXmitWait, near the top of its 32 bits, rises
  5 M ticks/s until it pegs at 2^32 - 1 after PEG_AFTER_S, stays pegged for the rest of
  the 30 s, then is reset (an administrator's perfquery -R): found from its rate and the
  sweep it pegs in; the sweeps it stays pegged are no evidence (server/incidents/detect.py),
  so its incident ends 3 sweeps after it pegged, not at the reset;
- `link_errors`: 7 symbol errors per sweep on a host link for 3 sweeps;
- `link_flap`: a spine-leaf link down for 3 s, up 6 s, down 3 s, up again (its ends
  unanswered while down; the topology stored with the change, as a re-discovery does);
- `io_stall`: dave's read and write time per byte 6x for 30 s;
- `late_rank`: a rank of erin's or frank's job reaches each Allreduce 700 ms after the
  others (they wait in it) for 40 s: found when the job's own incident names that rank
  first among its ranks.

Detection latency is from the fault's start (a flap's: its INCIDENT_FLAPS-th down/up
event) to the pass that reported it; a pass runs 0.25 s and 0.75 s past each sweep (the
service polls every quarter sweep). Its bound (`bounds`, README "Incidents"): for a
congestion the longer of INCIDENT_SWEEPS sweeps and INCIDENT_MIN_S, plus a sweep; link
errors 2 sweeps; a flap 2 sweeps; a job's slowdown or stall the longer of INCIDENT_SWEEPS
steps and INCIDENT_MIN_S, plus a step (an interval counts in the step its end lies in),
plus the settling (1.5 s), plus a sweep. An incident is true when it is the fault's: of
a kind the fault makes, on its link or naming its job with a signal of its own, started
while the fault lasts (from 2 s before it to 10 s after it); every other is false.
Prints, per fault kind, injected, found, found within the bound, the largest and median
latency and the bound; the false incidents (per hour of script: normal load runs all
the time), precision (true / all incidents reported), recall (found within the bound /
injected), the blips and the incidents the service kept silent, and the passes' median,
p95 and largest time.

    .venv/bin/python -m bench.incidents [--hosts 64 --minutes 60 --repeat 2 --json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.fabric_api import CAPACITY, topology
from bench.jobs_page import send
from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Hop, Link, Topology
from collector.service import BackgroundCollector
from emulator.fattree import FatTree, fat_tree
from server.incidents.detect import Thresholds
from server.incidents.service import SETTLE_NS, IncidentService
from stacklens import wire
from stacklens.constants import PORT_COUNTERS
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.mpi_ops import op_names

S = 10**9
MS = 10**6
MIB = 1 << 20
TOKEN = "bench"
#: Passes per simulated second, as offsets past the sweep's end.
PASSES_NS = (S // 4, 3 * S // 4)
#: How long before a fault starts and after it ends an incident of it may start.
BEFORE_NS, AFTER_NS = 2 * S, 10 * S
FINAL, INTERVAL = wire.FrameType.FINAL, wire.FrameType.INTERVAL
#: The largest value of a 32-bit counter (a saturated PortXmitWait).
PEGGED = 2**32 - 1
#: Seconds a saturated fault's PortXmitWait rises (5 M ticks/s) before it pegs.
PEG_AFTER_S = 8
#: What each fault kind is, as the table prints it.
KIND_TEXT = {
    "congestion": "congestion, PortXmitWait rising (aggressor named)",
    "victim_collectives": "MPI slowdown of a victim, in collectives",
    "victim_p2p": "MPI slowdown of a victim, in blocking p2p",
    "saturated": "congestion, PortXmitWait rising until it pegs",
    "link_errors": "link errors",
    "link_flap": "link down/up flap",
    "io_stall": "I/O stall",
    "late_rank": "late rank (named first)",
}
#: The kinds of a link fault's incidents on its link (a link that is down is erroring too).
ON_LINK = {
    "congestion": ("congestion",),
    "saturated": ("congestion",),
    "link_errors": ("link_errors",),
    "link_flap": ("link_flap", "link_errors"),
}
#: The kind of a job fault's own incident (a congestion's victim: its slowdown's).
OF_JOB = {"congestion": "mpi_slowdown", "io_stall": "io_stall", "late_rank": "mpi_slowdown"}


def bounds(th: Thresholds, period_ns: int = S) -> dict[str, int]:
    """The documented detection latency bound of each fault kind (module doc), ns from the
    fault's start (a flap's: from its INCIDENT_FLAPS-th down/up event)."""
    rate = max(th.sweeps * period_ns, th.min_ns)
    job = rate + period_ns + SETTLE_NS + period_ns
    return {"congestion": rate + period_ns, "saturated": rate + period_ns,
            "victim_collectives": job, "victim_p2p": job, "io_stall": job, "late_rank": job,
            "link_errors": 2 * period_ns, "link_flap": 2 * period_ns}  # fmt: skip


# ---- the script -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One job of the normal load: id, owner, style (halo, sendrecv, checkpoint, io,
    startup: a halo job that first reads and broadcasts its input), its ranks' hosts, when
    it runs (s from the script's start; its last interval ends at `end_s`), its
    step-to-step noise (uniform +-) and where its intervals start within the second."""

    key: str
    user: str
    style: str
    hosts: tuple[str, ...]
    start_s: int
    end_s: int
    noise: float
    phase_ns: int


@dataclass(frozen=True)
class Fault:
    """One injected fault (module doc): its kind, when (s from the script's start) and how
    long; its link (a directed hop: bytes leave `hop.tx`), job (index into the script's
    jobs), late rank and aggressor job."""

    kind: str
    start_s: int
    length_s: int
    hop: Hop | None = None
    job: int | None = None
    rank: int | None = None
    aggressor: int | None = None

    @property
    def end_s(self) -> int:
        """When the fault is over."""
        return self.start_s + self.length_s

    def on(self, t_s: float) -> bool:
        """Whether the fault acts at `t_s` (s from the script's start)."""
        return self.start_s <= t_s < self.end_s

    def flaps(self) -> list[tuple[int, bool]]:
        """A flap's link state changes: (s from the script's start, up)."""
        t = self.start_s
        return [(t, False), (t + 3, True), (t + 9, False), (t + 12, True)]


@dataclass
class Script:
    """A fabric (with its forwarding tables), its jobs, faults and length (s), and the
    seed of its noise."""

    tree: FatTree
    topo: Topology
    jobs: list[Job]
    faults: list[Fault]
    seconds: int
    seed: int = 11
    #: normal load's own blips, never incidents: `spike` (a link over the congestion
    #: thresholds for 1 to 3 sweeps), `blip` (a job's times 4x for 1 or 2 steps)
    blips: list[Fault] = field(default_factory=list)


def up_down(tree: FatTree, topo: Topology) -> dict[int, np.ndarray]:
    """Up-down forwarding tables: a leaf sends a host of its own down its port, any other
    up its (destination LID mod uplinks)-th uplink; a spine down to the host's leaf."""
    guid = {n.description: g for g, n in topo.nodes.items()}
    size = max(n.lid for n in topo.nodes.values()) + 1
    lfts = {guid[s]: np.zeros(size, dtype=np.uint8) for s in tree.switches}
    leaf_of: dict[Any, Any] = {}
    ups: dict[Any, Any] = {}
    downs: dict[Any, Any] = {}
    for link in tree.links:
        (na, pa), (nb, pb) = link.a, link.b
        if nb in tree.hcas:
            leaf_of[nb] = (na, pa)
        elif na in tree.leaves and nb in tree.spines:
            ups.setdefault(na, []).append(pa)
            downs.setdefault((nb, na), pb)
    for hca, (leaf, port) in leaf_of.items():
        lid = topo.nodes[guid[hca]].lid
        for other in tree.leaves:
            lfts[guid[other]][lid] = port if other == leaf else ups[other][lid % len(ups[other])]
        for spine in tree.spines:
            lfts[guid[spine]][lid] = downs[(spine, leaf)]
    return lfts


def _spine_hop(topo: Topology, src: str, dst: str) -> Hop:
    """The spine -> leaf hop of the route from host `src` to host `dst`."""
    hops = topo.route(topo.node(src).guid, topo.node(dst).guid)
    return next(h for h in hops if topo.nodes[h.tx[0]].description.startswith("spine"))


def make_script(hosts: int, seconds: int, repeat: int, seed: int = 11) -> Script:
    """The scripted load and faults over `seconds` (the hour: 3,600; tests: a few minutes):
    the jobs of the module doc and each fault kind `repeat` times, evenly apart after a
    first stretch of normal load (a tenth of the script, 20 to 60 s), each lasting at most
    its spacing less 15 s. Erin's job ends at a third of the script (or 20 s after its
    first late rank), frank's starts a fifteenth later (at least 20 s)."""
    tree = fat_tree(hosts)
    topo = topology(tree)
    topo.lfts = up_down(tree, topo)
    leaves = len(tree.leaves)
    per_leaf = len(tree.hosts) // leaves
    ranks = min(8, leaves)
    placed = [[tree.hosts[r * per_leaf + j % per_leaf] for r in range(ranks)] for j in range(6)]
    kinds = ["congestion_collectives", "link_errors", "late_rank", "congestion_p2p",
             "link_flap", "io_stall", "saturated"]  # fmt: skip
    lead = max(20, min(60, seconds // 10))
    slots = len(kinds) * repeat
    spacing = (seconds - lead - 30) // slots
    at = [lead + n * spacing for n in range(slots)]

    def length(nominal: int) -> int:
        return max(12, min(nominal, spacing - 15))

    late_at = [t for n, t in enumerate(at) if kinds[n % len(kinds)] == "late_rank"]
    ends_at = max(seconds // 3, late_at[0] + length(40) + 20)
    starts_at = ends_at + max(20, seconds // 15)
    spine_links = [lk for lk in tree.links if lk.a[0] in tree.spines or lk.b[0] in tree.spines]
    faults: list[Fault] = []
    congestions = 0
    for n, t in enumerate(at):
        kind, turn = kinds[n % len(kinds)], n // len(kinds)
        if kind.startswith("congestion"):
            victim = 0 if kind == "congestion_collectives" else 1
            a = 1 + (2 * congestions) % (ranks - 1)  # the congested ranks: a - 1 -> a
            congestions += 1
            placed[2][a] = placed[victim][a]  # ckpt's rank a shares the victim's host
            hop = _spine_hop(topo, placed[victim][a - 1], placed[victim][a])
            faults.append(Fault("congestion", t, length(40), hop=hop, job=victim, aggressor=2))
        elif kind == "saturated":
            hop = _spine_hop(topo, placed[3][turn % ranks], placed[3][(turn + 2) % ranks])
            faults.append(Fault("saturated", t, length(30), hop=hop))
        elif kind == "link_errors":
            end = (topo.node(placed[3][(2 + turn) % ranks]).guid, 1)
            switch = topo.remote(end)
            assert switch is not None  # a host's port is cabled
            faults.append(Fault("link_errors", t, 3, hop=Hop(end, switch)))
        elif kind == "link_flap":
            lk = spine_links[(7 + 5 * turn) % len(spine_links)]
            ends = [(topo.node(name).guid, port) for name, port in (lk.a, lk.b)]
            faults.append(Fault("link_flap", t, 12, hop=Hop(ends[0], ends[1])))
        elif kind == "io_stall":
            faults.append(Fault("io_stall", t, length(30), job=3))
        else:
            job = 4 if t + length(40) + 20 <= ends_at else 5
            if job == 5 and t < starts_at + 60:
                raise ValueError(f"no job for the late rank at {t} s")
            faults.append(Fault("late_rank", t, length(40), job=job, rank=(3 + 2 * turn) % ranks))
    phase = [int(p) for p in np.random.default_rng(seed).integers(0, S, size=6)]
    jobs = [
        Job("cfd", "alice", "halo", tuple(placed[0]), 0, seconds, 0.03, phase[0]),
        Job("md", "bob", "sendrecv", tuple(placed[1]), 0, seconds, 0.18, phase[1]),
        Job("ckpt", "carol", "checkpoint", tuple(placed[2]), 0, seconds, 0.05, phase[2]),
        Job("run1", "dave", "io", tuple(placed[3]), 0, seconds, 0.15, phase[3]),
        Job("wrf-3", "erin", "halo", tuple(placed[4]), 0, ends_at, 0.05, phase[4]),
        Job("lulesh", "frank", "startup", tuple(placed[5]), starts_at, seconds, 0.05,
            phase[5]),
    ]  # fmt: skip
    rng = np.random.default_rng(seed + 3)
    blips = []
    every = max(45, seconds // 40)
    for n, t in enumerate(range(lead // 2, seconds - 5, every)):
        if any(f.start_s - 20 <= t <= f.end_s + 20 for f in faults):
            continue
        if n % 2:
            lk = spine_links[int(rng.integers(0, len(spine_links)))]
            ends = [(topo.node(name).guid, port) for name, port in (lk.a, lk.b)]
            blips.append(Fault("spike", t, int(rng.integers(1, 4)), hop=Hop(ends[0], ends[1])))
        else:
            blips.append(Fault("blip", t, int(rng.integers(1, 3)), job=int(rng.integers(0, 4))))
    return Script(tree, topo, jobs, faults, seconds, seed, blips)


# ---- the jobs' frames -----------------------------------------------------------------------


def _op(name: str, calls: int, nbytes: int, time_ns: float) -> dict[str, int]:
    return {"op_id": op_names().index(name), "calls": calls, "bytes": nbytes,
            "time_ns": max(0, int(time_ns))}  # fmt: skip


def _io(path: str, read: int, written: int, read_ns: float, write_ns: float, layer: int = 1
        ) -> dict[str, Any]:  # fmt: skip
    return {"layer": layer, "phase": 0, "opens": 1, "reads": 8 if read else 0,
            "writes": 8 if written else 0, "bytes_read": read, "bytes_written": written,
            "read_time_ns": int(read_ns), "write_time_ns": int(write_ns),
            "path": path.encode(), "mount": b"/scratch", "fstype": b"lustre"}  # fmt: skip


class Load:
    """The jobs' frames interval by interval, with their noise and the faults' effects."""

    def __init__(self, script: Script, token: str):
        self.script, self.token = script, token
        self.rng = np.random.default_rng(script.seed + 1)

    def _acting(self, kind: str, job: int, t_s: float) -> Fault | None:
        for f in self.script.faults:
            if f.kind == kind and f.on(t_s) and (f.job == job or f.aggressor == job):
                return f
        return None

    def tables(self, j: int, k: int, t_s: float, last: bool) -> list[dict[str, np.ndarray]]:
        """Interval k of job j (starting `t_s` s into the script; `last`: its final,
        short one): each rank's tables."""
        job = self.script.jobs[j]
        n = len(job.hosts)
        step = 1 + self.rng.uniform(-job.noise, job.noise)
        if any(b.kind == "blip" and b.job == j and b.on(t_s) for b in self.script.blips):
            step *= 4
        part = 0.4 if last else 1.0
        congested = self._acting("congestion", j, t_s)
        late = self._acting("late_rank", j, t_s)
        stall = self._acting("io_stall", j, t_s)
        out = []
        for r in range(n):
            f = step * (1 + self.rng.uniform(-0.02, 0.02)) * part
            p2p: list[dict[str, int]] = []
            ops: list[dict[str, int]] = []
            io: list[dict[str, Any]] = []
            style = job.style
            if style == "startup":
                style = "setup" if k < 3 else "halo"
            if style == "halo":
                halo = 8 * MIB
                for peer in ((r - 1) % n, (r + 1) % n):
                    p2p.append({"peer": peer, "bytes_sent": int(halo * part), "msgs_sent": 20,
                                "bytes_recv": int(halo * part), "msgs_recv": 20})  # fmt: skip
                wait, reduce = 120 * MS * f, 60 * MS * f
                if congested is not None:
                    wait, reduce = 5 * wait, 5 * reduce
                if late is not None:
                    reduce = 5 * MS if r == late.rank else reduce + 700 * MS
                ops += [_op("MPI_Isend", 40, int(2 * halo * part), 2 * MS * f),
                        _op("MPI_Irecv", 40, int(2 * halo * part), 1 * MS * f),
                        _op("MPI_Waitall", 20, 0, wait),
                        _op("MPI_Allreduce", 20, int(160 * 1024 * part), reduce)]  # fmt: skip
            elif style == "setup":
                ops += [_op("MPI_Bcast", 4, 256 * MIB, 90 * MS * f),
                        _op("MPI_Barrier", 1, 0, 30 * MS * f)]  # fmt: skip
                if r == 0:
                    io.append(_io(f"/scratch/{job.user}/input.dat", 256 * MIB, 0,
                                  300 * MS * f, 0))  # fmt: skip
            elif style == "sendrecv":
                halo = 4 * MIB
                for peer in ((r - 1) % n, (r + 1) % n):
                    p2p.append({"peer": peer, "bytes_sent": halo, "msgs_sent": 20,
                                "bytes_recv": halo, "msgs_recv": 20})  # fmt: skip
                exchange = 150 * MS * f * (5 if congested is not None else 1)
                ops += [_op("MPI_Sendrecv", 40, 2 * halo, exchange),
                        _op("MPI_Allreduce", 10, 80 * 1024, 20 * MS * f)]  # fmt: skip
            elif style == "checkpoint":
                burst = congested is not None or int(t_s) % 120 >= 110
                ring = (64 if burst else 1) * MIB
                p2p.append({"peer": (r + 1) % n, "bytes_sent": ring, "msgs_sent": 4,
                            "bytes_recv": ring, "msgs_recv": 4})  # fmt: skip
                per_mib = 0.25 * MS * f  # bandwidth-bound: time follows the bytes
                ops += [_op("MPI_Send", 4, ring, 2 * MS * f + per_mib * ring / MIB),
                        _op("MPI_Recv", 4, ring, 15 * MS * f + per_mib * ring / MIB),
                        _op("MPI_Allreduce", 10, 80 * 1024, 40 * MS * f)]  # fmt: skip
                if burst:
                    io.append(_io(f"/scratch/{job.user}/ckpt.h5", 0, 512 * MIB, 0,
                                  400 * MS * f, layer=3))  # fmt: skip
            else:  # io
                slow = 6 if stall is not None else 1
                p2p.append({"peer": (r + 1) % n, "bytes_sent": 256 * 1024, "msgs_sent": 2,
                            "bytes_recv": 256 * 1024, "msgs_recv": 2})  # fmt: skip
                ops += [_op("MPI_Send", 2, 256 * 1024, 1 * MS * f),
                        _op("MPI_Recv", 2, 256 * 1024, 5 * MS * f),
                        _op("MPI_Allreduce", 8, 64 * 1024, 40 * MS * f)]  # fmt: skip
                io.append(_io(f"/scratch/{job.user}/data.{r}", 64 * MIB, 16 * MIB,
                              150 * MS * f * slow, 60 * MS * f * slow))  # fmt: skip
            if last:
                ops.append(_op("MPI_Barrier", 1, 0, 30 * MS * f))
            tables = {"op": wire.records("op", ops)}
            if p2p:
                tables["p2p"] = wire.records("p2p", p2p)
            if io:
                tables["io"] = wire.records("io", io)
            if k == 0:
                tables["rank_info"] = wire.records("rank_info", [
                    {"command": f"./{job.key}".encode(), "user": job.user.encode()}])  # fmt: skip
            out.append(tables)
        return out

    def frames(self, t0_ns: int, now_s: int) -> list[bytes]:
        """Every job's intervals that ended in (now_s - 1, now_s] (s from the start)."""
        out = []
        for j, job in enumerate(self.script.jobs):
            begin = t0_ns + job.start_s * S + job.phase_ns
            stop = t0_ns + job.end_s * S
            k = (t0_ns + (now_s - 1) * S - begin) // S  # its interval ending in that second
            if k < 0:
                continue
            start = begin + k * S
            end = min(start + S, stop)
            if end <= start or end > t0_ns + now_s * S:
                continue
            last = end == stop
            t_s = (start - t0_ns) / S
            for rank, tables in enumerate(self.tables(j, k, t_s, last)):
                out.append(wire.encode_frame(
                    job_id=job.key, world_rank=rank, world_size=len(job.hosts), seq=k,
                    host=job.hosts[rank], pid=1000 * j + rank, interval_start_ns=start,
                    interval_end_ns=end, token=self.token, tables=tables,
                    frame_type=FINAL if last else INTERVAL))  # fmt: skip
        return out


# ---- the fabric -----------------------------------------------------------------------------


class Fabric:
    """The fabric's counters sweep by sweep: background traffic and its bursts, and the
    link faults."""

    DATA = [PORT_COUNTERS.index(c) for c in ("xmit_bytes", "rcv_bytes")]
    WAIT = PORT_COUNTERS.index("xmit_wait")
    SYMBOL = PORT_COUNTERS.index("symbol_errors")

    def __init__(self, script: Script, store: FabricStore, t0_ns: int):
        self.script, self.store, self.t0 = script, store, t0_ns
        self.topo = script.topo
        self.ends = sorted(self.topo.ports)
        self.row = {end: i for i, end in enumerate(self.ends)}
        self.words = np.zeros((len(self.ends), len(PORT_COUNTERS)), dtype=np.uint64)
        self.tracker = DeltaTracker()
        self.rng = np.random.default_rng(script.seed + 2)
        self.bursts: dict[int, int] = {}  # port row -> sweeps left
        self.down: set[Link] = set()
        store.write_topology(self.topo, t0_ns, [])

    def link_of(self, end: tuple[int, int]) -> int:
        """The stored id of the link at an end."""
        return self.store.link_of_port[self.store.port_ids[end]]

    def sweep(self, i: int) -> None:
        """Sweep i (ending i + 1 s into the script): topology changes of flaps first."""
        t_end = self.t0 + (i + 1) * S
        n = len(self.ends)
        for f in self.script.faults:
            if f.kind == "link_flap" and f.hop is not None:
                for at, up in f.flaps():
                    if at == i + 1:
                        self._flap(Link.of(f.hop.tx, f.hop.rx), up, t_end)
        util = self.rng.uniform(0.05, 0.35, size=n)
        wait = self.rng.uniform(0, 20_000, size=n)
        for row in [int(r) for r in self.rng.integers(0, n, size=self.rng.poisson(0.05))]:
            self.bursts[row] = int(self.rng.integers(2, 8))
        for row in list(self.bursts):
            util[row] = self.rng.uniform(0.5, 0.7)
            wait[row] = self.rng.uniform(100_000, 600_000)
            self.bursts[row] -= 1
            if not self.bursts[row]:
                del self.bursts[row]
        for f in self.script.faults + self.script.blips:
            if f.hop is None or not f.on(i):
                continue
            row = self.row[f.hop.tx]
            if f.kind == "spike":
                util[row], wait[row] = 0.9, 1_500_000
            elif f.kind == "congestion":
                util[row], wait[row] = 0.75, 5_000_000
            elif f.kind == "link_errors":
                self.words[row, self.SYMBOL] += np.uint64(7)
        self.words[:, self.DATA] += (util * CAPACITY / 4).astype(np.uint64)[:, None]
        pegged = set()  # rows whose PortXmitWait a saturated fault sets
        for f in self.script.faults:
            if f.kind == "saturated" and f.hop is not None:
                row = self.row[f.hop.tx]
                if f.on(i):
                    rise = (PEG_AFTER_S - 1 - (i - f.start_s)) * 5_000_000
                    self.words[row, self.WAIT] = PEGGED - max(rise, 0)
                    pegged.add(row)
                elif i == f.end_s:  # reset by an administrator
                    self.words[row, self.WAIT] = 0
        moving = np.array([r not in pegged for r in range(n)])
        self.words[moving, self.WAIT] += wait[moving].astype(np.uint64)
        answered = np.array([not any(e in (lk.a, lk.b) for lk in self.down) for e in self.ends])
        raw = RawSweep.from_words([g for g, _ in self.ends], [p for _, p in self.ends],
                                  self.words.copy(), np.ones(n, dtype=bool), answered,
                                  t_end - S // 10, t_end)  # fmt: skip
        self.store.write_samples(self.tracker.update(raw))

    def _flap(self, link: Link, up: bool, ts_ns: int) -> None:
        before = self._topology()
        (self.down.discard if up else self.down.add)(link)
        after = self._topology()
        self.store.write_topology(after, ts_ns, before.diff(after))

    def _topology(self) -> Topology:
        t = self.topo
        return Topology(t.nodes, t.ports, [lk for lk in t.links if lk not in self.down], t.lfts)


# ---- running and scoring --------------------------------------------------------------------


@dataclass
class Seen:
    """An incident as the webhook's messages told it: its kind, links, start and end, when
    it was first reported, and per job (id, owner) its role, signals, ranks (as last
    sent: the late ranks first), when it was first named with a signal of its own and
    when first named in each role."""

    id: int
    kind: str
    reported_ns: int
    start_ns: int
    end_ns: int | None = None
    links: set[int] = field(default_factory=set)
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    named_ns: dict[tuple[str, str], int] = field(default_factory=dict)
    roles_ns: dict[tuple[tuple[str, str], str], int] = field(default_factory=dict)
    merged_into: int | None = None


@dataclass
class Outcome:
    """A script's run: the simulated start, the incidents seen, the pass times (s), the
    links' stored ids, how many incidents stayed silent."""

    t0_ns: int
    incidents: dict[int, Seen]
    passes: list[float]
    link_ids: dict[Link, int]
    silenced: int = 0  # incidents that ended too small to report (the service's count)


def run(script: Script, database_url: str, collector: tuple[str, int], th: Thresholds,
        t0_ns: int, token: str = TOKEN,
        progress: Callable[[int], None] | None = None) -> Outcome:  # fmt: skip
    """Run the script against a migrated database and a collector accepting `token`:
    every simulated second its sweep, the jobs' intervals that ended in it, and the
    detector's passes (PASSES_NS)."""
    engine = make_engine(database_url)
    store = FabricStore(database_url)
    now = [t0_ns]
    service = IncidentService(engine, th, sweep_interval_s=1.0, clock=lambda: now[0])
    fabric = Fabric(script, store, t0_ns)
    load = Load(script, token)
    seen: dict[int, Seen] = {}
    passes: list[float] = []
    try:
        for i in range(script.seconds):
            fabric.sweep(i)
            batch = load.frames(t0_ns, i + 1)
            if batch:
                send(collector, batch)
            for offset in PASSES_NS:
                now[0] = t0_ns + (i + 1) * S + offset
                started = time.perf_counter()
                messages = service.tick()
                passes.append(time.perf_counter() - started)
                for m in messages:
                    _note(seen, m, now[0])
            if progress is not None:
                progress(i)
        link_ids = {lk: fabric.link_of(lk.a) for lk in script.topo.links}
    finally:
        store.close()
        engine.dispose()
    return Outcome(t0_ns, seen, passes, link_ids, service.stats.silenced)


def _note(seen: dict[int, Seen], m: dict[str, Any], now_ns: int) -> None:
    """Take in one webhook message."""
    if m["event"] == "merged":
        seen[m["incident"]["id"]].merged_into = m["into"]["id"]
        return
    inc = m["incident"]
    s = seen.get(inc["id"])
    if s is None:
        s = seen[inc["id"]] = Seen(inc["id"], inc["kind"], now_ns, inc["start_ns"])
    s.kind, s.start_ns, s.end_ns = inc["kind"], inc["start_ns"], inc["end_ns"]
    s.links = {lk["id"] for lk in inc["links"]}
    for j in inc["jobs"]:
        who = (j["job"], j["user"])
        s.jobs[who] = j
        s.roles_ns.setdefault((who, j["role"]), now_ns)
        if j["signals"]:
            s.named_ns.setdefault(who, now_ns)


def _who(script: Script, j: int) -> tuple[str, str]:
    """A job of the script as the messages name it: (id, owner)."""
    return script.jobs[j].key, script.jobs[j].user


def _during(s: Seen, f: Fault, t0_ns: int) -> bool:
    """Whether the incident `s` started while the fault lasted (from BEFORE_NS before it,
    a job's step may begin before the interval it holds, to AFTER_NS after it)."""
    begin, end = t0_ns + f.start_s * S - BEFORE_NS, t0_ns + f.end_s * S + AFTER_NS
    return begin <= s.start_ns <= end


def _of_fault(script: Script, out: Outcome, f: Fault, s: Seen) -> bool:
    """Whether the incident `s` is the fault's: of a kind it makes, on its link or with its
    job named with a signal of its own, while it lasts (to AFTER_NS past its end)."""
    if not _during(s, f, out.t0_ns):
        return False
    link = None if f.hop is None else out.link_ids[Link.of(f.hop.tx, f.hop.rx)]
    if link in s.links and s.kind in ON_LINK[f.kind]:
        return True
    if f.job is None or f.kind not in OF_JOB:
        return False
    return OF_JOB[f.kind] in _member(s, _who(script, f.job)).get("signals", [])


def _member(s: Seen, who: tuple[str, str] | None) -> dict[str, Any]:
    """A job of an incident as the messages told it (empty: not in it)."""
    return {} if who is None else s.jobs.get(who, {})


def _found_ns(script: Script, out: Outcome, f: Fault, row: str, mine: list[Seen]) -> int | None:
    """When the fault's incidents `mine` (merged ones too) first said what row `row` needs:
    a congestion, with the aggressor named; a victim, named with its slowdown (found if
    the link's incident names it its victim); a late rank's job, with that rank first
    among its ranks; a saturated counter's congestion, errors, a flap (link_flap itself),
    a stall: its incident."""
    times = []
    who = None if f.job is None else _who(script, f.job)
    if row.startswith("victim") and not any(
        s.kind == "congestion" and _member(s, who).get("role") == "victim" for s in mine
    ):
        return None
    for s in mine:
        if row == "congestion" and s.kind == "congestion" and f.aggressor is not None:
            times.append(s.roles_ns.get((_who(script, f.aggressor), "aggressor")))
        elif who is not None and row != "congestion":
            named = OF_JOB[f.kind] in _member(s, who).get("signals", [])
            first = (_member(s, who).get("ranks") or [None])[0]
            if named and (row != "late_rank" or first == f.rank):
                times.append(s.named_ns[who])
        elif s.kind == {"saturated": "congestion"}.get(row, row):
            times.append(s.reported_ns)
    return min((t for t in times if t is not None), default=None)


def score(script: Script, out: Outcome, th: Thresholds) -> dict[str, Any]:
    """Per fault kind: injected, found, found within its bound, latencies; the false
    incidents; precision and recall (module doc)."""
    limit = bounds(th)
    listed = [s for s in out.incidents.values() if s.merged_into is None]
    true: set[int] = set()
    rows: dict[str, dict[str, Any]] = {}
    for f in script.faults:
        mine = [s for s in out.incidents.values() if _of_fault(script, out, f, s)]
        true |= {s.id for s in mine}
        kinds = [f.kind]
        if f.kind == "congestion":
            kinds.append("victim_collectives" if f.job == 0 else "victim_p2p")
        for kind in kinds:
            row = rows.setdefault(kind, {"injected": 0, "found": 0, "in_bound": 0,
                                         "latency_s": [], "bound_s": limit[kind] / S,
                                         "missed_at_s": []})  # fmt: skip
            row["injected"] += 1
            start = f.start_s
            if kind == "link_flap":
                start = f.flaps()[th.flaps - 1][0]
            found = _found_ns(script, out, f, kind, mine)
            if found is None:
                row["missed_at_s"].append(f.start_s)
                continue
            latency = (found - out.t0_ns) / S - start
            row["found"] += 1
            row["latency_s"].append(round(latency, 2))
            row["in_bound"] += latency * S <= limit[kind]
    for row in rows.values():
        lat = row["latency_s"]
        row["max_latency_s"] = max(lat) if lat else None
        row["median_latency_s"] = round(statistics.median(lat), 2) if lat else None
    false = [s for s in listed if s.id not in true]
    injected = sum(r["injected"] for r in rows.values())
    return {
        "rows": {k: rows[k] for k in KIND_TEXT if k in rows},
        "incidents": len(listed),
        "false": [
            {
                "id": s.id,
                "kind": s.kind,
                "start_s": (s.start_ns - out.t0_ns) / S,
                "links": sorted(s.links),
                "jobs": sorted(s.jobs),
            }
            for s in false
        ],  # fmt: skip
        "false_per_hour": round(len(false) / (script.seconds / 3600), 2),
        "blips": {k: sum(b.kind == k for b in script.blips) for k in ("blip", "spike")},
        "silenced": out.silenced,
        "precision": round(1 - len(false) / len(listed), 3) if listed else None,
        "recall": round(sum(r["in_bound"] for r in rows.values()) / injected, 3),
        "recall_any_latency": round(sum(r["found"] for r in rows.values()) / injected, 3),
    }


# ---- the benchmark --------------------------------------------------------------------------


def _figures(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return {"passes": len(times), "median_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * p95, 1), "max_ms": round(1000 * ordered[-1], 1)}  # fmt: skip


def table(result: dict[str, Any]) -> Iterator[str]:
    """The figures as lines of text."""
    yield (f"{'fault kind':52} {'injected':>8} {'found':>5} {'in bound':>8} "
           f"{'latency max/median s':>20} {'bound s':>7}")  # fmt: skip
    for kind, row in result["rows"].items():
        lat = "-" if row["max_latency_s"] is None else (
            f"{row['max_latency_s']:.2f} / {row['median_latency_s']:.2f}")  # fmt: skip
        yield (f"{KIND_TEXT[kind]:52} {row['injected']:>8} {row['found']:>5} "
               f"{row['in_bound']:>8} {lat:>20} {row['bound_s']:>7.2f}")  # fmt: skip
    yield (f"incidents {result['incidents']}, false {len(result['false'])} "
           f"({result['false_per_hour']} per hour of normal load), precision "
           f"{result['precision']}, recall {result['recall']} (any latency: "
           f"{result['recall_any_latency']})")  # fmt: skip
    yield (
        f"normal load's blips: {result['blips']['blip']} of a job, "
        f"{result['blips']['spike']} of a link; silent incidents: {result['silenced']}"
    )


def main() -> None:
    """Run the scripted hour and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()
    script = make_script(args.hosts, int(args.minutes * 60), args.repeat, args.seed)
    th = Thresholds()
    t0 = (time.time_ns() - 2 * 3600 * S) // S * S
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stacklens-bench-", dir="/tmp") as scratch:
        database = start_embedded(Path(scratch) / "pg")
        try:
            migrate(database.url)
            with BackgroundCollector(database.url, token=TOKEN) as collector:

                def progress(i: int) -> None:
                    if i % 600 == 599:
                        print(f"  {(i + 1) // 60} simulated minutes in "
                              f"{time.monotonic() - began:.0f} s", flush=True)  # fmt: skip

                out = run(script, database.url, collector.address, th, t0, progress=progress)
        finally:
            database.stop()
    result = score(script, out, th)
    result["passes"] = _figures(out.passes)
    result["machine"] = platform.processor() or platform.machine()
    result["hosts"], result["links"] = len(script.tree.hosts), len(script.topo.links)
    result["simulated_s"], result["wall_s"] = script.seconds, round(time.monotonic() - began)
    for line in table(result):
        print(line)
    print(
        f"passes: {result['passes']}; {result['simulated_s']} simulated s in "
        f"{result['wall_s']} s; {result['hosts']} hosts, {result['links']} links"
    )
    if result["false"]:
        print("false incidents:", json.dumps(result["false"]))
    if args.json:
        print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
