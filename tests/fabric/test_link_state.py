"""Fabric state within a sweep, against the simulator: a cable pulled (at either end) is a
link_down event from the sweep after it, a cable back (its switch port probed every sweep
while down) ends that event at the sweep after it, and a cable plugged into a port never
cabled is a link_up at the sweep after it, with no periodic re-discovery in between (the
sampler's is an hour away); two flaps seconds apart are two events and open a flap incident at once;
a flap between two sweeps (only the port's LinkDowned counter moved, as hardware counts
it) is a link_down over that interval.

Every test leaves the shared simulator as it found it (every cable linked and Active,
LinkDowned at 0).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.fabric.topology import PORT_ACTIVE, PORT_DOWN, Link
from emulator.ibsim import FabricSim, TrafficEmulator, port_ref
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens.db import make_engine
from stacklens.settings import Settings
from tests.conftest import query

#: The link these tests pull: host18[1] - leaf03[2].
LEAF, LEAF_PORT, HOST = "leaf03", 2, "host18"
#: A link between two switches that no MAD of a sweep from host01 crosses (opensm's
#: min-hop routes): pulled, every port still answers and no LinkDowned moves (ibsim).
SPINE_LINK = (("spine02", 17), ("leaf05", 13))


@pytest.fixture
def sampler(pg_url: str, mad: MadSource, sim: FabricSim) -> Iterator[FabricSampler]:
    """A sampler whose periodic re-discovery never comes during a test; the pulled cable is
    plugged back and the subnet brought Active again afterwards, whatever happened."""
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        yield sampler
    finally:
        sampler.store.close()
        # "no previous link stored" where it is linked
        sim.console([f"ReLink {port_ref(LEAF, LEAF_PORT)}", f"ReLink {port_ref(HOST, 1)}",
                     f"ReLink {port_ref(*SPINE_LINK[0])}"])  # fmt: skip
        sim.run_opensm()


def _timed(action) -> tuple[int, int]:
    """(ns before, ns after) `action()`."""
    before = time.time_ns()
    action()
    return before, time.time_ns()


def _link_events(pg_url: str) -> list[tuple[int, int | None]]:
    """(start, end) of the pulled link's link_down events, oldest first."""
    return query(
        pg_url,
        "SELECT start_ns, end_ns FROM fabric_events WHERE kind = 'link_down'"
        " AND subject = %s ORDER BY start_ns",
        (f"{HOST}[1] - {LEAF}[{LEAF_PORT}]",),
    )


def _pull(sim: FabricSim, sampler: FabricSampler) -> tuple[int, int]:
    """Pull the cable, then one sampling step: (ns before the pull, ns after the step)."""
    pulled = time.time_ns()
    sim.console([f"Unlink {port_ref(LEAF, LEAF_PORT)}"])
    return pulled, _timed(sampler.step)[1]


def _plug(sim: FabricSim, sampler: FabricSampler) -> tuple[int, int]:
    """Plug the cable back (its ports come up to Initialize: no subnet manager has made them
    Active), then one sampling step: (ns before the plug, ns after the step)."""
    plugged = time.time_ns()
    sim.console([f"ReLink {port_ref(LEAF, LEAF_PORT)}"])
    return plugged, _timed(sampler.step)[1]


def test_a_pulled_and_replugged_cable_is_seen_within_one_sweep_each(
    pg_url: str, sim: FabricSim, sampler: FabricSampler
):
    sampler.step()
    leaf_end = (sampler.topology.node(LEAF).guid, LEAF_PORT)
    host_end = (sampler.topology.node(HOST).guid, 1)
    # the switch ports never cabled are probed too (a cable plugged in is seen at once)
    spare = dict(sampler.down)
    assert spare and all(sampler.topology.remote(e) is None for e in spare)

    pulled, seen_down = _pull(sim, sampler)
    ((start, end),) = _link_events(pg_url)
    assert pulled <= start <= seen_down and end is None
    # the leaf's end is probed from now on (the host's is unreachable: its node is gone)
    assert sampler.down == {**spare, leaf_end: PORT_DOWN}
    assert sampler.topology.remote(leaf_end) is None

    sampler.step()  # still down: probed, nothing re-discovered
    assert sampler.discoveries == 2 and sampler.down == {**spare, leaf_end: PORT_DOWN}

    plugged, seen_up = _plug(sim, sampler)
    ((start_again, end),) = _link_events(pg_url)
    assert start_again == start and end is not None and plugged <= end <= seen_up
    assert sampler.discoveries == 3 and sampler.down == spare
    assert sampler.topology.remote(leaf_end) == host_end
    assert Link.of(leaf_end, host_end) in sampler.topology.links


