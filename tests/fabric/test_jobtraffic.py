"""Job traffic drives the emulator: a real Open MPI job's stored p2p deltas, read back from
the database, move exactly the simulated ports on each route by exactly the bytes sent;
the bytes Open MPI's monitoring counted beyond them (monitored traffic) move as collective
traffic."""

from __future__ import annotations

import math
import subprocess
import sys
import uuid

import numpy as np

from collector.fabric.counters import DeltaTracker
from collector.fabric.mad import MadSource
from emulator.ibsim import MTU_BYTES, FabricSim, Flow, TrafficEmulator
from emulator.jobtraffic import JobTraffic, storage_node
from stacklens.constants import PORT_COUNTERS
from tests.conftest import mpi_env
from tests.hooks.patterns import p2p_pattern

#: Rank -> STACKLENS_HOST: ranks 2 and 3 share a host (no fabric traffic between them),
#: rank 4 is on a host outside the simulated fabric (its traffic is not emulated).
HOSTS = ["host01", "host12", "host30", "host30", "login01"]


def _run_job(collector, program: str, job: str) -> None:
    """p2p_pattern on len(HOSTS) ranks, rank i with STACKLENS_HOST=HOSTS[i] (MPMD line)."""
    mpirun = ["mpirun"]
    for i, host in enumerate(HOSTS):
        mpirun += ([":"] if i else []) + ["-np", "1", "-x", f"STACKLENS_HOST={host}", program]
    env = mpi_env(
        STACKLENS_COLLECTOR=collector.endpoint,
        STACKLENS_INGEST_TOKEN="secret",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_INTERVAL_MS="100",
        STACKLENS_JOB_ID=job,
    )
    done = subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "run", "--", *mpirun],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_job_flows_are_read_exactly_once_with_word_carry(
    collector, pg_url, hook_library, examples_built, tree
):
    # Two launches with one job id: two runs, each with its own ranks 0-4 on the same hosts.
    job = f"jt-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        _run_job(collector, str(examples_built / "p2p_pattern"), job)
    traffic = JobTraffic(pg_url, tree.hosts, tree.storage)
    try:
        flows = traffic.poll()
        assert traffic.poll() == []  # every frame is applied once
    finally:
        traffic.close()
    sent = {}
    for (r, p), (nbytes, _) in p2p_pattern(len(HOSTS)).items():
        src, dst = HOSTS[r], HOSTS[p]
        if src != dst and src in tree.hosts and dst in tree.hosts:
            sent[(src, dst)] = sent.get((src, dst), 0) + 2 * nbytes
    p2p = {(f.src, f.dst): f.nbytes for f in flows if f.kind == "mpi_p2p"}
    assert p2p == {k: b - b % 4 for k, b in sent.items()}
    # Open MPI measured the wire: what it sent beyond the program's p2p (its own messages,
    # e.g. inside MPI_Finalize) is collective traffic between the same fabric hosts
    assert {f.kind for f in flows} == {"mpi_p2p", "mpi_coll"}
    assert {(f.src, f.dst) for f in flows if f.kind == "mpi_coll"} <= set(sent)
    assert {(s, d): c for (s, d, kind), c in traffic.carry.items() if c and kind == "mpi_p2p"} == {
        k: b % 4 for k, b in sent.items() if b % 4
    }


def test_job_traffic_moves_each_route_exactly(
    collector, pg_url, hook_library, examples_built, sim: FabricSim, mad: MadSource
):
    """Management MADs move counters too, identically in every cycle: a cycle that applies
    the job's flows and one that applies 4 bytes per flow differ, on every port, by exactly
    the job's bytes (and packets) over the routes of its host pairs."""
    _run_job(collector, str(examples_built / "p2p_pattern"), f"jt-{uuid.uuid4().hex[:8]}")
    topo = mad.discover()
    traffic = JobTraffic(pg_url, sim.tree.hosts, sim.tree.storage)
    try:
        flows = [f for f in traffic.poll() if f.kind == "mpi_p2p"]
    finally:
        traffic.close()
    assert len(flows) == 6  # the ordered pairs of host01, host12, host30
    emu = TrafficEmulator(sim, mad, topo)
    targets = topo.sweep_targets()
    tracker = DeltaTracker()
    tracker.update(mad.sweep(targets))
    emu.apply([Flow(f.src, f.dst, 4) for f in flows])
    control = tracker.update(mad.sweep(targets))
    emu.apply(flows)
    measured = tracker.update(mad.sweep(targets))
    assert measured.known.all()

    index = {(g, p): i for i, (g, p, _) in enumerate(targets)}
    expected = np.zeros_like(measured.deltas)
    xmit, rcv = PORT_COUNTERS.index("xmit_bytes"), PORT_COUNTERS.index("rcv_bytes")
    xmit_pkts, rcv_pkts = PORT_COUNTERS.index("xmit_pkts"), PORT_COUNTERS.index("rcv_pkts")
    for f in flows:
        for hop in topo.route(topo.node(f.src).guid, topo.node(f.dst).guid):
            extra_pkts = math.ceil(f.nbytes / MTU_BYTES) - 1
            expected[index[hop.tx], xmit] += f.nbytes - 4
            expected[index[hop.rx], rcv] += f.nbytes - 4
            expected[index[hop.tx], xmit_pkts] += extra_pkts
            expected[index[hop.rx], rcv_pkts] += extra_pkts
    assert np.array_equal(measured.deltas - control.deltas, expected)
    # host01 has one port: it carries rank 0's bytes to the ranks on fabric hosts (2 flows).
    rank0 = sum(1000 * (p + 1) for p in (1, 2, 3))
    assert expected[index[(topo.node("host01").guid, 1)], xmit] == rank0 - 2 * 4


def test_storage_node_is_stable_per_file():
    storage = ["stor01", "stor02"]
    assert storage_node("/scratch/a", storage) == storage_node("/scratch/a", storage)
    assert {storage_node(f"/scratch/f{i}", storage) for i in range(16)} == set(storage)
