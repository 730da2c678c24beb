"""A staged incident on a small known fabric, written through the real fabric store and the
real collector, for the incident tests:

    spine (lid 1)            L1[9] - spine[1] is congested (PortXmitWait 5 M ticks/s at
     [1]      [2]            L1[9]) in sweeps CONGESTED; L2[9] - spine[2] stays quiet
    L1[9]     L2[9]
    [1] a1    [1] a2         alice's job: ranks on hosta1, hosta2; in the steps SLOW its
    [2] b1    [2] b2         rank 0 arrives late at the blocking call they meet in
                             (MPI_Allreduce, or MPI_Sendrecv: `wait`): rank 1 waits there
                             900 ms instead of 100, 5x her time per byte (the victim)
    [3] c1                   bob's job: hostb1, hostb2, 50 MB/s point-to-point + checkpoint
    [4] c2                   writes (the aggressor); carol's job: hostc1, hostc2, one leaf

Forwarding tables route every host pair over its leaves and the spine (up-down).
"""

from __future__ import annotations

import numpy as np

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from stacklens import wire
from stacklens.constants import PORT_COUNTERS
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import exchange

S = 10**9
T0 = 1_700_000_000 * S
CAP = 4_000_000_000
SPINE, L1, L2 = 0x0F00_0000_0000_0001, 0x0F00_0000_0000_0002, 0x0F00_0000_0000_0003
HOSTS = {  # name -> (guid, leaf, leaf port, lid)
    "hosta1": (0x0200_0000_0000_0011, L1, 1, 11),
    "hostb1": (0x0200_0000_0000_0012, L1, 2, 12),
    "hostc1": (0x0200_0000_0000_0013, L1, 3, 13),
    "hostc2": (0x0200_0000_0000_0014, L1, 4, 14),
    "hosta2": (0x0200_0000_0000_0015, L2, 1, 15),
    "hostb2": (0x0200_0000_0000_0016, L2, 2, 16),
}
#: Sweep i covers [T0 + i s, T0 + (i+1) s); congested: these sweeps; alice slow: these steps.
CONGESTED = range(10, 16)
SLOW = range(10, 16)
WAIT_PER_S = 5_000_000
JOBS = {  # job id -> (user, hosts of ranks 0 and 1, p2p bytes per s, checkpoint bytes per s)
    "alice-inc": ("alice", ("hosta1", "hosta2"), 1 << 20, 0),
    "bob-inc": ("bob", ("hostb1", "hostb2"), 50 << 20, 8 << 20),
    "carol-inc": ("carol", ("hostc1", "hostc2"), 80 << 20, 0),
}


def topology() -> Topology:
    """The fabric with its forwarding tables."""
    nodes = {SPINE: Node(SPINE, NodeType.SWITCH, "spine", 36, 1),
             L1: Node(L1, NodeType.SWITCH, "leaf1", 36, 2),
             L2: Node(L2, NodeType.SWITCH, "leaf2", 36, 3)}  # fmt: skip
    links = [Link.of((L1, 9), (SPINE, 1)), Link.of((L2, 9), (SPINE, 2))]
    lfts = {g: np.zeros(17, dtype=np.uint8) for g in (SPINE, L1, L2)}
    lfts[SPINE][2], lfts[SPINE][3] = 1, 2
    lfts[L1][1] = lfts[L1][3] = 9
    lfts[L2][1] = lfts[L2][2] = 9
    for name, (guid, leaf, port, lid) in HOSTS.items():
        nodes[guid] = Node(guid, NodeType.CA, name, 1, lid)
        links.append(Link.of((guid, 1), (leaf, port)))
        lfts[SPINE][lid] = 1 if leaf == L1 else 2
        lfts[L1][lid] = port if leaf == L1 else 9
        lfts[L2][lid] = port if leaf == L2 else 9
    ports = {}
    for link in links:
        for g, p in (link.a, link.b):
            ports[(g, p)] = Port(g, p, g, nodes[g].lid, 4, 5, 2, 4, 0, CAP)
    return Topology(nodes=nodes, ports=ports, links=links, lfts=lfts)


