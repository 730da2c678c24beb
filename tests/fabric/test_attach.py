"""`stacklens up`'s fabric sampler finds the fabric by itself: one that appears after it
started is discovered, and a restarted simulator (a new fabric) is attached to afresh."""

from __future__ import annotations

from pathlib import Path

from collector.fabric.service import fabric_services, sim_state_file
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim
from stacklens.settings import Settings
from tests.conftest import query


def test_sampler_attaches_to_a_later_and_a_restarted_fabric(pg_url: str, scratch_root: Path):
    settings = Settings(state_dir=scratch_root / "attach-state", fabric_source="auto")
    (sampler,) = fabric_services(pg_url, settings)
    state = sim_state_file(settings)
    state.parent.mkdir(parents=True)
    try:
        sampler.step()  # no fabric yet: nothing to sample, nothing fails
        assert (sampler.source, sampler.sweeps, sampler.errors) == (None, 0, 0)
        sizes = []
        for hosts in (8, 16):  # the first simulator, then another one in its place
            with FabricSim(fat_tree(hosts), scratch_root / f"attach-{hosts}") as sim:
                sim.write_state(state)
                sampler.step()
                sampler.step()
                sizes.append((len(sampler.topology.nodes), sampler.attached))
                assert len(sampler.topology.nodes) == len(sim.tree.switches + sim.tree.hcas)
                n = query(pg_url, "SELECT count(*) FROM fabric_links WHERE down_ns IS NULL")
                assert n == [(len(sim.tree.links),)]
            state.unlink()
            sampler.step()  # the simulator is gone: the source is closed
            assert sampler.source is None
        assert sizes == [(8 + 1 + 2, 1), (16 + 2 + 2, 2)]
        assert sampler.errors == 0
    finally:
        sampler._close()
