"""Multi-rail truth on the simulator (issue #27 points 3 and 4): a rail-optimised fabric of
4 hosts with two HCAs each ("hostNN mlx5_0" on leaf01, "hostNN mlx5_1" on leaf02, the
planes sharing two spines; emulator/fattree.py `rails=2`) under ibsim and opensm, swept by
the real sampler into the test database, judged by the real incident service.

Load is set with the simulator's console on the HCA side of host02's rails: after each
sweep, the HCA port's PortXmitData is set to the value that sweep read plus the bytes of
the next interval, so the next sweep's delta of that direction is exactly those bytes
(the HCA transmits nothing else but its answers to the sampler's own queries, sent after
it has read its counters). One rail forced (all of host02's bytes on mlx5_0) opens an
`imbalance` incident on "rails of host02" at the second skewed sweep, never at the first,
and it ends after the clear sweeps; the same bytes on both rails open nothing; the group's
member loads over the window equal the bytes set, exactly.

Then jobs (tests/fabric/rail_job.py) under Open MPI and MPICH, their ranks bound to rails
as stacklens/rails.py models the libraries' choice: pinned by UCX_NET_DEVICES (Open MPI's
pml ucx and MPICH's ch4:ucx, the device these MPIs were built with, read it alike), else
rail (local rank mod rails): MPICH ch4:ofi's preferred NIC, Intel MPI's pinning, the
usual UCX wrapper. The emulator moves the simulated counters by the same binding, so
these check the binding end to end (hooks, ingest, attribution, detector) under both
launchers, not which NIC a real MPI would open.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.fattree import FatTree, fat_tree
from emulator.ibsim import FabricSim, TrafficEmulator, port_ref
from emulator.jobtraffic import JobTraffic
from server.app import create_app
from server.incidents.detect import Thresholds
from server.incidents.service import IncidentService
from stacklens.db import make_engine
from tests.conftest import mpi_env, query
from tests.fabric.conftest import _have_simulator

#: The detectors' thresholds here: utilisation 0.5 (a member at or above, the other below
#: 0.25), two sweeps, three to clear; a congestion reported once it held 1 s (two sweeps of
#: about a second each hold more, whatever the sweeps' jitter).
TH = Thresholds(utilisation=0.5, sweeps=2, clear=3, imbalance_sweeps=2, min_ns=10**9)
#: Bytes per sweep interval (~1 s) of a hot rail (QDR 4x: 4 GB/s) and of an idle one.
HOT = 3_200_000_000
COLD = 40_000_000
HOST = "host02"


@pytest.fixture(scope="module")
def rails_tree() -> FatTree:
    """4 hosts, 2 rails, 4 HCAs per leaf, 2 spines: leaf01 is plane 0, leaf02 plane 1."""
    return fat_tree(4, rails=2, hosts_per_leaf=4, spines=2)


@pytest.fixture(scope="module")
def rails_sim(rails_tree: FatTree, scratch_root: Path) -> Iterator[FabricSim]:
    """The multi-rail fabric's simulator (a socket of its own), stopped at the end."""
    if not _have_simulator():
        pytest.skip("ibsim/opensm/infiniband-diags not installed (make setup installs them)")
    simulator = FabricSim(rails_tree, scratch_root / "ibsim-rails")
    simulator.start()
    try:
        yield simulator
    finally:
        simulator.stop()


