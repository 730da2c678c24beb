"""Against the running simulator: discovery, perfquery agreement, exact emulated flows, faults."""

from __future__ import annotations

import re

import numpy as np

from collector.fabric.counters import DeltaTracker
from collector.fabric.mad import MIN_TARGETS_PER_WORKER, MadSource
from collector.fabric.topology import NodeType
from emulator.fattree import FatTree
from emulator.ibsim import ERROR_FIELDS, FabricSim, Flow, TrafficEmulator, port_ref
from stacklens.constants import PORT_COUNTERS
from tests.fabric.conftest import client_tool


def test_discovery_equals_generated_file(mad: MadSource, tree: FatTree):
    topo = mad.discover()
    names = {n.description: n for n in topo.nodes.values()}
    assert len(topo.nodes) == len(tree.switches) + len(tree.hcas) == 41
    assert {n for n, x in names.items() if x.type == NodeType.SWITCH} == set(tree.switches)
    assert {n for n, x in names.items() if x.type == NodeType.CA} == set(tree.hcas)
    assert len(topo.links) == len(tree.links) == 74
    found = {frozenset((topo.describe(lk.a), topo.describe(lk.b))) for lk in topo.links}
    expected = {
        frozenset((f"{a}[{p}]", f"{b}[{q}]"))
        for (a, p), (b, q) in ((lk.a, lk.b) for lk in tree.links)
    }
    assert found == expected
    # 4x QDR everywhere: 4 GB/s of data per direction; every switch has its LFT.
    assert {p.capacity_bytes_per_s for e, p in topo.ports.items() if topo.remote(e)} == {
        4_000_000_000
    }
    assert set(topo.lfts) == {names[s].guid for s in tree.switches}
    assert topo.lft_errors == 0


def test_route_follows_forwarding_tables(mad: MadSource):
    topo = mad.discover()
    hops = topo.route(topo.node("host09").guid, topo.node("host20").guid)
    names = [(topo.describe(h.tx), topo.describe(h.rx)) for h in hops]
    assert names[0] == ("host09[1]", "leaf02[1]")
    assert names[-1] == ("leaf03[4]", "host20[1]")
    assert len(hops) == 4 and names[1][1].startswith("spine")


def test_counters_equal_perfquery(mad: MadSource, sim: FabricSim):
    """Switch ports read at the switch PMA (no MAD crosses these links) agree exactly."""
    topo = mad.discover()
    targets = [
        t
        for t in topo.sweep_targets()
        if topo.nodes[t[0]].description in ("leaf03", "leaf04") and t[1] <= 8
    ]
    # Give them large, distinct 64-bit values first.
    sim.console(
        [
            f"PerformanceSet {port_ref(topo.nodes[g].description, p)} "
            f"PortCountersExtended.PortXmitData={(1 << 33) + 1000 * i + p}"
            for i, (g, p, _) in enumerate(targets)
        ]
    )
    sweep = mad.sweep(targets)
    assert len(sweep) == len(targets) == 16
    fields = {
        "PortXmitData": "xmit_bytes",
        "PortRcvData": "rcv_bytes",
        "PortXmitPkts": "xmit_pkts",
        "PortRcvPkts": "rcv_pkts",
    }
    for g, p, lid in targets:
        out = client_tool(sim, "perfquery", "-x", str(lid), str(p))
        got = dict(re.findall(r"^(\w+):\.+(\d+)$", out, re.M))
        for field, name in fields.items():
            scale = 4 if "Data" in field else 1
            assert sweep.value(g, p, name) == int(got[field]) * scale, (
                topo.describe((g, p)),
                field,
            )
    assert sweep.value(targets[0][0], targets[0][1], "xmit_bytes") == 4 * ((1 << 33) + 1)


