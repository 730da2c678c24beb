"""Fabric fixtures: one ibsim simulator of a 32-host fat tree per session, cleaned up always.

The simulator gets a unique IBSIM_SOCKNAME and a FIFO console; `opensm -o` brings the
subnet up once. Every client tool runs under `timeout -s KILL` in the scratch directory
(umad2sim creates ./sys-<pid> there).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.fabric.mad import MadSource
from emulator.fattree import FatTree, fat_tree
from emulator.ibsim import FabricSim


def _have_simulator() -> bool:
    return all(shutil.which(t) for t in ("ibsim", "opensm", "perfquery"))


@pytest.fixture(scope="session")
def tree() -> FatTree:
    """The generated 32-host fat tree with two storage nodes."""
    return fat_tree(32, storage=2)


@pytest.fixture(scope="session")
def sim(tree: FatTree, scratch_root: Path) -> Iterator[FabricSim]:
    """The running simulator (stopped at session end, also on failure)."""
    if not _have_simulator():
        pytest.skip("ibsim/opensm/infiniband-diags not installed (make setup installs them)")
    simulator = FabricSim(tree, scratch_root / "ibsim")
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture(scope="session")
def mad(sim: FabricSim) -> Iterator[MadSource]:
    """A MAD source attached to the simulator's first host, sweeping in one worker.

    One worker keeps the management traffic of a sweep cycle identical on every port from
    cycle to cycle (the exact-delta tests rely on it); with several, the workers' MADs
    interleave differently each time around each port's read.
    """
    source = MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1)
    try:
        yield source
    finally:
        source.close()


def client_tool(sim: FabricSim, *argv: str, timeout: int = 10) -> str:
    """Run an infiniband-diags tool against the simulator; its stdout."""
    import os

    done = subprocess.run(
        ["timeout", "-s", "KILL", str(timeout), *argv],
        env={**os.environ, **sim.client_env()},
        cwd=sim.workdir,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout
