"""The fabric API over what the real sampler stored from the simulator: the 32-host fat tree
as discovered, a flow's route as the busiest links, and an injected error counter read back
exactly as the link's error delta of the last sweep.

Runs after test_storage.py (file order), which leaves the subnet up and every cable linked.
"""

from __future__ import annotations

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.ibsim import FabricSim, Flow, TrafficEmulator

#: A flow big enough that the sweeps' own MADs (a few KiB per link) cannot rival it.
FLOW_BYTES = 64 * 1024 * 1024
#: Management traffic a link may carry besides the flow in one cycle.
MAD_SLACK = 64 * 1024


def test_api_shows_the_sampled_fabric(pg_url: str, mad: MadSource, sim: FabricSim, api_client):
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()
        topo = sampler.topology
        emu = TrafficEmulator(sim, mad, topo)
        emu.apply([Flow("host09", "host20", FLOW_BYTES)])
        emu.raise_counter("leaf04", 3, "symbol_errors", 9)
        sampler.step()
    finally:
        sampler.store.close()

    shape = api_client.get(api_client.app.url_path_for("fabric_topology")).json()
    types = [n["type"] for n in shape["nodes"]]
    assert (types.count("switch"), types.count("hca"), len(shape["links"])) == (7, 34, 74)
    assert {lk["state"] for lk in shape["links"]} == {"up"}
    assert {lk["capacity_bytes_per_s"] for lk in shape["links"]} == {4_000_000_000}

    url = api_client.app.url_path_for("fabric_links")
    loads = api_client.get(url).json()["links"]
    assert len(loads) == 74 and all(x["utilisation"] is not None for x in loads)
    # The four links of the flow's route are the busiest; the flow's direction carries it.
    route = topo.route(topo.node("host09").guid, topo.node("host20").guid)
    hops = {(f"{h.tx[0]:#018x}", h.tx[1]) for h in route}
    busiest = loads[:4]
    for x in busiest:
        a_sends = (x["a"]["guid"], x["a"]["port"]) in hops
        sender = x["a_sample"] if a_sends else x["b_sample"]
        assert FLOW_BYTES <= sender["xmit_bytes"] < FLOW_BYTES + MAD_SLACK, x
    cables = {
        frozenset(((f"{h.tx[0]:#018x}", h.tx[1]), (f"{h.rx[0]:#018x}", h.rx[1]))) for h in route
    }
    drawn = {
        frozenset(((x["a"]["guid"], x["a"]["port"]), (x["b"]["guid"], x["b"]["port"])))
        for x in busiest
    }
    assert drawn == cables

    first = api_client.get(url, params={"sort": "errors", "limit": 1}).json()["links"]
    assert len(first) == 1
    ends = {
        (first[0]["a"]["name"], first[0]["a"]["port"]),
        (first[0]["b"]["name"], first[0]["b"]["port"]),
    }
    assert ("leaf04", 3) in ends
    assert first[0]["errors"]["symbol_errors"] == 9
    assert first[0]["errors_total"] == 9
