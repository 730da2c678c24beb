"""The fabric sampler as a startable service: discover, sweep, store, re-discover on change.

Like collector/service.py's CollectorService it has start()/stop() coroutines, so
`stacklens up` runs it next to the collector. The blocking source and database calls run
in a worker thread. Re-discovery happens every `rediscover_s` and as soon as a sweep
suggests a change (a port stopped answering, or a LinkDowned counter moved).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

from collector.fabric.counters import DeltaTracker
from collector.fabric.mad import MadSource
from collector.fabric.replay import ReplaySource
from collector.fabric.store import FabricStore
from collector.fabric.sysfs import SYSFS_ROOT, SysfsSource
from collector.fabric.topology import Topology
from collector.fabric.verbs import optional_verbs
from stacklens.constants import PORT_COUNTERS
from stacklens.settings import Settings

log = logging.getLogger(__name__)
_LINK_DOWNED = PORT_COUNTERS.index("link_downed")


def sim_state_file(settings: Settings) -> Path:
    """Where `stacklens fabric-sim` records how to attach to its simulator."""
    return settings.state_dir / "fabric-sim" / "sim.json"


def _running_sim(settings: Settings) -> dict | None:
    path = sim_state_file(settings)
    try:
        state = json.loads(path.read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state


def open_source(settings: Settings):
    """The counter source the settings ask for (None = fabric sampling off).

    `auto`: MAD through a running `stacklens fabric-sim`, else MAD on local HCAs if
    /sys/class/infiniband lists any, else off. MAD sweeps are split over
    `fabric_sweep_workers` worker processes (default min(4, CPU count)).
    """
    kind = settings.fabric_source
    if kind == "auto":
        local_hca = SYSFS_ROOT.is_dir() and any(SYSFS_ROOT.iterdir())
        if _running_sim(settings) is None and not local_hca:
            return None
        kind = "mad"
    if kind == "none":
        return None
    if kind == "sysfs":
        return SysfsSource(verbs=optional_verbs())
    if kind == "replay":
        if settings.fabric_replay_file is None:
            raise ValueError("STACKLENS_FABRIC_SOURCE=replay needs STACKLENS_FABRIC_REPLAY_FILE")
        return ReplaySource(settings.fabric_replay_file)
    workers = settings.fabric_sweep_workers
    sim = _running_sim(settings)
    if sim is not None:
        return MadSource(env=sim["env"], workdir=Path(sim["workdir"]), sweep_workers=workers)
    return MadSource(sweep_workers=workers)


class FabricSampler:
    """Periodic topology discovery and counter sweeps from one source into the database."""

    def __init__(self, database_url: str, source, interval_s: float, rediscover_s: float):
        self.source = source
        self.store = FabricStore(database_url)
        self.interval_s = interval_s
        self.rediscover_s = rediscover_s
        self.tracker = DeltaTracker()
        self.topology: Topology | None = None
        self.sweeps = 0
        self.errors = 0
        self._task: asyncio.Task | None = None
        self._last_discovery = 0.0

    async def start(self) -> None:
        """Start the sampling loop."""
        self._task = asyncio.create_task(self._run(), name="stacklens-fabric-sampler")

    async def stop(self) -> None:
        """Stop the loop, the source and the database connection."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
        self.store.close()

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await asyncio.to_thread(self.step)
            except EOFError:
                log.info("fabric source exhausted; sampling stops")
                return
            except Exception as exc:  # keep sampling: a failed sweep must not stop the service
                self.errors += 1
                log.error("fabric sweep failed: %s", exc)
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))

    def discover(self) -> None:
        """Discover (if the source can), store the topology and its changes as events."""
        topo = self.source.discover()
        self._last_discovery = time.monotonic()
        if topo is None:
            return
        changes = self.topology.diff(topo) if self.topology is not None else []
        for change in changes:
            log.warning("fabric %s: %s", change.kind, change.subject)
        self.store.write_topology(topo, time.time_ns(), changes)
        self.tracker.forget(set(topo.ports))
        self.topology = topo

    def step(self) -> None:
        """One sampling step: re-discover when due, sweep, store the samples."""
        if self.topology is None or time.monotonic() - self._last_discovery >= self.rediscover_s:
            self.discover()
        sweep = self.source.sweep()
        if self.topology is None:
            self.store.ensure_ports(sweep, time.time_ns())
        deltas = self.tracker.update(sweep)
        self.store.write_samples(deltas)
        self.sweeps += 1
        expected = len(self.topology.sweep_targets()) if self.topology else len(sweep)
        link_downed = deltas.known[:, _LINK_DOWNED] & (deltas.deltas[:, _LINK_DOWNED] > 0)
        if self.topology is not None and (len(sweep) < expected or link_downed.any()):
            self.discover()


def fabric_services(database_url: str, settings: Settings) -> list[FabricSampler]:
    """The fabric sampler for `stacklens up`, or nothing when fabric sampling is off."""
    source = open_source(settings)
    if source is None:
        return []
    return [
        FabricSampler(
            database_url,
            source,
            settings.fabric_interval_ms / 1000,
            settings.fabric_rediscover_s,
        )
    ]
