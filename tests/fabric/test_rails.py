"""Multi-rail truth on the simulator (issue #27 points 3 and 4): a rail-optimised fabric of
4 hosts with two HCAs each ("hostNN mlx5_0" on leaf01, "hostNN mlx5_1" on leaf02, the
planes sharing two spines; emulator/fattree.py `rails=2`) under ibsim and opensm, swept by
the real sampler into the test database, judged by the real incident service.

Load is set with the simulator's console on the HCA side of host02's rails: after each
sweep, the HCA port's PortXmitData is set to the value that sweep read plus the bytes of
the next interval, so the next sweep's delta of that direction is exactly those bytes
(the HCA transmits nothing else but its answers to the sampler's own queries, sent after
it has read its counters). One rail forced (all of host02's bytes on mlx5_0) opens an
`imbalance` incident on "rails of host02" at the second skewed sweep, never at the first,
and it ends after the clear sweeps; the same bytes on both rails open nothing; the group's
member loads over the window equal the bytes set, exactly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.fattree import FatTree, fat_tree
from emulator.ibsim import FabricSim, port_ref
from server.app import create_app
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens.db import make_engine
from tests.conftest import query
from tests.fabric.conftest import _have_simulator

#: The detectors' thresholds here: utilisation 0.5 (a member at or above, the other below
#: 0.25), two sweeps, three to clear; a congestion reported once it held 1 s (two sweeps of
#: about a second each hold more, whatever the sweeps' jitter).
TH = Thresholds(utilisation=0.5, sweeps=2, clear=3, imbalance_sweeps=2, min_ns=10**9)
#: Bytes per sweep interval (~1 s) of a hot rail (QDR 4x: 4 GB/s) and of an idle one.
HOT = 3_200_000_000
COLD = 40_000_000
HOST = "host02"


@pytest.fixture(scope="module")
def rails_tree() -> FatTree:
    """4 hosts, 2 rails, 4 HCAs per leaf, 2 spines: leaf01 is plane 0, leaf02 plane 1."""
    return fat_tree(4, rails=2, hosts_per_leaf=4, spines=2)


@pytest.fixture(scope="module")
def rails_sim(rails_tree: FatTree, scratch_root: Path) -> Iterator[FabricSim]:
    """The multi-rail fabric's simulator (a socket of its own), stopped at the end."""
    if not _have_simulator():
        pytest.skip("ibsim/opensm/infiniband-diags not installed (make setup installs them)")
    simulator = FabricSim(rails_tree, scratch_root / "ibsim-rails")
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


class Rig:
    """The sampler over the simulator, the incident service and the API, on one database."""

    def __init__(self, pg_url: str, sim: FabricSim):
        self.pg_url, self.sim = pg_url, sim
        self.source = MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1)
        self.sampler = FabricSampler(pg_url, self.source, interval_s=1.0, rediscover_s=3600)
        self.engine = make_engine(pg_url)
        self.service = IncidentService(self.engine, TH, sweep_interval_s=1.0)
        self.last = 0.0
        self.sweep()  # discovery and the first sweep (no deltas yet)
        self.ports = {r: self._port(f"{HOST} mlx5_{r}") for r in (0, 1)}

    def _port(self, node: str) -> int:
        sql = ("SELECT p.id FROM fabric_ports p JOIN fabric_nodes n ON n.guid = p.guid"
               " WHERE n.description = %s AND p.port = 1")  # fmt: skip
        rows = query(self.pg_url, sql, (node,))
        return int(rows[0][0])

    def sweep(self) -> int:
        """One sweep about a second after the previous one; its time (ns)."""
        time.sleep(max(0.0, self.last + 1.0 - time.monotonic()))
        self.last = time.monotonic()
        self.sampler.step()
        return int(query(self.pg_url, "SELECT max(ts_ns) FROM fabric_port_latest")[0][0])

    def load(self, rail0: int, rail1: int) -> None:
        """Set host02's HCAs to send `rail0` and `rail1` bytes in the next interval: each
        PortXmitData set to the value the last sweep read plus those bytes (in words)."""
        commands = []
        for r, nbytes in ((0, rail0), (1, rail1)):
            (raw,) = query(self.pg_url, "SELECT xmit_bytes FROM fabric_port_latest"
                           " WHERE port_id = %s", (self.ports[r],))[0]  # fmt: skip
            words = (int(raw) + nbytes) // 4
            commands.append(f"PerformanceSet {port_ref(f'{HOST} mlx5_{r}', 1)} "
                            f"PortCountersExtended.PortXmitData={words}")  # fmt: skip
        self.sim.console(commands)

    def incidents(self, kind: str = "imbalance") -> list[tuple]:
        """The stored incidents of `kind`: kind, title, link ids, end, links."""
        return query(self.pg_url, "SELECT kind, title, link_ids, end_ns, links FROM incidents"
                     " WHERE kind = %s ORDER BY id", (kind,))  # fmt: skip

    def close(self) -> None:
        self.sampler.store.close()
        self.source.close()
        self.engine.dispose()


