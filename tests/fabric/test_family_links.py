# tests/fabric/test_family_links.py — families' bytes per link against the routes, on ibsim.
"""Communicator families on the simulated 32-host fat tree (issue #27 points 2 and 4):
mpi_pmpi_hooks/tests/families.c on 8 ranks, two per simulated host (STACKLENS_HOST, MPMD),
under the hooks and Open MPI or MPICH: ranks 0, 1 on host01 and 2, 3 on host02 (both on
leaf01), 4, 5 on host09 and 6, 7 on host10 (both on leaf02); the real fabric sampler stored
the topology and forwarding tables before the run.

Every family's traffic is known from the program (its header comment) and the algorithm
the model gives each collective (as tests/hooks/test_families.py states them): rank to
rank bytes. Per family, the bytes that stay in a host, cross a leaf (two links) or
cross the spine (four) are exact (GET /api/jobs/{job}/families); and per link direction,
each family's bytes (GET /api/jobs/{job}/families/links) equal its rank-to-rank bytes
placed on the route the forwarding tables give from the source host's HCA to the
destination's (collector/fabric/topology.Topology.route over the LFTs the sampler read),
exactly, with nothing left on no link but the intra-host bytes. The rank-to-rank bytes
and their placement are bench/families.py's (the long form: also data_parallel.py, and
the routes' cost)."""

from __future__ import annotations

import uuid

import pytest

from bench.families import (
    FAMILIES_HOSTS,
    answered_links,
    expected_links,
    expected_reach,
    families_flows,
)
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.ibsim import FabricSim
from tests.hooks import jobs
from tests.hooks.test_families import run_on_hosts


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_family_bytes_per_link_are_the_routes(
    collector, pg_url, api_client, sim: FabricSim, mad: MadSource, mpi: str
) -> None:
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()  # the topology and forwarding tables, before the run
        topology = sampler.topology
    finally:
        sampler.store.close()
    assert topology is not None
    job = f"family-links-{mpi}-{uuid.uuid4().hex[:8]}"
    result = run_on_hosts(collector, mpi, [jobs.program(mpi, "families")], job, per_host=2,
                          hosts=FAMILIES_HOSTS)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert jobs.library_warnings(result.stderr) == []
    flows = families_flows()  # rank-to-rank bytes per family, from the program's structure

    # per family: in a host, across a leaf (host01-host02, host09-host10), across the spine
    answer = api_client.get(api_client.app.url_path_for("job_families", job=job)).json()
    reach = {f["label"]: {(r["reach"], r["provenance"]): r["bytes"] for r in f["reach"]}
             for f in answer["families"]}  # fmt: skip
    expected: dict[str, dict[tuple[str, str], int]] = {"cart 2×4": {}}
    expected |= expected_reach(flows, FAMILIES_HOSTS, topology)
    assert reach == expected
    # the figures in words: rows half in a host, half across leaf01 or leaf02; columns and
    # the cross split all across the spine; the pipeline 16,000 B in hosts, 8,000 across a
    # leaf (1->2, 5->6), 4,000 across the spine (3->4)
    assert expected["cart 2×4 dim 1 kept"] == {("host", "modelled"): 491_520,
                                              ("leaf", "modelled"): 491_520}  # fmt: skip
    assert expected["cart 2×4 dim 0 kept"] == {("spine", "modelled"): 20_480}
    assert expected["pp"] == {("host", "routed"): 16_000, ("leaf", "routed"): 8_000,
                              ("spine", "routed"): 4_000}  # fmt: skip
    assert expected["world"] == {("host", "modelled"): 64, ("leaf", "modelled"): 64,
                                 ("spine", "modelled"): 64}  # fmt: skip

    # per link direction (tx end, rx end): each family's bytes on the forwarding tables' route
    links = api_client.get(f"/api/jobs/{job}/families/links", params={"limit": 1000}).json()
    assert links["page"]["next_cursor"] is None
    assert {f["path"] for lk in links["links"] for f in lk["families"]} == {"fixed"}
    assert all(lk["bytes"] == sum(f["bytes"] for f in lk["families"]) for lk in links["links"])
    assert answered_links(links) == expected_links(flows, FAMILIES_HOSTS, topology)
    in_hosts = sum(n for pairs in flows.values() for (s, d), n in pairs.items()
                   if s // 2 == d // 2)  # fmt: skip
    assert links["left_out"] == {"intra_host": in_hosts}
