"""The sampler against the simulator when the fabric misbehaves: no rate spike across a
re-discovery, silent ports become unknown after a bounded number of sweeps, a saturated
error counter reads "saturated" (never 0 errors), a relinked port comes back Active without
making the sampler re-discover on every sweep, a saturated PortXmitWait reads unknown and
is congestion in the sweep it pegs in only (none when pegged before the first sweep), and
warnings are rate-limited.

Every test leaves the shared simulator as it found it (counters moved, no error rates set,
every cable linked and Active).
"""

from __future__ import annotations

import dataclasses
import logging
import time

import pytest

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler, RateLimitedLog
from collector.fabric.topology import PORT_ACTIVE
from emulator.ibsim import FabricSim, Flow, TrafficEmulator, port_ref
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens.db import make_engine
from stacklens.settings import Settings
from tests.conftest import query

#: A 32-bit counter at its maximum (a pegged PortXmitWait).
PEGGED = 2**32 - 1
#: The sample floor of these tests, and the flow moved in each of their sweeps.
FLOOR_S = 0.3
FLOW_BYTES = 16 * 1024 * 1024


def _sampler(pg_url: str, mad: MadSource, floor_s: float = FLOOR_S) -> FabricSampler:
    return FabricSampler(
        pg_url, mad, interval_s=0.1, rediscover_s=3600, min_sample_s=floor_s, missed_sweeps=3
    )


def _rediscovery_sequence(sampler: FabricSampler, emu: TrafficEmulator) -> None:
    """What a slow periodic re-discovery does to the sampling loop: a step that discovers
    first sweeps late, and the loop, behind its schedule, sweeps again at once (a few ms
    later); then regular sweeps. A flow moves before each of the two sweeps after the
    re-discovery."""
    sampler.step()
    time.sleep(FLOOR_S + 0.05)
    emu.apply([Flow("host09", "host20", FLOW_BYTES)])
    sampler.discover()
    sampler.step()
    emu.apply([Flow("host09", "host20", FLOW_BYTES)])
    sampler.step()  # right after the previous sweep
    time.sleep(FLOOR_S + 0.05)
    sampler.step()


