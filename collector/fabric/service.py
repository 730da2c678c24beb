"""The fabric sampler as a startable service: attach, discover, sweep, store, re-discover.

Like collector/service.py's CollectorService it has start()/stop() coroutines, so
`stacklens up` runs it next to the collector. The blocking source and database calls run
in a worker thread. What to sample is looked for again before every step
(`SourceFinder`): a fabric that appears after `up` started (a simulator started later)
is picked up, and a restarted simulator is attached to afresh. Re-discovery happens
every `rediscover_s`, as soon as a sweep suggests a change (a port newly stopped
answering, a LinkDowned counter moved, or a probed port came back), and after a failed
sweep (a restarted fabric or MAD layer). A link up before and after a re-discovery whose
LinkDowned counter moved went down and came back between two sweeps: it is stored as a
closed link_down over that interval (a flap faster than a sweep is still an event).
Every sweep also probes the PortInfo state of every switch port without a link (the
switch ends of the links that are down, whichever end was pulled, and ports never
cabled; not ports an administrator disabled) and of one end of every link between two
switches (which can go down with every port still answering): a cable that is back,
pulled, or plugged in for the first time is seen in the sweep after it, not at the next
periodic re-discovery. (An HCA's end of a link that is down cannot be reached through
the fabric; its switch end tells. The probes ride in the sweep's pipelined MAD pass, a
small SMP each.) A port that misses `missed_sweeps` sweeps in a row loses its newest
sample: its load and errors read unknown, never the last ones seen. Warnings are rate-
limited per kind. What a step finds is stored by the sampler's SweepWriter
(collector/fabric/writer.py), off the sweep schedule once the loop runs: a slow database
delays the storing, never the next sweep (sweeps waiting are bounded; one dropped when
more wait is counted and logged).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from collector.fabric.counters import DeltaTracker, PortState
from collector.fabric.mad import MadSource
from collector.fabric.replay import ReplaySource
from collector.fabric.store import FabricStore
from collector.fabric.sysfs import SYSFS_ROOT, SysfsSource
from collector.fabric.topology import PHYS_DISABLED, PORT_DOWN, End, NodeType, Topology
from collector.fabric.verbs import optional_verbs
from collector.fabric.writer import DEFAULT_PENDING, SweepWriter
from stacklens.constants import PORT_COUNTERS
from stacklens.settings import Settings
from stacklens.timings import Timings

log = logging.getLogger(__name__)
_LINK_DOWNED = PORT_COUNTERS.index("link_downed")
#: What a SourceFinder names: its first item is the kind ("sim", "mad", "sysfs", "replay").
SourceKey = tuple[object, ...]
#: Seconds between two warnings of the same kind (the ones between are counted).
WARN_EVERY_S = 10.0


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


class RateLimitedLog:
    """Warnings at most once per `every_s` per kind; the next one says how many were held."""

    def __init__(self, every_s: float = WARN_EVERY_S):
        self.every_s = every_s
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, kind: str, message: str, *args: object) -> bool:
        """Log `message % args` unless a `kind` warning was logged less than every_s ago
        (then count it); whether it was logged."""
        now = time.monotonic()
        if now - self._last.get(kind, -self.every_s) < self.every_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        held = self._held.pop(kind, 0)
        suffix = f" ({held} more like it in the last {self.every_s:g} s)" if held else ""
        log.warning(message + suffix, *args)
        self._last[kind] = now
        return True


class SourceFinder:
    """Which counter source the settings ask for now, and opening it.

    `auto`: MAD through a running `stacklens fabric-sim` (its state file), else MAD on
    local HCAs if /sys/class/infiniband lists any, else nothing (yet). `key()` names what
    is there now: it changes when a simulator starts, stops or is restarted. MAD sweeps are
    split over `fabric_sweep_workers` worker processes (default min(4, CPU count)).
    """

    def __init__(self, settings: Settings):
        self.settings = settings

    def key(self) -> SourceKey | None:
        """What would be sampled now (None: nothing to sample)."""
        kind = self.settings.fabric_source
        if kind == "none":
            return None
        if kind in ("sysfs", "replay"):
            return (kind,)
        sim = _running_sim(self.settings)
        if sim is not None:
            return ("sim", sim["pid"], sim["env"].get("IBSIM_SOCKNAME"), sim["workdir"])
        local_hca = SYSFS_ROOT.is_dir() and any(SYSFS_ROOT.iterdir())
        return ("mad",) if kind == "mad" or local_hca else None

    def open(self):
        """The source for what `key()` names now (None: nothing to sample)."""
        key = self.key()
        if key is None:
            return None
        if key[0] == "sysfs":
            return SysfsSource(verbs=optional_verbs())
        if key[0] == "replay":
            if self.settings.fabric_replay_file is None:
                raise ValueError(
                    "STACKLENS_FABRIC_SOURCE=replay needs STACKLENS_FABRIC_REPLAY_FILE"
                )
            return ReplaySource(self.settings.fabric_replay_file)
        workers = self.settings.fabric_sweep_workers
        sim = _running_sim(self.settings)
        if key[0] == "sim" and sim is not None:
            return MadSource(env=sim["env"], workdir=Path(sim["workdir"]), sweep_workers=workers)
        return MadSource(sweep_workers=workers)


def open_source(settings: Settings):
    """The counter source the settings ask for now (None = nothing to sample)."""
    return SourceFinder(settings).open()


class FabricSampler:
    """Periodic topology discovery and counter sweeps from one source into the database.

    `source` is sampled as given; with `finder`, the source is (re)opened whenever the
    finder's key changes (checked before every step), and the sampler starts afresh
    (topology, counter memory) on the new one. `store_queue`: sweeps that may wait to be
    stored (`writer`) before the oldest waiting one is dropped.
    """

    def __init__(
        self,
        database_url: str,
        source,
        interval_s: float,
        rediscover_s: float,
        min_sample_s: float = 0.0,
        missed_sweeps: int = 3,
        finder: SourceFinder | None = None,
        store_queue: int = DEFAULT_PENDING,
    ):
        self.source = source
        self.finder = finder
        self._key: SourceKey | None = finder.key() if finder and source is not None else None
        self.store = FabricStore(database_url)
        self.interval_s = interval_s
        self.rediscover_s = rediscover_s
        self.min_sample_ns = int(min_sample_s * 1e9)
        self.missed_sweeps = missed_sweeps
        self.tracker = DeltaTracker(self.min_sample_ns)
        self.topology: Topology | None = None
        self.sweeps = 0
        self.discoveries = 0
        self.errors = 0
        #: sampling steps that took longer than the period, so the next began late (/metrics)
        self.behind = 0
        self.attached = 0  # sources opened by the finder
        self.warnings = RateLimitedLog()
        self.writer = SweepWriter(self.store, self.warnings, store_queue)
        #: sweeps in a row each port of the topology did not answer
        self.missed: dict[End, int] = {}
        #: switch ports without a link (the switch ends of links that are down, and ports
        #: never cabled; not those disabled by an administrator), probed every sweep:
        #: their PortState as last probed (PORT_DOWN until a probe says otherwise)
        self.down: dict[End, int] = {}
        #: one end of every link between two switches, probed every sweep (such a link can
        #: go down with both switches still answering): its PortState as last probed
        self.watched: dict[End, int] = {}
        #: durations of the sweeps (read, deltas, handing the samples to the writer) and of
        #: the discoveries (/metrics)
        self.sweep_timings = Timings()
        self.discovery_timings = Timings()
        #: ports that answered, and ports of the topology that did not, over all sweeps
        self.ports_answered = 0
        self.ports_failed = 0
        self._task: asyncio.Task | None = None
        self._last_discovery = 0.0

    async def start(self) -> None:
        """Start the writer's thread and the sampling loop."""
        self.writer.start()
        self._task = asyncio.create_task(self._run(), name="stacklens-fabric-sampler")

    async def stop(self) -> None:
        """Stop the loop, store what waits, stop the source and the database connection."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self.writer.stop)
        await asyncio.to_thread(self._close)

    def _close_source(self) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
        self.source = None

    def _close(self) -> None:
        self._close_source()
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
                self.topology = None  # a restarted fabric or MAD layer: discover afresh
                self.warnings.warning("sweep", "fabric sweep failed: %s", exc)
            elapsed = time.monotonic() - started
            self.behind += elapsed > self.interval_s
            await asyncio.sleep(max(0.0, self.interval_s - elapsed))

    def attach(self) -> bool:
        """With a finder: (re)open the source if what is there changed; whether there is a
        source to sample."""
        if self.finder is None:
            return self.source is not None
        key = self.finder.key()
        if key != self._key or (key is not None and self.source is None):
            self._close_source()
            self.topology = None
            self.tracker = DeltaTracker(self.min_sample_ns)
            self.missed = {}
            self.down, self.watched = {}, {}
            self._key = key
            if key is not None:
                self.source = self.finder.open()
                self.attached += 1
                log.info("fabric sampler attached to %s", key[0])
        return self.source is not None

    def discover(self, downed: dict[End, int] | None = None) -> None:
        """Discover (if the source can), store the topology and its changes as events;
        `downed`: the ends whose LinkDowned counter moved in the last sweep (end -> their
        previous sample's time): those of links up before and after bounced in between."""
        started = time.monotonic()
        topo = self.source.discover()
        self._last_discovery = time.monotonic()
        self.discovery_timings.observe(self._last_discovery - started)
        self.discoveries += 1
        if topo is None:
            return
        changes = []
        if self.topology is not None:
            changes = self.topology.diff(topo) + self.topology.bounces(topo, downed or {})
        for change in changes:
            self.warnings.warning(change.kind, "fabric %s: %s", change.kind, change.subject)
        self.writer.run(self.store.write_topology, topo, time.time_ns(), changes)
        self.tracker.forget(set(topo.ports))
        self.missed = {e: n for e, n in self.missed.items() if e in topo.ports}
        self.down = {
            e: self.down.get(e, PORT_DOWN)
            for e, port in sorted(topo.ports.items())
            if e[1] > 0
            and topo.remote(e) is None
            and topo.nodes[e[0]].type == NodeType.SWITCH
            and port.phys_state != PHYS_DISABLED
            and topo.port_lid(e)
        }
        switches = {g for g, n in topo.nodes.items() if n.type == NodeType.SWITCH}
        self.watched = {
            lk.a: self.watched.get(lk.a, topo.ports[lk.a].state)
            for lk in topo.links
            if lk.a[0] in switches and lk.b[0] in switches and topo.port_lid(lk.a)
        }
        self.topology = topo

    def step(self) -> None:
        """One sampling step: attach, re-discover when due, sweep (and probe the down
        ports), store the samples, retire the newest samples of ports that stopped
        answering, re-discover at once when the sweep suggests a change. The database work
        is handed to the writer."""
        if not self.attach():
            return
        if self.writer.take_failed():
            self.topology = None  # what the store knows is in doubt: write it afresh
        if self.topology is None or time.monotonic() - self._last_discovery >= self.rediscover_s:
            self.discover()
        started = time.monotonic()
        topo = self.topology
        ends = [*self.down, *self.watched] if topo else []
        probes = [(g, p, topo.port_lid((g, p))) for g, p in ends] if topo else []
        sweep = self.source.sweep(probes=probes) if probes else self.source.sweep()
        deltas = self.tracker.update(sweep)
        # a source without topology (sysfs, replay): its ports are registered as they come
        self.writer.samples(deltas, register=self.topology is None)
        self.sweep_timings.observe(time.monotonic() - started)
        self.sweeps += 1
        self.ports_answered += len(sweep.guids)
        if self.topology is None:
            return
        answered = set(zip(sweep.guids.tolist(), sweep.ports.tolist(), strict=True))
        newly_missing = self._count_misses(answered)
        moved = deltas.known[:, _LINK_DOWNED] & (deltas.deltas[:, _LINK_DOWNED] > 0)
        downed = {
            (int(deltas.raw.guids[i]), int(deltas.raw.ports[i])): int(
                deltas.raw.t_end_ns - deltas.dt_ns[i]
            )
            for i in np.flatnonzero(moved)
        }
        crossed = self._probed(sweep.port_states)
        if newly_missing or downed or crossed:
            self.discover(downed)

    def _probed(self, states: dict[End, PortState]) -> int:
        """Take the probed ports' states; how many crossed the Down line since their last
        probe (a down link's cable is back, or a watched link went down: the re-discovery
        shows it)."""
        crossed = 0
        for end, probed in states.items():
            for known in (self.down, self.watched):
                if end in known:
                    crossed += (known[end] == PORT_DOWN) != (probed.state == PORT_DOWN)
                    known[end] = probed.state
        return crossed

    @property
    def stale_ports(self) -> int:
        """Ports silent for `missed_sweeps` sweeps or more: their load reads unknown."""
        return sum(n >= self.missed_sweeps for n in self.missed.values())

    def _count_misses(self, answered: set[End]) -> int:
        """Count the sweep's silent ports; those at `missed_sweeps` misses lose their newest
        sample (unknown from now on). How many ports stopped answering in this sweep."""
        assert self.topology is not None
        missing = [(g, p) for g, p, _ in self.topology.sweep_targets() if (g, p) not in answered]
        self.ports_failed += len(missing)
        newly = 0
        for end in missing:
            self.missed[end] = self.missed.get(end, 0) + 1
            newly += self.missed[end] == 1
        for end in [e for e in self.missed if e in answered]:
            del self.missed[end]
        retire = [e for e in missing if self.missed[e] == self.missed_sweeps]
        if retire:
            self.writer.run(self.store.forget_latest, retire)
            self.warnings.warning(
                "silent",
                "fabric: %d port(s) silent for %d sweeps, their load is unknown now (e.g. %s)",
                len(retire),
                self.missed_sweeps,
                self.topology.describe(retire[0]),
            )
        return newly


def fabric_services(database_url: str, settings: Settings) -> list[FabricSampler]:
    """The fabric sampler for `stacklens up` (none when fabric sampling is off): it samples
    whatever fabric the settings find, now or once one appears."""
    if settings.fabric_source == "none":
        return []
    finder = SourceFinder(settings)
    return [
        FabricSampler(
            database_url,
            None,
            settings.fabric_interval_ms / 1000,
            settings.fabric_rediscover_s,
            min_sample_s=settings.fabric_min_sample_ms / 1000,
            missed_sweeps=settings.fabric_missed_sweeps,
            finder=finder,
            store_queue=settings.fabric_store_queue,
        )
    ]