class Rig:
    """The sampler over the simulator, the incident service and the API, on one database."""

    def __init__(self, pg_url: str, sim: FabricSim, th: Thresholds = TH):
        self.pg_url, self.sim = pg_url, sim
        self.source = MadSource(env=sim.client_env(), workdir=sim.workdir, sweep_workers=1)
        self.sampler = FabricSampler(pg_url, self.source, interval_s=1.0, rediscover_s=3600)
        self.engine = make_engine(pg_url)
        self.service = IncidentService(self.engine, th, sweep_interval_s=1.0)
        self.last = 0.0
        self.sweep()  # discovery and the first sweep (no deltas yet)
        self.ports = {r: self._port(f"{HOST} mlx5_{r}") for r in (0, 1)}

    def _port(self, node: str) -> int:
        sql = ("SELECT p.id FROM fabric_ports p JOIN fabric_nodes n ON n.guid = p.guid"
               " WHERE n.description = %s AND p.port = 1")  # fmt: skip
        rows = query(self.pg_url, sql, (node,))
        return int(rows[0][0])

    def sweep(self) -> int:
        """One sweep about a second after the previous one; its time (ns)."""
        time.sleep(max(0.0, self.last + 1.0 - time.monotonic()))
        self.last = time.monotonic()
        self.sampler.step()
        return int(query(self.pg_url, "SELECT max(ts_ns) FROM fabric_port_latest")[0][0])

    def load(self, rail0: int, rail1: int) -> None:
        """Set host02's HCAs to send `rail0` and `rail1` bytes in the next interval: each
        PortXmitData set to the value the last sweep read plus those bytes (in words)."""
        commands = []
        for r, nbytes in ((0, rail0), (1, rail1)):
            (raw,) = query(self.pg_url, "SELECT xmit_bytes FROM fabric_port_latest"
                           " WHERE port_id = %s", (self.ports[r],))[0]  # fmt: skip
            words = (int(raw) + nbytes) // 4
            commands.append(f"PerformanceSet {port_ref(f'{HOST} mlx5_{r}', 1)} "
                            f"PortCountersExtended.PortXmitData={words}")  # fmt: skip
        self.sim.console(commands)

    def incidents(self, kind: str = "imbalance") -> list[tuple]:
        """The stored incidents of `kind`: kind, title, link ids, end, links."""
        return query(self.pg_url, "SELECT kind, title, link_ids, end_ns, links FROM incidents"
                     " WHERE kind = %s ORDER BY id", (kind,))  # fmt: skip

    def close(self) -> None:
        self.sampler.store.close()
        self.source.close()
        self.engine.dispose()


@pytest.fixture
def rig(pg_url: str, rails_sim: FabricSim) -> Iterator[Rig]:
    """A fresh sampler and incident service over the emptied database."""
    made = Rig(pg_url, rails_sim)
    try:
        yield made
    finally:
        made.close()


def _group(client: TestClient, lo_ns: int, hi_ns: int) -> dict:
    """The group "rails of host02" over [lo_ns, hi_ns), through the API."""
    window = f"from={lo_ns / 1e9:.3f}&to={hi_ns / 1e9:.3f}"
    page = client.get(f"/api/fabric/groups?kind=rails&{window}").json()
    assert page["page"]["total"] == 4  # every host has two rails
    (found,) = [g for g in page["groups"] if g["name"] == f"rails of {HOST}"]
    one = client.get(f"/api/fabric/groups/{found['id']}?{window}")
    assert one.status_code == 200, one.text
    return one.json()


def _sent(member: dict) -> int:
    """The bytes the member's HCA end sent over the window."""
    return (
        member["a_to_b_bytes"] if member["a"]["name"].startswith(HOST) else member["b_to_a_bytes"]
    )


