"""The fabric over time on the simulator: the real sampler sweeps ibsim's 32-host fat tree
while a flow crosses it and an error counter moves on two consecutive sweeps; the API's
window sums and series equal the stored samples exactly, the per-minute rollups equal the
raw sums, and the errors are one burst event with its start, end and counts.

Runs after test_storage.py (file order), which leaves the subnet up and every cable linked.
"""

from __future__ import annotations

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.ibsim import FabricSim, Flow, TrafficEmulator
from stacklens.constants import PORT_COUNTERS, RATE_COUNTERS
from tests.conftest import query

FLOW_BYTES = 16 * 1024 * 1024
SECOND = 10**9


def _s(ns: int) -> str:
    return f"{ns // SECOND}.{ns % SECOND:09d}"


def test_windows_series_and_a_burst_on_the_simulator(
    pg_url: str, mad: MadSource, sim: FabricSim, api_client
):
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()
        sampler.step()
        emu = TrafficEmulator(sim, mad, sampler.topology)
        emu.apply([Flow("host09", "host20", FLOW_BYTES)])
        emu.raise_counter("leaf04", 3, "symbol_errors", 4)
        sampler.step()
        emu.raise_counter("leaf04", 3, "symbol_errors", 5)
        sampler.step()
        sampler.step()  # no errors: the burst ends
    finally:
        sampler.store.close()
    sweeps = [
        t for (t,) in query(pg_url, "SELECT DISTINCT ts_ns FROM fabric_port_samples ORDER BY 1")
    ]
    assert len(sweeps) == 5
    lo, hi = sweeps[0] - SECOND, sweeps[-1] + 1
    window = {"from": _s(lo), "to": _s(hi)}

    # the burst: one event over the two erring sweeps
    url = api_client.app.url_path_for("fabric_events")
    bursts = api_client.get(url, params={"kind": "error_burst", **window}).json()["events"]
    assert len(bursts) == 1, bursts
    burst = bursts[0]
    dt = query(pg_url, "SELECT dt_ns FROM fabric_port_samples WHERE ts_ns = %s LIMIT 1",
               (sweeps[2],))[0][0]  # fmt: skip
    assert burst["subject"] == "leaf04[3]"
    assert (burst["start_ns"], burst["end_ns"]) == (sweeps[2] - dt, sweeps[3])
    assert burst["details"]["counts"]["symbol_errors"] == 9
    assert burst["details"]["sweeps"] == 2

    # the window's sums of every link equal its ends' stored samples
    links = api_client.get(api_client.app.url_path_for("fabric_links"),
                           params={**window, "limit": 1000}).json()  # fmt: skip
    assert links["page"]["total"] == 74 and len(links["links"]) == 74
    sent = dict(
        query(
            pg_url,
            "SELECT p.id, sum(s.d_xmit_bytes) FROM fabric_port_samples s JOIN fabric_ports p "
            "ON p.id = s.port_id GROUP BY p.id",
        )
    )
    ports = {(g, p): i for i, g, p in query(pg_url, "SELECT id, guid, port FROM fabric_ports")}

    def port_id(end: dict) -> int:
        guid = int(end["guid"], 16)
        return ports[(guid - (1 << 64) if guid >= 1 << 63 else guid, end["port"])]

    for x in links["links"]:
        assert x["a_to_b_bytes"] == sent[port_id(x["a"])], x
        assert x["b_to_a_bytes"] == sent[port_id(x["b"])], x
    busiest = links["links"][0]
    assert max(busiest["a_to_b_bytes"], busiest["b_to_a_bytes"]) >= FLOW_BYTES
    erring = next(x for x in links["links"] if "leaf04" in (x["a"]["name"], x["b"]["name"])
                  and 3 in (x["a"]["port"], x["b"]["port"]) and x["errors_total"])  # fmt: skip
    assert erring["errors"]["symbol_errors"] == 9

    # the busiest link's series: its steps add up to the window; each 1-step sample is stored
    series_url = api_client.app.url_path_for("fabric_series")
    answer = api_client.get(series_url, params={"link": busiest["id"], **window}).json()
    cols = answer["columns"]
    assert sum(v for v in cols["a_to_b_bytes"] if v is not None) == busiest["a_to_b_bytes"]
    assert sum(v for v in cols["b_to_a_bytes"] if v is not None) == busiest["b_to_a_bytes"]
    assert sum(cols["samples"]) == busiest["samples"] == 10

    # the per-minute rollups are the raw sums
    sums = ", ".join(f"sum(d_{c})" for c in PORT_COUNTERS)
    known = ", ".join(
        f"coalesce(sum(dt_ns) FILTER (WHERE d_{c} IS NOT NULL AND dt_ns > 0), 0)"
        for c in RATE_COUNTERS
    )
    raw = query(
        pg_url,
        "SELECT port_id, ts_ns / 60000000000 * 60000000000, count(*), bit_or(flags), "
        f"{sums}, {known} FROM fabric_port_samples GROUP BY 1, 2 ORDER BY 1, 2",
    )
    columns = ", ".join([*(f"d_{c}" for c in PORT_COUNTERS), *(f"t_{c}" for c in RATE_COUNTERS)])
    rolled = query(
        pg_url,
        f"SELECT port_id, minute_ns, samples, flags, {columns} FROM fabric_port_minutes "
        "ORDER BY 1, 2",
    )
    assert rolled == raw and len(raw) >= 148