def test_emulated_flow_moves_exactly_its_route(mad: MadSource, sim: FabricSim):
    """Management MADs move counters too, identically in every cycle: two cycles differing
    only in the flow's size differ on exactly the route's ports, by exactly the difference."""
    topo = mad.discover()
    targets = topo.sweep_targets()
    emu = TrafficEmulator(sim, mad, topo)
    tracker = DeltaTracker()
    tracker.update(mad.sweep(targets))
    deltas = []
    for nbytes in (4_000, 4_000 + 1_048_576):
        emu.apply([Flow("host09", "host20", nbytes)])
        deltas.append(tracker.update(mad.sweep(targets)))
    assert deltas[1].known.all()
    diff = deltas[1].deltas - deltas[0].deltas
    route = topo.route(topo.node("host09").guid, topo.node("host20").guid)
    expected = np.zeros_like(diff)
    index = {(g, p): i for i, (g, p, _) in enumerate(targets)}
    for hop in route:
        expected[index[hop.tx], PORT_COUNTERS.index("xmit_bytes")] = 1_048_576
        expected[index[hop.rx], PORT_COUNTERS.index("rcv_bytes")] = 1_048_576
        expected[index[hop.tx], PORT_COUNTERS.index("xmit_pkts")] = 512  # MTU 2048
        expected[index[hop.rx], PORT_COUNTERS.index("rcv_pkts")] = 512
    assert np.array_equal(diff, expected)


def test_fault_counters_are_read_back(mad: MadSource, sim: FabricSim):
    topo = mad.discover()
    emu = TrafficEmulator(sim, mad, topo)
    leaf = topo.node("leaf04")
    before = mad.sweep([(leaf.guid, 3, leaf.lid)])
    emu.raise_counter("leaf04", 3, "xmit_wait", 5000)
    emu.raise_counter("leaf04", 3, "symbol_errors", 9)
    after = mad.sweep([(leaf.guid, 3, leaf.lid)])
    assert after.value(leaf.guid, 3, "xmit_wait") == before.value(leaf.guid, 3, "xmit_wait") + 5000
    assert (
        after.value(leaf.guid, 3, "symbol_errors")
        == before.value(leaf.guid, 3, "symbol_errors") + 9
    )


def test_parallel_sweep_equals_serial_sweep(mad: MadSource, sim: FabricSim):
    """A sweep of every switch port split over 3 worker processes reads exactly what one
    worker reads. Queries to switch PMAs never cross a leaf's link to an HCA other than the
    attach host, so those ports keep all their counters between the two sweeps; error
    counters and PortXmitWait (not moved by MADs) must agree on every port."""
    topo = mad.discover()
    switch = NodeType.SWITCH
    targets = [t for t in topo.sweep_targets() if topo.nodes[t[0]].type == switch]
    attach = topo.node(sim.attach).guid
    quiet = [
        (g, p)
        for g, p, _ in targets
        if topo.nodes[topo.remote((g, p))[0]].type != switch and topo.remote((g, p))[0] != attach
    ]
    commands = []
    for i, (g, p, _) in enumerate(targets):
        ref = port_ref(topo.nodes[g].description, p)
        commands += [
            f"PerformanceSet {ref} PortCounters.SymbolErrorCounter={1000 + i}",
            f"PerformanceSet {ref} PortCounters.PortXmitWait={70000 + 13 * i}",
            f"PerformanceSet {ref} PortCountersExtended.PortXmitData={(1 << 36) + 7 * i}",
        ]
    sim.console(commands)
    sweeps, pids = {}, {}
    for k in (1, 3):
        with MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=k) as src:
            sweeps[k] = src.sweep(targets)  # no discovery: its SMPs cross every link
            pids[k] = src.last_sweep_pids
    serial, parallel = sweeps[1], sweeps[3]
    # Three distinct worker processes answered the parallel sweep, one the serial sweep.
    assert len(pids[1]) == 1 and len(set(pids[3])) == 3 and not set(pids[1]) & set(pids[3])
    assert len(serial) == len(parallel) == len(targets) > 3 * MIN_TARGETS_PER_WORKER
    assert np.array_equal(serial.guids, parallel.guids)
    assert np.array_equal(serial.ports, parallel.ports)
    assert np.array_equal(serial.extended, parallel.extended)
    not_moved = [PORT_COUNTERS.index(c) for c in ERROR_FIELDS]
    assert np.array_equal(serial.values[:, not_moved], parallel.values[:, not_moved])
    assert len(quiet) == 33  # 32 hosts + 2 storage nodes, less the attach host
    for g, p in quiet:
        for name in PORT_COUNTERS:
            assert serial.value(g, p, name) == parallel.value(g, p, name), (
                topo.describe((g, p)),
                name,
            )
    i = targets.index(next(t for t in targets if (t[0], t[1]) == quiet[-1]))
    assert parallel.value(*quiet[-1], "symbol_errors") == 1000 + i
    assert parallel.value(*quiet[-1], "xmit_wait") == 70000 + 13 * i
    assert parallel.value(*quiet[-1], "xmit_bytes") == 4 * ((1 << 36) + 7 * i)