def test_one_rail_forced_opens_an_imbalance_within_two_sweeps(rig: Rig):
    rig.sweep()
    rig.service.tick()
    rig.load(HOT, 0)
    first = rig.sweep()
    rig.service.tick()
    assert rig.incidents() == []  # one skewed sweep: not sustained yet
    rig.load(HOT, 0)
    second = rig.sweep()
    rig.service.tick()
    ((kind, title, link_ids, end_ns, links),) = rig.incidents()
    assert (kind, end_ns) == ("imbalance", None)
    # the forced rail is above the congestion threshold: a congestion of its own as well
    assert [r[1] for r in rig.incidents("congestion")] == [
        f"Congestion on {HOST} mlx5_0[1] – leaf01[2]"
    ]
    assert title == f"Imbalance on rails of {HOST}: {HOST} mlx5_0[1] – leaf01[2] busiest"
    assert {lk["group"]["name"] for lk in links} == {f"rails of {HOST}"}
    ends = sorted(sorted((lk["a"]["name"], lk["b"]["name"])) for lk in links)
    assert ends == [[f"{HOST} mlx5_0", "leaf01"], [f"{HOST} mlx5_1", "leaf02"]]
    (busiest,) = [lk for lk in links if lk["busiest"]]
    assert f"{HOST} mlx5_0" in (busiest["a"]["name"], busiest["b"]["name"])
    for lk in links:  # each member's own utilisation per sweep, the group's skew beside it
        hot = [p for p in lk["evidence"] if p["t_ns"] in (first, second)]
        assert len(hot) == 2 and all(p["max_mean"] == pytest.approx(2.0, rel=1e-3) for p in hot)
        if lk is busiest:
            assert all(p["utilisation"] >= TH.utilisation for p in hot)
        else:
            assert all(p["utilisation"] < 1e-3 for p in hot)  # the sampler's own MADs only

    engine = make_engine(rig.pg_url)
    with TestClient(create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1") as c:
        group = _group(c, first - 500_000_000, second + 500_000_000)
    engine.dispose()
    assert sorted(m["link_id"] for m in group["members"]) == sorted(link_ids)
    sent = {m["link_id"]: _sent(m) for m in group["members"]}
    assert sent == {busiest["id"]: 2 * HOT, **{i: 0 for i in link_ids if i != busiest["id"]}}
    assert group["busiest_link_id"] == busiest["id"]
    assert group["max_mean"] == pytest.approx(2.0, rel=1e-3)  # one of two members loaded
    assert group["cv"] == pytest.approx(1.0, rel=1e-3)
    assert group["jobs"] == []  # no job ran

    for _ in range(3):  # balanced again: it ends after the clear sweeps, like the others
        rig.load(HOT, HOT)
        rig.sweep()
        rig.service.tick()
    ((kind, _, _, end_ns, _),) = rig.incidents()
    assert kind == "imbalance" and end_ns == second


def test_both_rails_loaded_alike_open_nothing(rig: Rig):
    rig.sweep()
    rig.service.tick()
    times = []
    for _ in range(4):
        rig.load(HOT, HOT)
        times.append(rig.sweep())
        rig.service.tick()
    assert rig.incidents() == []
    assert len(rig.incidents("congestion")) == 2  # both rails are busy, evenly
    rig.load(COLD, COLD)  # lightly loaded and balanced: nothing either
    rig.sweep()
    rig.service.tick()
    assert rig.incidents() == []
    engine = make_engine(rig.pg_url)
    with TestClient(create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1") as c:
        group = _group(c, times[0] - 500_000_000, times[-1] + 500_000_000)
    engine.dispose()
    assert [_sent(m) for m in group["members"]] == [4 * HOT, 4 * HOT]
    assert group["max_mean"] == pytest.approx(1.0, abs=0.05)  # the intervals differ a little


# ---- jobs on the rails: ranks bound the way the MPI libraries bind them ------------------

RAIL_JOB = Path(__file__).parent / "rail_job.py"
#: The jobs' own load is tens of MB/s a rail: a member at 0.4 % of a QDR 4x rail (16 MB/s)
#: or more is busy, one below 0.2 % idle (the sampler's MADs alone are a few kB/s).
JOB_TH = Thresholds(utilisation=0.004, sweeps=2, clear=3, imbalance_sweeps=2, min_ns=10**9)
#: Bytes a rank sends its partner per exchange (tests/fabric/rail_job.py).
CHUNK = 2_000_000


class RailJob:
    """rail_job.py under `stacklens run` and `mpi` (Open MPI's mpirun, or MPICH's Hydra with
    mpi4py on MPICH's ABI from `abi_dir`): ranks 0, 1 on host01, ranks 2, 3 on host02
    (STACKLENS_HOST), each exchanging with its partner on the other host; `told`: the
    "NAME=value" every rank is started with (None: none of UCX_NET_DEVICES, MPICH's
    MPIR_CVAR_CH4_OFI_MAX_NICS set). UCX_NET_DEVICES is how both MPIs here are told their
    devices (Open MPI's pml ucx, MPICH's ch4:ucx)."""

    def __init__(self, tmp: Path, endpoint: str, told: str | None, mpi: str = "openmpi",
                 abi_dir: Path | None = None):  # fmt: skip
        self.key = f"rails-{mpi}-{uuid.uuid4().hex[:8]}"
        self.stopfile, self.out = tmp / "stop", tmp / "out"
        self.out.mkdir()
        env = mpi_env(STACKLENS_COLLECTOR=endpoint, STACKLENS_INGEST_TOKEN="secret",
                      STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="200",
                      STACKLENS_JOB_ID=self.key, STACKLENS_FINALIZE_TIMEOUT_MS="60000")  # fmt: skip
        for name in ("UCX_NET_DEVICES", "MPIR_CVAR_CH4_OFI_MAX_NICS", "MPICH_CH4_OFI_MAX_NICS"):
            env.pop(name, None)
        if told is not None:
            name, value = told.split("=", 1)
            env[name] = value
            env["UCX_LOG_LEVEL"] = "error"  # the simulated devices are not this node's
        program = [sys.executable, str(RAIL_JOB), str(self.stopfile), str(self.out)]
        if mpi == "openmpi":
            mpirun = ["mpirun", "-np", "2", "-x", "STACKLENS_HOST=host01", *program,
                      ":", "-np", "2", "-x", "STACKLENS_HOST=host02", *program]  # fmt: skip
        else:
            env |= {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": str(abi_dir)}
            mpirun = ["mpirun.mpich", "-genvall", "-np", "2", "-env", "STACKLENS_HOST",
                      "host01", *program, ":", "-np", "2", "-env", "STACKLENS_HOST", "host02",
                      *program]  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stacklens_cli", "run", "--", *mpirun], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip

    def stop(self) -> dict[int, int]:
        """Tell it to stop, wait for it; the exchanges each rank made."""
        self.stopfile.touch()
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, out + err
        return {int(f.name): int(f.read_text()) for f in self.out.iterdir()}

    def kill(self) -> None:
        """End it if it still runs (a failed test)."""
        if self.proc.poll() is None:
            self.stopfile.touch()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _rates(rig: Rig, ts: int) -> dict[int, float]:
    """host02's rails' utilisation (bytes sent by its HCA over the capacity) in sweep `ts`."""
    rows = query(rig.pg_url, "SELECT s.port_id, s.d_xmit_bytes, s.dt_ns, p.capacity_bytes_per_s"
                 " FROM fabric_port_samples s JOIN fabric_ports p ON p.id = s.port_id"
                 " WHERE s.ts_ns = %s AND s.port_id = ANY(%s)",
                 (ts, list(rig.ports.values())))  # fmt: skip
    by_port = {port: (nbytes or 0) * 1e9 / dt / cap for port, nbytes, dt, cap in rows}
    return {r: by_port[port] for r, port in rig.ports.items()}


def _drive(rig: Rig, sim: FabricSim, tree: FatTree, job: RailJob, sweeps: int,
           until_open: bool) -> list[tuple[dict[int, float], int]]:  # fmt: skip
    """Sweep while the job runs, the emulator moving the fabric's counters by what its ranks
    stored, each rank on the rail it is bound to (emulator/jobtraffic.py): per sweep from
    the first in which a rail of host02 is busy (at most 20 before it: the job starting),
    host02's rails' utilisation and the imbalance incidents then stored; `sweeps` of
    them, fewer if `until_open` and one opens."""
    feed = JobTraffic(rig.pg_url, tree.hosts, tree.storage, rails=tree.rails)
    emu = TrafficEmulator(sim, rig.source, rig.sampler.topology)
    seen: list[tuple[dict[int, float], int]] = []
    try:
        for _ in range(20 + sweeps):
            emu.apply(feed.poll())
            ts = rig.sweep()
            rig.service.tick()
            rates = _rates(rig, ts)
            if seen or max(rates.values()) >= JOB_TH.utilisation:
                seen.append((rates, len(rig.incidents())))
            if len(seen) == sweeps or (until_open and seen and seen[-1][1]):
                break
    finally:
        feed.close()
    return seen


def _incident_jobs(pg_url: str) -> dict[str, int | None]:
    """Per job key, its bytes on the busiest member of the imbalance incidents."""
    rows = query(pg_url, "SELECT j.job_key, ij.link_bytes FROM incident_jobs ij"
                 " JOIN incidents i ON i.id = ij.incident_id JOIN jobs j ON j.id = ij.job_id"
                 " WHERE i.kind = 'imbalance'")  # fmt: skip
    return {key: nbytes for key, nbytes in rows}


def _job_rails(pg_url: str, key: str) -> list[dict]:
    """The job's rails as GET /api/jobs/{job}/links answers them."""
    engine = make_engine(pg_url)
    try:
        with TestClient(create_app(engine, fabric_recheck_s=0.0),
                        base_url="http://127.0.0.1") as client:  # fmt: skip
            answer = client.get(f"/api/jobs/{key}/links")
    finally:
        engine.dispose()
    assert answer.status_code == 200, answer.text
    return answer.json()["rails"]


def _routed(rail: dict) -> tuple[int, int]:
    """A rail's routed (point-to-point) bytes sent and received."""
    (p2p,) = [p for p in rail["provenance"] if p["provenance"] == "routed"]
    return p2p["sent_bytes"], p2p["received_bytes"]


@pytest.fixture
def job_rig(pg_url: str, rails_sim: FabricSim) -> Iterator[Rig]:
    """A Rig judging by the jobs' thresholds."""
    made = Rig(pg_url, rails_sim, JOB_TH)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize(
    ("mpi", "told", "hot"),
    [
        ("openmpi", "UCX_NET_DEVICES=mlx5_1:1", 1),  # every rank told: rail 1
        ("mpich", "UCX_NET_DEVICES=mlx5_1:1", 1),
        # MPICH ch4:ofi's own way: one NIC, the first (every rank by local rank mod 1)
        ("mpich", "MPIR_CVAR_CH4_OFI_MAX_NICS=1", 0),
    ],
)
def test_ranks_pinned_to_one_rail_open_an_imbalance_naming_the_job(
    tmp_path, collector, hook_library, mpich_abi_dir, job_rig: Rig, rails_sim: FabricSim,
    rails_tree: FatTree, mpi: str, told: str, hot: int,
):  # fmt: skip
    pytest.importorskip("mpi4py")
    started_ns = time.time_ns()
    job = RailJob(tmp_path, collector.endpoint, told, mpi, mpich_abi_dir)
    try:
        seen = _drive(job_rig, rails_sim, rails_tree, job, sweeps=10, until_open=True)
        exchanges = job.stop()
    finally:
        job.kill()
    skewed = [i for i, (r, _) in enumerate(seen)
              if r[hot] >= JOB_TH.utilisation and r[1 - hot] < JOB_TH.utilisation / 2]  # fmt: skip
    assert skewed, seen
    first = skewed[0]
    # it opens at the second skewed sweep in a row, never at the first
    assert [n for _, n in seen[: first + 1]] == [0] * (first + 1), seen
    assert seen[first + 1][1] > 0, seen
    incidents = job_rig.incidents()
    groups = {lk["group"]["name"] for _, _, _, _, links in incidents for lk in links}
    assert f"rails of {HOST}" in groups, groups
    assert groups <= {"rails of host01", f"rails of {HOST}"}  # the job's two hosts only
    (links,) = [links for _, _, _, _, links in incidents
                if {lk["group"]["name"] for lk in links} == {f"rails of {HOST}"}]  # fmt: skip
    ends = sorted(sorted((lk["a"]["name"], lk["b"]["name"])) for lk in links)
    assert ends == [[f"{HOST} mlx5_0", "leaf01"], [f"{HOST} mlx5_1", "leaf02"]]
    (busiest,) = [lk for lk in links if lk["busiest"]]
    assert f"{HOST} mlx5_{hot}" in (busiest["a"]["name"], busiest["b"]["name"])
    named = _incident_jobs(job_rig.pg_url)
    assert (named.get(job.key) or 0) > 0, named  # the job, on the busiest rail

    stored = query(job_rig.pg_url, "SELECT DISTINCT r.net_devices FROM ranks r JOIN jobs j"
                   " ON j.id = r.job_id WHERE j.job_key = %s", (job.key,))  # fmt: skip
    assert stored == [(told,)]
    rails = {(r["host"], r["device"]): r for r in _job_rails(job_rig.pg_url, job.key)}
    sent = {rank: n * CHUNK for rank, n in exchanges.items()}
    assert set(rails) == {(h, f"mlx5_{i}") for h in ("host01", HOST) for i in (0, 1)}
    for host, ranks in (("host01", [0, 1]), (HOST, [2, 3])):
        busy, idle = rails[(host, f"mlx5_{hot}")], rails[(host, f"mlx5_{1 - hot}")]
        pinned = ranks if told.startswith("UCX_NET_DEVICES=") else []  # a limit pins nothing
        assert (busy["ranks"], busy["pinned"], idle["ranks"]) == (ranks, pinned, [])
        theirs = sum(sent[r] for r in ranks)
        others = sum(sent[(r + 2) % 4] for r in ranks)
        assert _routed(busy) == (theirs, others)  # exactly the program's exchanges
        assert idle["sent_bytes"] == idle["received_bytes"] == 0
    # the group over the job's time: its busiest member is the job's rail, and the job on
    # it carried that rail's bytes both ways (the link attribution, every category)
    hot_rail = rails[(HOST, f"mlx5_{hot}")]
    engine = make_engine(job_rig.pg_url)
    with TestClient(create_app(engine, fabric_recheck_s=0.0), base_url="http://127.0.0.1") as c:
        group = _group(c, started_ns, time.time_ns() + 10**9)
    engine.dispose()
    (member,) = [m for m in group["members"] if m["link_id"] == group["busiest_link_id"]]
    assert f"{HOST} mlx5_{hot}" in (member["a"]["name"], member["b"]["name"])
    assert [(j["job"], j["bytes"]) for j in group["jobs"]] == [
        (job.key, hot_rail["sent_bytes"] + hot_rail["received_bytes"])
    ]


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_ranks_on_both_rails_by_local_rank_open_nothing(
    tmp_path, collector, hook_library, mpich_abi_dir, job_rig: Rig, rails_sim: FabricSim,
    rails_tree: FatTree, mpi: str,
):  # fmt: skip
    pytest.importorskip("mpi4py")
    # local rank 0 on rail 0, 1 on rail 1
    job = RailJob(tmp_path, collector.endpoint, None, mpi, mpich_abi_dir)
    try:
        seen = _drive(job_rig, rails_sim, rails_tree, job, sweeps=6, until_open=False)
        exchanges = job.stop()
    finally:
        job.kill()
    # sweeps in which the detector had to decide (a rail busy): the other one was never idle
    busy = [r for r, _ in seen if max(r.values()) >= JOB_TH.utilisation]
    assert len(busy) >= 4, seen
    assert all(min(r.values()) >= JOB_TH.utilisation / 2 for r in busy), seen
    assert [n for _, n in seen] == [0] * len(seen), seen
    assert job_rig.incidents() == []
    rails = {(r["host"], r["device"]): r for r in _job_rails(job_rig.pg_url, job.key)}
    sent = {rank: n * CHUNK for rank, n in exchanges.items()}
    for host, (first, second) in (("host01", (0, 1)), (HOST, (2, 3))):
        for rank, device in ((first, "mlx5_0"), (second, "mlx5_1")):
            rail = rails[(host, device)]
            assert (rail["ranks"], rail["pinned"]) == ([rank], [])
            assert _routed(rail) == (sent[rank], sent[(rank + 2) % 4])