class StagedFabric:
    """Writes the topology, then one sweep per `sweep(i)` call (cumulative counters)."""

    def __init__(self, url: str):
        self.store = FabricStore(url)
        self.topo = topology()
        self.store.write_topology(self.topo, T0, [])
        self.tracker = DeltaTracker()
        self.ends = sorted(self.topo.ports)
        self.values = np.zeros((len(self.ends), len(PORT_COUNTERS)), dtype=np.uint64)

    def sweep(self, i: int) -> None:
        """Sweep i, ending at T0 + (i+1) s: every port moves 1 MB; L1[9] waits if congested."""
        self.values[:, PORT_COUNTERS.index("xmit_bytes")] += (1 << 20) // 4
        if i in CONGESTED:
            self.values[self.ends.index((L1, 9)), PORT_COUNTERS.index("xmit_wait")] += WAIT_PER_S
        t_end = T0 + (i + 1) * S
        raw = RawSweep.from_words([g for g, _ in self.ends], [p for _, p in self.ends],
                                  self.values.copy(), np.ones(len(self.ends), dtype=bool),
                                  np.ones(len(self.ends), dtype=bool), t_end - S // 10,
                                  t_end)  # fmt: skip
        self.store.write_samples(self.tracker.update(raw))

    def close(self) -> None:
        """Close the store's connection."""
        self.store.close()


def frames(i: int, jobs: tuple[str, ...] = tuple(JOBS), final: bool = False,
           wait: str = "MPI_Allreduce", p2p_of: dict[str, int] | None = None
           ) -> list[bytes]:  # fmt: skip
    """These jobs' frames of interval i ([T0 + i s, T0 + (i+1) s)); `final`: their ranks'
    last frames (the jobs end with it); `wait`: the blocking call the jobs' ranks meet in
    ten times a second (1 MiB; 100 ms inside; alice's rank 1 900 ms in the steps SLOW)
    beside their eight posted sends (MPI_Isend: 1 ms, no waiting); `p2p_of`: bytes a job
    sends in the interval instead of JOBS' (job -> bytes)."""
    op = op_names().index
    out = []
    for job in jobs:
        user, hosts, p2p, ckpt = JOBS[job]
        p2p = (p2p_of or {}).get(job, p2p)
        for rank, host in enumerate(hosts):
            late = job == "alice-inc" and i in SLOW and rank == 1  # it waits for rank 0
            tables = {
                "p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": p2p, "msgs_sent": 8,
                                             "bytes_recv": p2p, "msgs_recv": 8}]),
                "op": wire.records("op", [
                    {"op_id": op("MPI_Isend"), "calls": 8, "bytes": p2p, "time_ns": 10**6},
                    {"op_id": op(wait), "calls": 10, "bytes": 1 << 20,
                     "time_ns": (900 if late else 100) * 10**6},
                ]),
            }  # fmt: skip
            if ckpt:
                tables["io"] = wire.records("io", [{
                    "layer": 3, "phase": 0, "opens": 1, "writes": 4, "bytes_written": ckpt,
                    "write_time_ns": 20 * 10**6, "path": f"/scratch/{user}/ckpt.h5".encode(),
                    "mount": b"/scratch", "fstype": b"lustre"}])  # fmt: skip
            if i == 0:
                tables["rank_info"] = wire.records(
                    "rank_info", [{"command": f"./{user}_app".encode(), "user": user.encode()}]
                )
            out.append(wire.encode_frame(
                job_id=job, world_rank=rank, world_size=2, seq=i, host=host, pid=100 + rank,
                interval_start_ns=T0 + i * S, interval_end_ns=T0 + (i + 1) * S,
                token="secret", tables=tables,
                frame_type=wire.FrameType.FINAL if final else wire.FrameType.INTERVAL))  # fmt: skip
    return out


def send(collector, i: int, jobs: tuple[str, ...] = tuple(JOBS), final: bool = False,
         wait: str = "MPI_Allreduce", p2p_of: dict[str, int] | None = None) -> None:  # fmt: skip
    """Send interval i of these jobs (every job) through the collector, committed (frames)."""
    payload = frames(i, jobs, final, wait, p2p_of)
    acks = exchange(collector.address, b"".join(payload), acks=len(payload))
    assert [status for status, _ in acks] == [0] * len(payload)