def test_two_flaps_seconds_apart_are_two_events_and_a_flap_incident(
    pg_url: str, sim: FabricSim, sampler: FabricSampler
):
    engine = make_engine(pg_url)
    incidents = IncidentService(engine, Thresholds.from_settings(Settings()), 0.1)
    opened: dict[int, list[dict]] = {}

    def tick(step: int) -> None:
        opened[step] = [
            m["incident"] for m in incidents.tick()
            if m["event"] == "opened" and m["incident"]["kind"] == "link_flap"
        ]  # fmt: skip

    try:
        sampler.step()
        tick(0)
        bounds = []
        for flap in range(2):
            if flap:
                time.sleep(2.0)  # the second flap comes seconds after the first
            bounds.append(_pull(sim, sampler))
            tick(4 * flap + 1)
            bounds.append(_plug(sim, sampler))
            tick(4 * flap + 2)
            sim.run_opensm()  # the subnet manager makes the link Active again
            sampler.step()
            tick(4 * flap + 3)
        events = _link_events(pg_url)
    finally:
        engine.dispose()
    assert len(events) == 2  # two outages, not one merged
    ends = []
    for (start, end), (down, up) in zip(events, (bounds[0:2], bounds[2:4]), strict=True):
        assert end is not None
        assert down[0] <= start <= down[1] and up[0] <= end <= up[1]
        ends.append(end)
    assert ends[0] < events[1][0] - 2 * 10**9
    # The flap opens at the first tick after the cable is back (a down and an up within the
    # baseline window: INCIDENT_FLAPS = 2), once: the second flap joins it.
    assert {step: len(found) for step, found in opened.items() if found} == {2: 1}
    (incident,) = opened[2]
    assert incident["start_ns"] == events[0][0] and incident["end_ns"] is None
    assert incident["title"] == f"Link flapping on {HOST}[1] – {LEAF}[{LEAF_PORT}]"
    (row,) = query(pg_url, "SELECT end_ns, links FROM incidents WHERE kind = 'link_flap'")
    assert row[0] is None
    assert [e["t_ns"] for e in row[1][0]["evidence"]] == [t for ev in events for t in ev]


def test_a_flap_between_two_sweeps_is_a_link_down_over_that_interval(
    pg_url: str, sim: FabricSim, sampler: FabricSampler
):
    sampler.step()
    sampler.step()
    emu = TrafficEmulator(sim, sampler.source, sampler.topology)
    try:
        bounds = []
        for bounce in range(2):
            if bounce:
                time.sleep(2.0)
            emu.raise_counter(LEAF, LEAF_PORT, "link_downed", 1)  # down and back already
            bounds.append(_timed(sampler.step))
    finally:
        sim.console(
            [f"PerformanceSet {port_ref(LEAF, LEAF_PORT)} PortCounters.LinkDownedCounter=0"]
        )
    sweeps = [
        t for (t,) in query(pg_url, "SELECT DISTINCT ts_ns FROM fabric_port_samples ORDER BY 1")
    ]
    events = _link_events(pg_url)
    assert len(events) == 2 and sampler.discoveries == 3
    for (start, end), (before, after) in zip(events, bounds, strict=True):
        # from the port's sample before the flap (the sweep before) to the re-discovery
        assert end is not None and before <= end <= after
        assert start == max(t for t in sweeps if t < before)
    assert sampler.topology.remote((sampler.topology.node(LEAF).guid, LEAF_PORT)) is not None


