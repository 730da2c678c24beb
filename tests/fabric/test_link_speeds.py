"""Link capacity per InfiniBand generation, against the simulator's own speed settings.

Each generation gets a small fat tree of its own whose links all run that speed (ibsim's
enabled extended speeds, or FDR10 from the vendor ExtendedPortInfo). The capacity of every
link, switch ports included (their CapabilityMask is 0), must be what the speed both ends
run carries: LinkSpeedExtActive / FDR10 are never ignored. NDR is beyond this ibsim (0.10)
and is checked on the arithmetic alone (test_sources.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.fabric.mad import MadSource
from collector.fabric.topology import NodeType
from emulator.fattree import fat_tree
from emulator.ibsim import FabricSim
from tests.fabric.conftest import client_tool

#: 4x data capacity in bytes/s of each generation.
EXPECTED = {
    "QDR": 4_000_000_000,
    "FDR10": 5_000_000_000,
    "FDR": 6_818_181_818,
    "EDR": 12_500_000_000,
    "HDR": 25_000_000_000,
}
#: What iblinkinfo prints as each generation's active speed.
IBLINKINFO = {
    "QDR": "10.0 Gbps Active",
    "FDR10": "10.0 Gbps (FDR10)",
    "FDR": "14.0625 Gbps",
    "EDR": "25.78125 Gbps",
    "HDR": "53.125 Gbps",
}


@pytest.mark.parametrize("speed", list(EXPECTED))
def test_capacity_is_the_speed_both_ends_run(speed: str, scratch_root: Path):
    tree = fat_tree(8, speed=speed)
    with (
        FabricSim(tree, scratch_root / f"speed-{speed}") as sim,
        MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1) as mad,
    ):
        topo = mad.discover()
        connected = [p for e, p in topo.ports.items() if topo.remote(e)]
        switch_ports = [p for p in connected if topo.nodes[p.guid].type == NodeType.SWITCH]
        assert len(connected) == 2 * len(tree.links) and len(switch_ports) > len(tree.hosts)
        assert {p.capacity_bytes_per_s for p in connected} == {EXPECTED[speed]}
        # The management tools agree on the speed every link runs.
        out = client_tool(sim, "iblinkinfo", "--switches-only")
        speeds = [ln for ln in out.splitlines() if "==(" in ln]
        assert len(speeds) == 2 * len(tree.links) - len(tree.hcas)  # every switch port
        assert all(IBLINKINFO[speed] in ln for ln in speeds), speeds[:2]
