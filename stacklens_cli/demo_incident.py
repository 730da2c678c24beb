"""The incident `stacklens demo` stages on its simulated fabric, again every few minutes.

Two jobs (examples/incident_job.c) share a spine link of the 32-host fat tree:
`demo-solver` (ranks on host01 and host09: a collective and a ring exchange every
iteration) and `demo-checkpoint` (host02 and host09: 4 MiB exchanges, and MPI-IO checkpoint
writes while the incident lasts). Both jobs' traffic from leaf01 to host09 crosses the same
spine and the same spine -> leaf02 link (the forwarding tables send one destination LID
one way); that link is found from the stored forwarding tables once the fabric is
discovered. After BASELINE_S seconds of normal running (the jobs' own baselines), for
INCIDENT_S seconds the demo
- raises the spine port's PortXmitWait by WAIT_PER_S ticks every second (the simulator's
  console: the link is congested), and
- once the sampler has stored a sweep with those ticks, creates the jobs' flag file: the
  solver's rank 0 arrives 200 ms late at every collective (its data is stuck behind the link), so
  the solver's collective time per byte rises, while the checkpoint job writes its
  checkpoints;
then everything is normal again for QUIET_S seconds, and the cycle repeats.

The detectors then open an incident within 2 sweeps: congestion on that link, the
checkpoint job (the most bytes on it) the likely aggressor, the solver the victim.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from stacklens.paths import EXAMPLES_DIR
from stacklens.settings import ConfigError, Settings
from stacklens_cli import services

SOLVER_HOSTS = ("host01", "host09")
CHECKPOINT_HOSTS = ("host02", "host09")
BASELINE_S = 15.0
INCIDENT_S = 20.0
QUIET_S = 60.0
#: PortXmitWait ticks added per second while congested (the detector's default threshold
#: is 1,000,000 per second).
WAIT_PER_S = 5_000_000
#: PortXmitWait is a 32-bit counter that sticks at its maximum (then it reads saturated: a
#: congestion of its own). The demo starts it again from 0 before a cycle would peg it, as
#: an administrator's counter reset does (that sweep's delta reads unknown).
WAIT_MAX = 2**32 - 1
#: How long each job runs (it is started again if it ends before the demo does).
JOB_SECONDS = 3600


def job_command(role: str, hosts: tuple[str, ...], flag: Path, workdir: Path) -> list[str]:
    """The mpirun command of one demo job: a rank per host (STACKLENS_HOST), the job id."""
    program = EXAMPLES_DIR / "build" / "incident_job"
    if not program.is_file():
        raise FileNotFoundError(f"{program} is not built: run `make -C examples`")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise ConfigError("demo: mpirun not found (apt-get install openmpi-bin)")
    args = [str(program), role, str(JOB_SECONDS), str(flag)]
    args += [str(workdir)] if role == "checkpoint" else []
    contexts = [["-np", "1", "-x", f"STACKLENS_HOST={host}", "-x",
                 f"STACKLENS_JOB_ID=demo-{role}", *args] for host in hosts]  # fmt: skip
    # waiting ranks yield the CPU: on a loaded node a rank that spins in MPI starves the
    # other one of the same job, and its own baseline drowns in the spinning
    yielding = ["--mca", "mpi_yield_when_idle", "1"]
    return [mpirun, *yielding, *contexts[0], *(a for c in contexts[1:] for a in (":", *c))]


def shared_link(engine: Engine) -> tuple[str, int] | None:
    """(spine name, port) of the spine -> leaf hop both jobs' traffic to host09 crosses,
    from the stored forwarding tables; None until the fabric is stored."""
    from server.traffic.repository import load_fabric

    with Session(engine) as session:
        fab = load_fabric(session, "fixed")
    guid = {n["name"]: int(n["guid"], 16) for n in fab.nodes if n["type"] == "hca"}
    try:
        paths = [fab.router.path(guid[src], guid[SOLVER_HOSTS[1]])
                 for src in (SOLVER_HOSTS[0], CHECKPOINT_HOSTS[0])]  # fmt: skip
    except (KeyError, ValueError):  # not discovered yet, or no forwarding tables
        return None
    for stage in paths[0]:
        if len(stage) == 1 and stage in paths[1]:
            link_id, direction = stage[0]
            row = fab.links[link_id]
            sender = row["a"] if direction == "a_to_b" else row["b"]
            if sender["name"].startswith("spine"):
                return sender["name"], sender["port"]
    return None


def _port_wait(engine: Engine, node: str, port: int) -> int | None:
    """The newest stored PortXmitWait value of a port (None: none stored)."""
    from sqlalchemy import select

    from stacklens.schema import FabricNode, FabricPort, FabricPortLatest

    latest = FabricPortLatest.__table__
    with Session(engine) as session:
        query = (
            select(latest.c.xmit_wait)
            .join(FabricPort, FabricPort.id == latest.c.port_id)
            .join(FabricNode, FabricNode.guid == FabricPort.guid)
            .where(FabricNode.description == node, FabricPort.port == port)
        )
        value: int | None = session.scalars(query).first()
    return value


class StagedIncident:
    """Runs the two jobs and stages the incident (see the module)."""

    def __init__(self, settings: Settings, engine: Engine):
        self.settings = settings
        self.engine = engine
        self.workdir = settings.state_dir / "demo"
        self.flag = self.workdir / "incident"
        self.wait_value = 0

    def _console(self, command: str) -> None:
        from collector.fabric.service import sim_state_file

        state: dict[str, Any] = json.loads(sim_state_file(self.settings).read_text())
        with open(state["console"], "w") as console:
            console.write(command + "\n")

    def _newest_wait(self, node: str, port: int) -> int | None:
        return _port_wait(self.engine, node, port)

    async def run(self) -> None:
        """Run the jobs and stage the incident every cycle until cancelled."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.flag.unlink(missing_ok=True)
        jobs = [
            asyncio.create_task(services._loop_workload(
                self.settings, job_command(role, hosts, self.flag, self.workdir)))
            for role, hosts in (("solver", SOLVER_HOSTS), ("checkpoint", CHECKPOINT_HOSTS))
        ]  # fmt: skip
        try:
            link = None
            while link is None:
                link = await asyncio.to_thread(shared_link, self.engine)
                if link is None:
                    await asyncio.sleep(1.0)
            spine, port = link
            while True:
                await asyncio.sleep(BASELINE_S)
                print(f"demo: incident: congesting {spine}[{port}] (shared by demo-solver and "
                      f"demo-checkpoint) for {INCIDENT_S:g} s", flush=True)  # fmt: skip
                seen = await asyncio.to_thread(self._newest_wait, spine, port)
                if self.wait_value + INCIDENT_S * WAIT_PER_S > WAIT_MAX:
                    self.wait_value = 0
                for second in range(int(INCIDENT_S)):
                    self.wait_value += WAIT_PER_S
                    self._console(f'PerformanceSet "{spine}"[{port}] '
                                  f"PortCounters.PortXmitWait={self.wait_value}")  # fmt: skip
                    await asyncio.sleep(1.0)
                    # the solver slows once the congestion is in the stored sweeps (half way
                    # through at the latest)
                    if not self.flag.exists() and (
                        second >= INCIDENT_S / 2
                        or await asyncio.to_thread(self._newest_wait, spine, port) != seen
                    ):
                        self.flag.touch()
                self.flag.unlink(missing_ok=True)
                print("demo: incident: the link is quiet again", flush=True)
                await asyncio.sleep(QUIET_S - BASELINE_S)
        finally:
            self.flag.unlink(missing_ok=True)
            for task in jobs:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*jobs, return_exceptions=True)