def test_no_sample_shorter_than_the_floor(pg_url: str, mad: MadSource, sim: FabricSim):
    sampler = _sampler(pg_url, mad)
    try:
        sampler.step()
        emu = TrafficEmulator(sim, mad, sampler.topology)
        _rediscovery_sequence(sampler, emu)
    finally:
        sampler.store.close()
    n = len(sampler.topology.sweep_targets())
    # Five sweeps, but the two right after another (the test's first, and the one right
    # after the re-discovery's) were withheld for every port: their bytes count in the next
    # sample, taken over the whole interval.
    shortest, sweeps = query(
        pg_url, "SELECT min(dt_ns), count(DISTINCT ts_ns) FROM fabric_port_samples"
    )[0]
    assert sweeps == 3 and shortest >= FLOOR_S * 1e9
    assert query(pg_url, "SELECT count(*) FROM fabric_port_samples")[0][0] == 3 * n
    # The flow's first hop carried one flow in each sample, at a plausible rate.
    host09 = sampler.topology.node("host09").guid
    rows = query(
        pg_url,
        "SELECT s.d_xmit_bytes, s.dt_ns FROM fabric_port_samples s JOIN fabric_ports p"
        " ON p.id = s.port_id WHERE p.port = 1 AND p.guid = %s AND s.dt_ns IS NOT NULL"
        " ORDER BY s.ts_ns",
        (host09 - (1 << 64) if host09 >= 1 << 63 else host09,),
    )
    assert [b // FLOW_BYTES for b, _ in rows] == [1, 1]
    assert all(b / dt * 1e9 < FLOW_BYTES / FLOOR_S for b, dt in rows)


def test_without_a_floor_the_short_sample_is_a_spike(pg_url: str, mad: MadSource, sim: FabricSim):
    """The same sequence with no floor stores a sample of a few ms (what the floor prevents)."""
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    try:
        sampler.step()
        _rediscovery_sequence(sampler, TrafficEmulator(sim, mad, sampler.topology))
    finally:
        sampler.store.close()
    shortest = query(pg_url, "SELECT min(dt_ns) FROM fabric_port_samples")[0][0]
    assert shortest < 0.2e9


def _link(api_client, name: str, port: int) -> dict:
    url = api_client.app.url_path_for("fabric_links")
    for x in api_client.get(url).json()["links"]:
        if (x["a"]["name"], x["a"]["port"]) == (name, port) or (
            x["b"]["name"],
            x["b"]["port"],
        ) == (name, port):
            return x
    raise AssertionError(f"no link at {name}[{port}]")


def test_silent_port_becomes_unknown(pg_url: str, mad: MadSource, sim: FabricSim, api_client):
    """host17's PMA stops answering PortCounters (its SMA still answers: it stays in the
    topology, its link up). Its end keeps its old load for 2 sweeps, then reads unknown."""
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    try:
        sampler.step()
        sampler.step()
        assert _link(api_client, "host17", 1)["a_to_b_bytes_per_s"] is not None
        sim.console([f"Error {port_ref('host17', 1)} 100 0x12"])
        try:
            known = []
            for _ in range(3):
                sampler.step()
                link = _link(api_client, "host17", 1)
                known.append(link["a_to_b_bytes_per_s"] is not None)
            assert link["state"] == "up"
        finally:
            sim.console([f"Error {port_ref('host17', 1)} 0"])
        assert known == [True, True, False]
        assert link["utilisation"] is not None  # the leaf's end still answers
        assert "a_to_b_bytes_per_s" in link["unknown"] and link["errors"]["symbol_errors"] is None
        assert sampler.missed == {(sampler.topology.node("host17").guid, 1): 3}
        sampler.step()  # answering again: known again from the next delta on
        sampler.step()
        assert _link(api_client, "host17", 1)["a_to_b_bytes_per_s"] is not None
        assert sampler.missed == {}
    finally:
        sampler.store.close()


def test_saturated_error_counter_is_not_zero(
    pg_url: str, mad: MadSource, sim: FabricSim, api_client
):
    ref = port_ref("leaf05", 2)
    sim.console([f"PerformanceSet {ref} PortCounters.SymbolErrorCounter=65535"])
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    try:
        for _ in range(3):
            sampler.step()
    finally:
        sim.console([f"PerformanceSet {ref} PortCounters.SymbolErrorCounter=0"])
        sampler.store.close()
    link = _link(api_client, "leaf05", 2)
    assert link["saturated"] == ["symbol_errors"]
    assert link["errors"]["symbol_errors"] is None and "symbol_errors" in link["unknown"]
    assert link["errors"]["rcv_errors"] == 0


def test_xmit_wait_pegged_before_the_first_sweep_is_unknown_and_no_evidence(
    pg_url: str, mad: MadSource, sim: FabricSim, api_client
):
    """PortXmitWait pegged at 2^32 - 1 at stor01's leaf port before the sampler first reads
    it: no rate (unknown, flagged saturated, never 0 ticks/s), and no congestion: when it
    pegged nobody knows, so it says nothing of now (server/incidents/detect.py; the
    incident size gate, STACKLENS_INCIDENT_MIN_S, is off here: tested apart)."""
    ref = port_ref("leaf05", 1)
    sim.console([f"PerformanceSet {ref} PortCounters.PortXmitWait={PEGGED}"])
    engine = make_engine(pg_url)
    th = dataclasses.replace(Thresholds.from_settings(Settings()), min_ns=0)
    incidents = IncidentService(engine, th, sweep_interval_s=0.1)
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    opened = {}
    try:
        for i in range(3):
            sampler.step()
            opened[i] = [(m["incident"]["kind"], m["incident"]["title"])
                         for m in incidents.tick() if m["event"] == "opened"]  # fmt: skip
    finally:
        sim.console([f"PerformanceSet {ref} PortCounters.PortXmitWait=0"])
        sampler.store.close()
        engine.dispose()
    link = _link(api_client, "leaf05", 1)
    assert link["saturated"] == ["xmit_wait"] and "xmit_wait" in link["unknown"]
    assert link["xmit_wait"] is None and link["xmit_wait_per_s"] is None
    assert opened == {0: [], 1: [], 2: []}


def test_a_pegged_xmit_wait_is_congestion_when_it_pegs_then_unknown(
    pg_url: str, mad: MadSource, sim: FabricSim
):
    """ibsim's PerformanceSet moves leaf03[2]'s PortXmitWait (host18's link): it rises
    50 M ticks a sweep for two sweeps (congestion from its rate, opened at the second),
    pegs at 2^32 - 1 in the third (congestion of unknown size: the sweep it got there
    counts), then stays pegged: no evidence either way, so the congestion ends after the
    STACKLENS_INCIDENT_CLEAR_SWEEPS (3) sweeps that follow, at the end of the sweep it
    pegged in, and the stored samples read its rate unknown, never 0. (Before: a pegged
    counter was congestion until someone reset it.)"""
    leaf, port, host = "leaf03", 2, "host18"
    engine = make_engine(pg_url)
    th = Thresholds(xmit_wait_per_s=1e6, sweeps=2, clear=3, min_ns=0)
    service = IncidentService(engine, th, sweep_interval_s=0.1)
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    events: dict[int, list[tuple[str, str]]] = {}
    sweeps: list[int] = []

    def sweep(i: int) -> None:
        sampler.step()
        ((ts,),) = query(pg_url, "SELECT max(ts_ns) FROM fabric_port_samples")
        sweeps.append(ts)
        events[i] = [(m["event"], m["incident"]["kind"]) for m in service.tick()]

    try:
        sweep(0)
        emu = TrafficEmulator(sim, mad, sampler.topology)
        for i in (1, 2):
            emu.raise_counter(leaf, port, "xmit_wait", 50_000_000)
            sweep(i)
        sim.console([f"PerformanceSet {port_ref(leaf, port)} PortCounters.PortXmitWait={PEGGED}"])
        for i in range(3, 8):
            sweep(i)
        samples = query(
            pg_url,
            "SELECT s.ts_ns, s.d_xmit_wait FROM fabric_port_samples s JOIN fabric_ports p"
            " ON p.id = s.port_id JOIN fabric_nodes n ON n.guid = p.guid"
            " WHERE n.description = %s AND p.port = %s ORDER BY s.ts_ns",
            (leaf, port),
        )
        rows = query(pg_url, "SELECT title, start_ns, end_ns, links FROM incidents")
    finally:
        sim.console([f"PerformanceSet {port_ref(leaf, port)} PortCounters.PortXmitWait=0"])
        sampler.store.close()
        engine.dispose()
    assert {i: e for i, e in events.items() if e} == {
        2: [("opened", "congestion")], 6: [("closed", "congestion")]
    }  # fmt: skip
    ((title, start, end, links),) = rows
    assert title == f"Congestion on {host}[1] – {leaf}[{port}]"
    assert start == sweeps[0] and end == sweeps[3]  # it ends with the sweep it pegged in
    # its rate is known while it rises (50 M ticks a sweep), unknown once pegged (never 0)
    moved = [d for t, d in samples if t in sweeps]
    assert moved[1:3] == [50_000_000, 50_000_000] and moved[3:] == [None] * 5
    evidence = [(p["xmit_wait_saturated"], p["xmit_wait_pegged_now"])
                for p in links[0]["evidence"]]  # fmt: skip
    assert evidence == [(False, False)] * 2 + [(True, True)] + [(True, False)] * 3


def test_relinked_port_is_active_and_sweeps_settle(pg_url: str, mad: MadSource, sim: FabricSim):
    sampler = _sampler(pg_url, mad, floor_s=0.0)
    try:
        sampler.step()
        emu = TrafficEmulator(sim, mad, sampler.topology)
        emu.unlink("leaf03", 2)
        sampler.step()  # host18 gone: re-discovered at once
        emu.relink("leaf03", 2)
        sampler.discover()
        host18 = sampler.topology.node("host18").guid
        assert sampler.topology.ports[(host18, 1)].state == PORT_ACTIVE
        assert {
            p.state for e, p in sampler.topology.ports.items() if sampler.topology.remote(e)
        } == {PORT_ACTIVE}
        before = sampler.discoveries
        for _ in range(3):
            sampler.step()
        assert sampler.discoveries == before  # nothing silent, nothing re-discovered
        assert sampler.missed == {}
    finally:
        sampler.store.close()


def test_warnings_are_rate_limited(caplog: pytest.LogCaptureFixture):
    limited = RateLimitedLog(every_s=0.2)
    with caplog.at_level(logging.WARNING, logger="collector.fabric.service"):
        logged = [limited.warning("sweep", "fabric sweep failed: %s", i) for i in range(50)]
        time.sleep(0.25)
        limited.warning("sweep", "fabric sweep failed: %s", "again")
        limited.warning("other", "another kind")
    assert logged == [True] + [False] * 49
    assert [r.getMessage() for r in caplog.records] == [
        "fabric sweep failed: 0",
        "fabric sweep failed: again (49 more like it in the last 0.2 s)",
        "another kind",
    ]