@pytest.fixture
def rig(pg_url: str, rails_sim: FabricSim) -> Iterator[Rig]:
    """A fresh sampler and incident service over the emptied database."""
    made = Rig(pg_url, rails_sim)
    try:
        yield made
    finally:
        made.close()


def _group(client: TestClient, lo_ns: int, hi_ns: int) -> dict:
    """The group "rails of host02" over [lo_ns, hi_ns), through the API."""
    window = f"from={lo_ns / 1e9:.3f}&to={hi_ns / 1e9:.3f}"
    page = client.get(f"/api/fabric/groups?kind=rails&{window}").json()
    assert page["page"]["total"] == 4  # every host has two rails
    (found,) = [g for g in page["groups"] if g["name"] == f"rails of {HOST}"]
    one = client.get(f"/api/fabric/groups/{found['id']}?{window}")
    assert one.status_code == 200, one.text
    return one.json()


def _sent(member: dict) -> int:
    """The bytes the member's HCA end sent over the window."""
    return (
        member["a_to_b_bytes"] if member["a"]["name"].startswith(HOST) else member["b_to_a_bytes"]
    )


def test_one_rail_forced_opens_an_imbalance_within_two_sweeps(rig: Rig):
    rig.sweep()
    rig.service.tick()
    rig.load(HOT, 0)
    first = rig.sweep()
    rig.service.tick()
    assert rig.incidents() == []  # one skewed sweep: not sustained yet
    rig.load(HOT, 0)
    second = rig.sweep()
    rig.service.tick()
    ((kind, title, link_ids, end_ns, links),) = rig.incidents()
    assert (kind, end_ns) == ("imbalance", None)
    # the forced rail is above the congestion threshold: a congestion of its own as well
    assert [r[1] for r in rig.incidents("congestion")] == [
        f"Congestion on {HOST} mlx5_0[1] – leaf01[2]"
    ]
    assert title == f"Imbalance on rails of {HOST}: {HOST} mlx5_0[1] – leaf01[2] busiest"
    assert {lk["group"]["name"] for lk in links} == {f"rails of {HOST}"}
    ends = sorted(sorted((lk["a"]["name"], lk["b"]["name"])) for lk in links)
    assert ends == [[f"{HOST} mlx5_0", "leaf01"], [f"{HOST} mlx5_1", "leaf02"]]
    (busiest,) = [lk for lk in links if lk["busiest"]]
    assert f"{HOST} mlx5_0" in (busiest["a"]["name"], busiest["b"]["name"])
    for lk in links:  # each member's own utilisation per sweep, the group's skew beside it
        hot = [p for p in lk["evidence"] if p["t_ns"] in (first, second)]
        assert len(hot) == 2 and all(p["max_mean"] == pytest.approx(2.0, rel=1e-3) for p in hot)
        if lk is busiest:
            assert all(p["utilisation"] >= TH.utilisation for p in hot)
        else:
            assert all(p["utilisation"] < 1e-3 for p in hot)  # the sampler's own MADs only

    engine = make_engine(rig.pg_url)
    with TestClient(create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1") as c:
        group = _group(c, first - 500_000_000, second + 500_000_000)
    engine.dispose()
    assert sorted(m["link_id"] for m in group["members"]) == sorted(link_ids)
    sent = {m["link_id"]: _sent(m) for m in group["members"]}
    assert sent == {busiest["id"]: 2 * HOT, **{i: 0 for i in link_ids if i != busiest["id"]}}
    assert group["busiest_link_id"] == busiest["id"]
    assert group["max_mean"] == pytest.approx(2.0, rel=1e-3)  # one of two members loaded
    assert group["cv"] == pytest.approx(1.0, rel=1e-3)
    assert group["jobs"] == []  # no job ran

    for _ in range(3):  # balanced again: it ends after the clear sweeps, like the others
        rig.load(HOT, HOT)
        rig.sweep()
        rig.service.tick()
    ((kind, _, _, end_ns, _),) = rig.incidents()
    assert kind == "imbalance" and end_ns == second


def test_both_rails_loaded_alike_open_nothing(rig: Rig):
    rig.sweep()
    rig.service.tick()
    times = []
    for _ in range(4):
        rig.load(HOT, HOT)
        times.append(rig.sweep())
        rig.service.tick()
    assert rig.incidents() == []
    assert len(rig.incidents("congestion")) == 2  # both rails are busy, evenly
    rig.load(COLD, COLD)  # lightly loaded and balanced: nothing either
    rig.sweep()
    rig.service.tick()
    assert rig.incidents() == []
    engine = make_engine(rig.pg_url)
    with TestClient(create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1") as c:
        group = _group(c, times[0] - 500_000_000, times[-1] + 500_000_000)
    engine.dispose()
    assert [_sent(m) for m in group["members"]] == [4 * HOT, 4 * HOT]
    assert group["max_mean"] == pytest.approx(1.0, abs=0.05)  # the intervals differ a little