def test_a_link_between_switches_pulled_with_every_port_answering_is_seen_within_a_sweep(
    pg_url: str, sim: FabricSim, sampler: FabricSampler
):
    """Nothing goes silent and no counter moves: only the probe of its watched end (its
    PortInfo state, every sweep) sees it go, then come back."""
    (spine, spine_port), (leaf, leaf_port) = SPINE_LINK
    sampler.step()
    topo = sampler.topology
    spare = dict(sampler.down)  # the switch ports never cabled
    spine_end, leaf_end = (topo.node(spine).guid, spine_port), (topo.node(leaf).guid, leaf_port)
    assert topo.remote(spine_end) == leaf_end
    assert sampler.watched[min(spine_end, leaf_end)] == PORT_ACTIVE
    subject = (
        f"{topo.describe(min(spine_end, leaf_end))} - {topo.describe(max(spine_end, leaf_end))}"
    )
    pulled = time.time_ns()
    sim.console([f"Unlink {port_ref(spine, spine_port)}"])
    seen_down = _timed(sampler.step)[1]
    assert sampler.missed == {}  # every port answered that sweep
    ((start, end),) = query(
        pg_url, "SELECT start_ns, end_ns FROM fabric_events WHERE subject = %s", (subject,)
    )
    assert pulled <= start <= seen_down and end is None
    assert sampler.down == {**spare, spine_end: PORT_DOWN, leaf_end: PORT_DOWN}
    plugged = time.time_ns()
    sim.console([f"ReLink {port_ref(spine, spine_port)}"])
    seen_up = _timed(sampler.step)[1]
    ((_, end),) = query(
        pg_url, "SELECT start_ns, end_ns FROM fabric_events WHERE subject = %s", (subject,)
    )
    assert end is not None and plugged <= end <= seen_up
    assert sampler.down == spare and sampler.topology.remote(spine_end) == leaf_end


def test_a_host_link_pulled_and_replugged_at_its_hca_end_is_seen_within_one_sweep_each(
    pg_url: str, sim: FabricSim, sampler: FabricSampler
):
    """The same cable, pulled and plugged back at the host's end (ibsim Unlink/ReLink of
    the HCA's port): its switch end is probed every sweep while it is down."""
    sampler.step()
    leaf_end = (sampler.topology.node(LEAF).guid, LEAF_PORT)
    host_end = (sampler.topology.node(HOST).guid, 1)
    pulled = time.time_ns()
    sim.console([f"Unlink {port_ref(HOST, 1)}"])
    seen_down = _timed(sampler.step)[1]
    ((start, end),) = _link_events(pg_url)
    assert pulled <= start <= seen_down and end is None
    assert sampler.down[leaf_end] == PORT_DOWN
    sampler.step()  # still down: probed, nothing re-discovered
    assert sampler.discoveries == 2
    plugged = time.time_ns()
    sim.console([f"ReLink {port_ref(HOST, 1)}"])
    seen_up = _timed(sampler.step)[1]
    ((start_again, end),) = _link_events(pg_url)
    assert start_again == start and end is not None and plugged <= end <= seen_up
    assert sampler.discoveries == 3 and leaf_end not in sampler.down
    assert sampler.topology.remote(leaf_end) == host_end


def test_a_cable_plugged_into_a_port_down_since_discovery_is_seen_within_one_sweep(
    pg_url: str, sim: FabricSim, mad: MadSource
):
    """A new cable: the host's link is pulled before the sampler first discovers the fabric
    (so no link was ever stored there, and no link_down event is open for it); plugged in,
    it is a link_up at the next sweep (every switch port without a link is probed each
    sweep), not at the next periodic re-discovery (an hour away)."""
    sim.console([f"Unlink {port_ref(LEAF, LEAF_PORT)}"])
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()
        leaf_end = (sampler.topology.node(LEAF).guid, LEAF_PORT)
        assert sampler.topology.remote(leaf_end) is None and HOST not in {
            n.description for n in sampler.topology.nodes.values()
        }
        sampler.step()
        assert sampler.discoveries == 1 and sampler.down[leaf_end] == PORT_DOWN
        plugged = time.time_ns()
        sim.console([f"ReLink {port_ref(LEAF, LEAF_PORT)}"])
        seen_up = _timed(sampler.step)[1]
        events = query(pg_url, "SELECT kind, subject, start_ns, end_ns FROM fabric_events"
                               " WHERE kind LIKE 'link%%'")  # fmt: skip
    finally:
        sampler.store.close()
        sim.console([f"ReLink {port_ref(LEAF, LEAF_PORT)}"])
        sim.run_opensm()
    host_end = (sampler.topology.node(HOST).guid, 1)
    ((kind, subject, start, end),) = events
    assert (kind, subject) == ("link_up", f"{HOST}[1] - {LEAF}[{LEAF_PORT}]")
    assert plugged <= start == end <= seen_up
    assert sampler.discoveries == 2 and sampler.topology.remote(leaf_end) == host_end
