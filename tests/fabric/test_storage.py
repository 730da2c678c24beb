"""The sampler into PostgreSQL: topology rows, samples with NULL unknown deltas, link events.

Runs after test_sim.py (file order): it unlinks and relinks a port of the shared simulator
and brings the subnet back up with opensm before it ends.
"""

from __future__ import annotations

import numpy as np
import psycopg

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from collector.fabric.store import FabricStore, signed64
from emulator.ibsim import FabricSim, TrafficEmulator
from stacklens.constants import PORT_COUNTERS
from tests.conftest import query


def test_sampler_stores_topology_and_samples(pg_url: str, mad: MadSource):
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    sampler.step()
    sampler.step()
    n = len(sampler.topology.sweep_targets())
    assert query(pg_url, "SELECT count(*) FROM fabric_nodes")[0][0] == 41
    assert query(pg_url, "SELECT count(*) FROM fabric_links WHERE down_ns IS NULL")[0][0] == 74
    assert query(pg_url, "SELECT count(*) FROM fabric_lfts")[0][0] == 7
    rows = query(
        pg_url,
        "SELECT count(*), count(d_xmit_bytes), count(dt_ns), count(DISTINCT ts_ns)"
        " FROM fabric_port_samples",
    )
    assert rows[0] == (2 * n, n, n, 2)
    # Each port's newest sample is also in fabric_port_latest, identical.
    newest = (
        "SELECT * FROM (SELECT DISTINCT ON (port_id) * FROM fabric_port_samples "
        "ORDER BY port_id, ts_ns DESC) s ORDER BY port_id"
    )
    latest = query(pg_url, newest)
    assert len(latest) == n
    assert query(pg_url, "SELECT * FROM fabric_port_latest ORDER BY port_id") == latest
    leaf = sampler.topology.node("leaf05")
    cap = query(
        pg_url,
        "SELECT capacity_bytes_per_s FROM fabric_ports WHERE guid = %s AND port = 1",
        (signed64(leaf.guid),),
    )
    assert cap == [(4_000_000_000,)]
    sampler.store.close()


def test_samples_copy_nulls_flags_and_values(pg_url: str):
    store = FabricStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO fabric_ports (guid, port, port_guid, lid, state, phys_state, width,"
            " speed, speed_ext, capacity_bytes_per_s, updated_ns)"
            " VALUES (-2, 1, -2, 5, 4, 5, 2, 4, 0, 4000000000, 0)"
        )
    tr = DeltaTracker()
    guid = (1 << 64) - 2
    vals = np.zeros((1, len(PORT_COUNTERS)), dtype=np.uint64)
    for t, words in ((1_000, 0xFFFFFFF0), (3_000, 0xFFFFFFFF), (6_000, 7)):
        vals[0, 0] = words
        sweep = RawSweep.from_words(
            [guid], [1], vals, np.array([False]), np.array([True]), t - 1, t
        )
        store.port_ids = {(guid, 1): store.port_ids.get((guid, 1)) or _port_id(pg_url)}
        assert store.write_samples(tr.update(sweep)) == 1
    rows = query(
        pg_url,
        "SELECT ts_ns, dt_ns, flags, xmit_bytes, d_xmit_bytes, d_rcv_bytes"
        " FROM fabric_port_samples ORDER BY ts_ns",
    )
    assert rows == [
        (1_000, None, 0, 4 * 0xFFFFFFF0, None, None),
        (3_000, 2_000, 1, 4 * 0xFFFFFFFF, None, 0),  # saturated: flagged, unknown
        (6_000, 3_000, 1 << 16, 28, None, 0),  # reset: unknown
    ]
    latest = "SELECT ts_ns, dt_ns, flags, xmit_bytes, d_xmit_bytes FROM fabric_port_latest"
    assert query(pg_url, latest) == [(6_000, 3_000, 1 << 16, 28, None)]
    # A sweep older than the newest one (written late) does not replace it.
    vals[0, 0] = 9
    old = RawSweep.from_words([guid], [1], vals, np.array([False]), np.array([True]), 4_999, 5_000)
    assert store.write_samples(tr.update(old)) == 1
    assert query(pg_url, latest) == [(6_000, 3_000, 1 << 16, 28, None)]
    store.close()


def _port_id(url: str) -> int:
    return query(url, "SELECT id FROM fabric_ports WHERE guid = -2")[0][0]


def test_unlink_is_an_event_and_relink_clears_it(pg_url: str, mad: MadSource, sim: FabricSim):
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    sampler.step()
    emu = TrafficEmulator(sim, mad, sampler.topology)
    emu.unlink("leaf03", 1)
    try:
        sampler.step()  # host17 stops answering: the sampler re-discovers at once
        events = query(
            pg_url,
            "SELECT kind, subject FROM fabric_events WHERE kind <> 'error_burst' ORDER BY id",
        )
        assert events == [("node_gone", "host17"), ("link_down", "host17[1] - leaf03[1]")]
        # the switch end's error counters moved as the link went down: an error burst
        burst = query(
            pg_url, "SELECT subject, details FROM fabric_events WHERE kind = 'error_burst'"
        )
        assert len(burst) == 1 and burst[0][0] == "leaf03[1]", burst
        assert sum(burst[0][1]["counts"].values()) >= 1, burst
        down = query(pg_url, "SELECT count(*) FROM fabric_links WHERE down_ns IS NOT NULL")
        assert down == [(1,)]
    finally:
        emu.relink("leaf03", 1)
        sim.run_opensm()
    sampler.discover()
    # host17 back: the node_gone and link_down events end (no new events)
    events = query(
        pg_url,
        "SELECT kind, subject, end_ns > start_ns FROM fabric_events WHERE kind <> 'error_burst'"
        " ORDER BY id",
    )
    assert events == [("node_gone", "host17", True), ("link_down", "host17[1] - leaf03[1]", True)]
    assert query(pg_url, "SELECT count(*) FROM fabric_links WHERE down_ns IS NOT NULL") == [(0,)]
    assert query(pg_url, "SELECT gone_ns FROM fabric_nodes WHERE description = 'host17'") == [
        (None,)
    ]
    sampler.store.close()
