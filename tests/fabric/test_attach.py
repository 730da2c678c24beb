"""`stacklens up`'s fabric sampler finds the fabric by itself: one that appears after it
started is discovered, and a restarted simulator (another fabric: its own subnet prefix) is
attached to afresh. The state directory is reused: the earlier fabric's links are neither
drawn nor ranked (no ghost links), only the current fabric's."""

from __future__ import annotations

from pathlib import Path

from collector.fabric.service import fabric_services, sim_state_file
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim
from stacklens.settings import Settings
from tests.conftest import query


def _drawn(api_client) -> tuple[set, set, set]:
    """(node names, links as frozensets of (name, port), ranked links) the API shows."""
    topo = api_client.get(api_client.app.url_path_for("fabric_topology")).json()
    loads = api_client.get(api_client.app.url_path_for("fabric_links")).json()["links"]

    def ends(x: dict) -> frozenset:
        return frozenset(((x["a"]["name"], x["a"]["port"]), (x["b"]["name"], x["b"]["port"])))

    return (
        {n["name"] for n in topo["nodes"]},
        {ends(lk) for lk in topo["links"] if lk["state"] == "up"}
        | {("down", ends(lk)) for lk in topo["links"] if lk["state"] == "down"},
        {ends(x) for x in loads},
    )


def test_sampler_attaches_to_later_fabrics_and_shows_only_the_current(
    pg_url: str, scratch_root: Path, api_client
):
    settings = Settings(state_dir=scratch_root / "attach-state", fabric_source="auto")
    (sampler,) = fabric_services(pg_url, settings)
    state = sim_state_file(settings)
    state.parent.mkdir(parents=True)
    # The first fabric: one leaf of 8 hosts; the second: leaves of 4 hosts (other cables).
    trees = [fat_tree(8), fat_tree(16, hosts_per_leaf=4, spines=2)]
    try:
        sampler.step()  # no fabric yet: nothing to sample, nothing fails
        assert (sampler.source, sampler.sweeps, sampler.errors) == (None, 0, 0)
        for i, tree in enumerate(trees):
            with FabricSim(tree, scratch_root / f"attach-{i}") as sim:
                sim.write_state(state)
                sampler.step()
                sampler.step()
                assert sampler.attached == i + 1
                assert len(sampler.topology.nodes) == len(tree.switches + tree.hcas)
                expected = {frozenset((lk.a, lk.b)) for lk in tree.links}
                names, links, ranked = _drawn(api_client)
                assert names == set(tree.switches + tree.hcas)
                assert links == expected and ranked == expected
            state.unlink()
            sampler.step()  # the simulator is gone: the source is closed
            assert sampler.source is None
        assert sampler.errors == 0
        # Both fabrics are stored, each with its own identity; 8-host cables absent from
        # the second fabric are still in the database, only not shown.
        assert query(pg_url, "SELECT count(*) FROM fabrics") == [(2,)]
        old = {frozenset((lk.a, lk.b)) for lk in trees[0].links}
        assert old - {frozenset((lk.a, lk.b)) for lk in trees[1].links}
        stored = query(pg_url, "SELECT count(*) FROM fabric_links")[0][0]
        assert stored > len(trees[1].links)
    finally:
        sampler._close()
