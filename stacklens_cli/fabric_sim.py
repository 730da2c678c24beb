"""`stacklens fabric-sim`: run the InfiniBand fabric emulator until stopped.

stacklens fabric-sim --hosts 32 --storage 2      simulator + job traffic, synthetic I/O, noise
stacklens fabric-sim --console 'Unlink "leaf02"[9]'   a console command to the running one

Every interval the emulator moves the simulated counters by the traffic of running jobs
(their per-interval point-to-point and file I/O deltas, read from the stacklens database;
ranks are placed on simulated hosts with STACKLENS_HOST; see emulator/jobtraffic.py),
plus synthetic I/O from every host to the storage nodes and random background noise. The
database is STACKLENS_DATABASE_URL, or the embedded one of the state directory once
`stacklens up` runs it (read only from its postmaster.pid: the emulator never owns it).

The running emulator records how to attach in <state_dir>/fabric-sim/sim.json, which
`stacklens up` (STACKLENS_FABRIC_SOURCE=auto) uses to sample it over MADs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from stacklens.settings import ConfigError, Settings
from stacklens_cli.helptext import subcommand

if TYPE_CHECKING:
    from emulator.jobtraffic import JobTraffic

log = logging.getLogger(__name__)


#: The line for a simulator that is not installed.
MISSING_SIMULATOR = (
    "fabric-sim: {tools} not installed: install the InfiniBand simulator "
    "(`make setup` does; or apt-get install ibsim-utils opensm libumad2sim0)"
)

#: What `--console` can send (ibsim's console commands), for `stacklens fabric-sim --help`.
CONSOLE_HELP = """--console sends one command to the running simulator's console, e.g.:
  Unlink "leaf02"[9]          take a link down (both ends)
  ReLink "leaf02"[9]          bring it back
  Error "leaf04"[9] 50        make a port drop MADs
  PerformanceSet "leaf02"[9] PortCounters.SymbolErrorCounter=5
                              set a port counter (also PortCountersExtended.*)
Names are the simulated nodes: host01..., leaf01..., spine01..., stor01...
`stacklens up` samples it (STACKLENS_FABRIC_SOURCE=auto)."""


def add_parser(sub) -> None:
    """Register the `fabric-sim` subcommand on the CLI's subparsers."""
    p = subcommand(
        sub, "fabric-sim",
        "Run a simulated InfiniBand fat tree (ibsim + opensm) whose counters move with the "
        "traffic of the jobs in the database, until Ctrl-C.",
        ["stacklens fabric-sim --hosts 32",
         "stacklens fabric-sim --console 'Unlink \"leaf02\"[9]'  # a link goes down"],
        CONSOLE_HELP,
    )  # fmt: skip
    p.add_argument("--hosts", type=int, default=32, help="compute hosts of the fat tree")
    p.add_argument("--storage", type=int, default=2, help="storage nodes (I/O targets)")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS")
    p.add_argument(
        "--io-bytes", type=int, default=4 << 20, help="bytes per host per interval to storage"
    )
    p.add_argument("--noise", type=int, default=8, help="random background flows per interval")
    p.add_argument(
        "--no-jobs",
        dest="jobs",
        action="store_false",
        help="do not emulate the traffic of the jobs in the database",
    )
    p.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS")
    p.add_argument("--console", metavar="COMMAND", help="send a console command and exit")
    p.set_defaults(func=cmd_fabric_sim)


