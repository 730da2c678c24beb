"""Attribution of a real job end to end: a 4-rank Open MPI job (mpi4py, under the hooks,
ranks placed on simulated hosts with STACKLENS_HOST; ranks 2 and 3 share host20) sends a
ring of p2p messages, allreduces and writes files; the emulator's job feed
(emulator/jobtraffic.py) moves the simulated counters by what the job stored, the real
sampler sweeps, and the attribution puts exactly those p2p and I/O bytes on exactly those
link directions (up to the feed's carried remainder: bytes below a 4-octet word per host
pair wait for the pair's next flow). Its one-sided puts and gets are moved and attributed
the same way; its collectives are measured by Open MPI's monitoring component (labelled
`measured`) and the feed moves those monitored bytes, so the attribution of every
category equals what was moved, exactly, and `other` (measured - attributed) is only what
the feed did not move."""

from __future__ import annotations

import sys
import uuid
from collections import defaultdict
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.orm import Session

from bench.attribution_accuracy import link_of_port
from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.fattree import FatTree
from emulator.ibsim import FabricSim, Flow, TrafficEmulator
from emulator.jobtraffic import JobTraffic
from server.query_params import Window
from server.traffic import repository
from server.traffic.attribution import attribute
from server.traffic.repository import TrafficConfig
from stacklens.db import make_engine
from tests.conftest import mpi_env, stacklens_run

MIX_JOB = Path(__file__).parent / "mix_job.py"
HOSTS = ["host03", "host12", "host20", "host20"]


def _latest(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT max(ts_ns) FROM fabric_port_samples").fetchone()[0])


def test_a_real_jobs_bytes_on_the_links_it_crossed(
    tmp_path, collector, pg_url, hook_library, tree: FatTree, sim: FabricSim, mad: MadSource
):
    pytest.importorskip("mpi4py")
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()
        sampler.step()
        start = _latest(pg_url)
        job = f"mix-{uuid.uuid4().hex[:8]}"
        out = tmp_path / "out"
        out.mkdir()
        mpirun = ["mpirun"]
        for i, host in enumerate(HOSTS):
            mpirun += ([":"] if i else []) + ["-np", "1", "-x", f"STACKLENS_HOST={host}"]
            mpirun += [sys.executable, str(MIX_JOB), str(out)]
        env = mpi_env(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
                      STACKLENS_INGEST_AUTH="trusted", STACKLENS_INTERVAL_MS="100",
                      STACKLENS_JOB_ID=job)  # fmt: skip
        done = stacklens_run(mpirun, env)
        assert done.returncode == 0, done.stdout + done.stderr
        feed = JobTraffic(pg_url, tree.hosts, tree.storage)
        try:
            flows = feed.poll()
        finally:
            feed.close()
        emu = TrafficEmulator(sim, mad, sampler.topology)
        emu.apply(flows)
        sampler.step()
        end = _latest(pg_url) + 1
    finally:
        sampler.store.close()

    ports = link_of_port(pg_url)
    topo = sampler.topology
    assert topo is not None
    # the truth: what the feed moved, plus what it still carries (below a word per pair)
    truth: dict[str, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))
    for flow in flows:
        for end_port, move in emu.port_moves([flow]).items():
            if move[0]:
                truth[flow.kind][ports[end_port]] += move[0]
    for (src, dst, kind), rest in feed.carry.items():
        if rest:
            for end_port, move in emu.port_moves([Flow(src, dst, rest)]).items():
                if move[0]:
                    truth[kind][ports[end_port]] += move[0]
    assert all(truth[k] for k in ("mpi_p2p", "io", "mpi_rma", "mpi_coll")), {
        k: len(v) for k, v in truth.items()
    }

    config = TrafficConfig("fixed", {"*": list(tree.storage)}, "file-hash")
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            window = Window(start + 1, end)
            fab = repository.load_fabric(session, "fixed")
            measured = {c: m["bytes"] for c, m in repository.measured(session, fab, window).items()}
            traffic = repository.job_traffic(session, window, config)
            hcas = repository.rails_of(session, fab, traffic.hosts)
            result = attribute(fab.router, traffic.transfers, hcas, measured)
    finally:
        engine.dispose()
    got: dict[str, dict[tuple[int, str], float]] = defaultdict(lambda: defaultdict(float))
    provenance = set()
    for crossing, shares in result.shares.items():
        for (_job, category, prov, path), nbytes in shares.items():
            got[category][crossing] += nbytes
            provenance.add((category, prov, path))
    for category in ("mpi_p2p", "io", "mpi_rma", "mpi_coll"):  # collectives: monitored
        assert dict(got[category]) == dict(truth[category]), category
    # so on every crossing other = measured - attributed = measured - what the feed moved:
    # the management MADs alone, no category of the job missing or counted twice
    moved: dict[tuple[int, str], int] = defaultdict(int)
    for crossings in truth.values():
        for crossing, nbytes in crossings.items():
            moved[crossing] += nbytes
    assert {c: result.attributed(c) for c in result.shares} == dict(moved)
    # ranks 2 and 3 share host20: their ring message (4 * 1002 bytes) is on no link
    assert result.left_out["intra_host"] >= 4 * 1002
    assert set(traffic.collective_source.values()) == {"measured"}
    assert provenance == {("mpi_p2p", "routed", "fixed"), ("io", "routed", "fixed"),
                          ("mpi_rma", "routed", "fixed"),
                          ("mpi_coll", "measured", "fixed")}  # fmt: skip
    assert got["mpi_coll"]  # the allreduce's internal messages between hosts
