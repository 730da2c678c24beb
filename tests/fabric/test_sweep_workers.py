"""Parallel MAD sweeps against the running simulator: a dead or stuck worker fails only the
sweep it was part of (by the deadline), is restarted by the next one, and stop cleans up."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from collector.fabric.mad import MadError, MadSource
from collector.fabric.topology import NodeType
from emulator.ibsim import FabricSim


def _attached_pids(sim: FabricSim) -> set[int]:
    """Process ids of the simulator's connected clients."""
    out = sim.console(["Attached"], output=True)
    return {int(pid) for pid in re.findall(r"Client \d+: pid (\d+) connected", out)}


def test_dead_or_stuck_worker_does_not_hang_the_sweep(sim: FabricSim):
    src = MadSource(
        # A deadline healthy workers meet even on a loaded 2-core machine.
        env=sim.client_env(),
        workdir=sim.workdir,
        sweep_workers=3,
        request_timeout_s=3.0,
    )
    try:
        topo = src.discover()
        targets = [t for t in topo.sweep_targets() if topo.nodes[t[0]].type == NodeType.SWITCH]
        assert len(src.sweep(targets)) == len(targets)
        first = src.last_sweep_pids
        assert len(set(first)) == 3

        os.kill(first[1], signal.SIGKILL)  # a crashed worker
        # Seen during the next sweep (EOF at once: that sweep fails) or, if its process has
        # already been reaped, before it (restarted for it): never a hang, and then it works.
        try:
            src.sweep(targets)
        except MadError as error:
            assert "exited" in str(error)
        assert len(src.sweep(targets)) == len(targets)  # restarted
        second = src.last_sweep_pids
        assert second[0] == first[0] and second[2] == first[2] and second[1] != first[1]

        os.kill(second[2], signal.SIGSTOP)  # a wedged worker: killed at the deadline
        t0 = time.monotonic()
        with pytest.raises(MadError, match="in time"):
            src.sweep(targets)
        assert 3.0 <= time.monotonic() - t0 < 6.0
        with pytest.raises(ProcessLookupError):
            os.kill(second[2], 0)
        sweep = src.sweep(targets)  # the healthy workers' replies were read: no stale reply
        assert len(sweep) == len(targets)
        assert src.last_sweep_pids[:2] == second[:2]
        live = src.last_sweep_pids
    finally:
        src.close()
    for pid in live:  # every worker exited and released its simulator client
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not set(live) & _attached_pids(sim)
    sim.free_stale_clients()  # the two killed workers' clients