def cmd_fabric_sim(settings: Settings, args: argparse.Namespace) -> int:
    """Run the emulator (or send one console command to the running one)."""
    from collector.fabric.mad import MadSource
    from collector.fabric.service import sim_state_file
    from emulator.fattree import fat_tree
    from emulator.ibsim import FabricSim, TrafficEmulator, io_flows, noise_flows

    state_file = sim_state_file(settings)
    if args.console:
        if not state_file.exists():
            raise ConfigError("fabric-sim: no simulated fabric is running (start one with "
                              "`stacklens fabric-sim --hosts 32`)")  # fmt: skip
        state = json.loads(state_file.read_text())
        with open(state["console"], "w") as console:
            console.write(args.console + "\n")
        return 0
    missing = [tool for tool in ("ibsim", "opensm") if shutil.which(tool) is None]
    if missing:
        raise ConfigError(MISSING_SIMULATOR.format(tools=" and ".join(missing)))
    tree = fat_tree(args.hosts, storage=args.storage)
    workdir = state_file.parent / "run"
    stop = False

    def _stop(*_) -> None:
        nonlocal stop
        stop = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    rng = random.Random(0)
    jobs = _JobFeed(settings, tree.hosts, tree.storage) if args.jobs else None
    with FabricSim(tree, workdir) as sim, MadSource(env=sim.client_env(), workdir=workdir) as src:
        emu = TrafficEmulator(sim, src)
        sim.write_state(state_file)
        print(
            f"fabric-sim: {len(tree.hosts)} hosts, {len(tree.storage)} storage nodes, "
            f"{len(tree.switches)} switches; console {sim.fifo}",
            flush=True,
        )
        end = time.monotonic() + args.duration if args.duration is not None else None
        try:
            while not stop and (end is None or time.monotonic() < end):
                started = time.monotonic()
                flows = jobs.poll() if jobs is not None else []
                flows += io_flows(tree.hosts, tree.storage, args.io_bytes // 4 * 4, rng)
                flows += noise_flows(tree.hcas, args.noise, 1 << 20, rng)
                emu.apply(flows)
                sim.free_stale_clients()
                time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        finally:
            if jobs is not None:
                jobs.close()
            with contextlib.suppress(FileNotFoundError):
                state_file.unlink()
    return 0


class _JobFeed:
    """JobTraffic on the stacklens database, once it can be reached; no flows until then."""

    def __init__(self, settings: Settings, hosts: list[str], storage: list[str]):
        self.settings = settings
        self.hosts = hosts
        self.storage = storage
        self.since_ns = time.time_ns()  # jobs' traffic from before the emulator is past
        self.traffic: JobTraffic | None = None
        self._warned = False

    def _url(self) -> str | None:
        from stacklens.db import libpq_url, running_embedded_url

        if self.settings.database_url:
            return libpq_url(self.settings.database_url)
        return running_embedded_url(self.settings.state_dir / "pg")

    def poll(self) -> list:
        """The flows of the job traffic stored since the last poll."""
        import psycopg

        from emulator.jobtraffic import JobTraffic

        if self.traffic is None:
            url = self._url()
            if url is None:
                return []
            self.traffic = JobTraffic(url, self.hosts, self.storage, since_ns=self.since_ns)
        try:
            flows = self.traffic.poll()
        except psycopg.errors.UndefinedTable:  # `up` has not migrated it yet: no jobs yet
            log.debug("fabric-sim: the database has no job tables yet")
            return []
        except psycopg.Error as exc:  # not up yet: try again next interval
            self.traffic.url = self._url() or self.traffic.url  # a restarted server moves
            if not self._warned:
                log.warning("fabric-sim: cannot read job traffic yet: %s", exc)
                self._warned = True
            return []
        self._warned = False
        return flows

    def close(self) -> None:
        """Close the database connection."""
        if self.traffic is not None:
            self.traffic.close()


def placed_hosts(hosts: int, ranks: int) -> list[str]:
    """Simulated hosts for `ranks` ranks, spread evenly over a `hosts`-host fat tree."""
    from emulator.fattree import fat_tree

    names = fat_tree(hosts).hosts
    if not 0 < ranks <= len(names):
        raise ValueError(f"cannot place {ranks} ranks on {len(names)} simulated hosts")
    return names[:: len(names) // ranks][:ranks]


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the parent dies (Linux PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


@contextlib.contextmanager
def background(settings: Settings, hosts: int, timeout: float = 60.0) -> Iterator[bool]:
    """Run `stacklens fabric-sim --hosts N` in a child process for the duration of the block.

    Yields True once the simulated subnet is up (its state file is written), False if the
    simulator could not start (a warning says why). At the end the child gets SIGTERM and
    stops its simulator; one that does not exit in time is killed with its ibsim. The
    child also gets SIGTERM if this process dies first.
    """
    from collector.fabric.service import sim_state_file

    state_file = sim_state_file(settings)
    with contextlib.suppress(FileNotFoundError):
        state_file.unlink()  # left by a killed run
    proc = subprocess.Popen(
        [sys.executable, "-m", "stacklens_cli", "fabric-sim", "--hosts", str(hosts)],
        start_new_session=True,  # the terminal's Ctrl-C goes to us; we stop it in order
        preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + timeout
        while not state_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        up = state_file.exists() and proc.poll() is None
        if not up:
            log.warning("fabric-sim did not start (see its output); continuing without fabric")
        yield up
    finally:
        _stop(proc, state_file)


def _stop(proc: subprocess.Popen, state_file) -> None:
    """SIGTERM the fabric-sim child; SIGKILL it and its simulator if it does not exit."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
        return
    except subprocess.TimeoutExpired:
        pass
    ibsim = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        ibsim = int(json.loads(state_file.read_text())["pid"])
    proc.kill()
    proc.wait()
    if ibsim is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ibsim, signal.SIGKILL)  # ibsim leads its own process group
