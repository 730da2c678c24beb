"""`stacklens fabric-sim`: run the InfiniBand fabric emulator until stopped.

stacklens fabric-sim --hosts 32 --storage 2      simulator + synthetic I/O and noise
stacklens fabric-sim --console 'Unlink "leaf02"[9]'   a console command to the running one

The running emulator records how to attach in <state_dir>/fabric-sim/sim.json, which
`stacklens up` (STACKLENS_FABRIC_SOURCE=auto) uses to sample it over MADs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import time

from stacklens.settings import Settings


def add_parser(sub) -> None:
    """Register the `fabric-sim` subcommand on the CLI's subparsers."""
    p = sub.add_parser("fabric-sim", help="run the simulated InfiniBand fabric (ibsim)")
    p.add_argument("--hosts", type=int, default=32)
    p.add_argument("--storage", type=int, default=2, help="storage nodes (I/O targets)")
    p.add_argument("--interval", type=float, default=1.0, metavar="SECONDS")
    p.add_argument(
        "--io-bytes", type=int, default=4 << 20, help="bytes per host per interval to storage"
    )
    p.add_argument("--noise", type=int, default=8, help="random background flows per interval")
    p.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS")
    p.add_argument("--console", metavar="COMMAND", help="send a console command and exit")
    p.set_defaults(func=cmd_fabric_sim)


def cmd_fabric_sim(settings: Settings, args: argparse.Namespace) -> int:
    """Run the emulator (or send one console command to the running one)."""
    from collector.fabric.mad import MadSource
    from collector.fabric.service import sim_state_file
    from collector.fabric.sim import FabricSim, TrafficEmulator, io_flows, noise_flows
    from collector.fabric.simnet import fat_tree

    state_file = sim_state_file(settings)
    if args.console:
        state = json.loads(state_file.read_text())
        with open(state["console"], "w") as console:
            console.write(args.console + "\n")
        return 0
    tree = fat_tree(args.hosts, storage=args.storage)
    workdir = state_file.parent / "run"
    stop = False

    def _stop(*_) -> None:
        nonlocal stop
        stop = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stop)
    rng = random.Random(0)
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
                flows = io_flows(tree.hosts, tree.storage, args.io_bytes // 4 * 4, rng)
                flows += noise_flows(tree.hcas, args.noise, 1 << 20, rng)
                emu.apply(flows)
                sim.free_stale_clients()
                time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        finally:
            with contextlib.suppress(FileNotFoundError):
                state_file.unlink()
    return 0
