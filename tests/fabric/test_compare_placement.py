# tests/fabric/test_compare_placement.py — two runs placed on one leaf and across two, compared.
"""Run comparison's fabric context on the simulated 32-host fat tree (issue #28 points 2
and 5): tests/compare/phases.c run twice under the hooks with the same command line on two
ranks, each rank on a simulated host of its own (STACKLENS_HOST, MPMD), swept by the real
fabric sampler before and after each run: run a on host01 and host02 (both on leaf01),
run b on host01 and host12 (leaf01 and leaf02). The comparison's fabric phrases name the
injected change first ("placement went from 1 leaf to 2 leaves"), and each side's context
equals its own run's placement (GET /api/jobs/{job}/placement?run=1 over the run's time):
hosts, leaves, links, switch-to-switch links, bytes and PortXmitWait on them. Then two runs
on the same two hosts, the second beside a congesting job: the finding names the other
job's bytes on the links run b crossed first, equal to the links' attribution."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.ibsim import FabricSim
from tests.compare.test_sites_truth import HERE, ITERATIONS
from tests.conftest import query
from tests.hooks import jobs

#: Run -> the simulated hosts of ranks 0 and 1.
PLACED = {"a": ("host01", "host02"), "b": ("host01", "host12")}


def _run(collector, program: str, job: str, hosts: tuple[str, str], **extra: str) -> None:
    """phases.c on one rank per host (MPMD), the same command line on every rank (`extra`:
    more of its environment)."""
    cmd = ["mpirun"]
    for i, host in enumerate(hosts):
        cmd += ([":"] if i else []) + ["-np", "1", "-x", f"STACKLENS_HOST={host}", program,
                                       str(ITERATIONS)]  # fmt: skip
    env = jobs.job_env(collector, "openmpi", job, 50, PHASES_COUNT="4096", **extra)
    done = jobs.finish(jobs.start(cmd, env), 120)
    assert done.returncode == 0, done.stderr


def _seconds(ns: int) -> str:
    """An instant as the API's exact decimal epoch seconds."""
    return f"{ns // 10**9}.{ns % 10**9:09d}"


def test_placement_across_more_leaves_is_named(
    tmp_path, collector, pg_url, api_client, sim: FabricSim, mad: MadSource
) -> None:
    program = tmp_path / "phases"
    subprocess.run(["mpicc", "-g", "-O2", "-o", program, HERE / "phases.c"], check=True)
    names = {side: f"leaves-{side}-{uuid.uuid4().hex[:8]}" for side in PLACED}
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()  # the topology and baselines, before the runs
        for side, hosts in PLACED.items():
            _run(collector, str(program), names[side], hosts)
            sampler.step()
    finally:
        sampler.store.close()
    answer = api_client.get("/api/compare", params={"a": names["a"], "b": names["b"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    a, b = body["a"]["context"], body["b"]["context"]
    assert (a["leaves"], b["leaves"]) == (["leaf01"], ["leaf01", "leaf02"])
    assert (a["hosts"], a["placed_hosts"], b["hosts"], b["placed_hosts"]) == (2, 2, 2, 2)
    # the injected change is the first fabric change the finding names (between the two
    # only a late rank could come: these short balanced runs name none since the profile's
    # 50 ms floor, but a rank the scheduler leaves out longer on a loaded node would be one)
    finding = body["finding"]
    moved, spread = (
        "; placement moved from host02 to host12;",
        "placement went from 1 leaf to 2 leaves",
    )
    assert moved in finding and spread in finding, finding
    assert finding.index(moved) < finding.index(spread), finding
    # each side's context is its own run's placement over the run's time
    for side in PLACED:
        ctx = body[side]["context"]
        placed = api_client.get(f"/api/jobs/{names[side]}/placement",
                                params={"run": 1, "from": _seconds(ctx["from_ns"]),
                                        "to": _seconds(ctx["to_ns"])}).json()  # fmt: skip
        assert "links" in placed, placed
        links = placed["links"]
        assert sorted(h["host"] for h in placed["hosts"]) == sorted(PLACED[side])
        assert ctx["links"] == len(links)
        assert ctx["crossed_links"] == sum(lk["kind"] == "candidate" for lk in links)
        sent = [lk[k] for lk in links for k in ("a_to_b_bytes", "b_to_a_bytes")
                if lk[k] is not None]  # fmt: skip
        assert ctx["link_bytes"] == (sum(sent) if sent else None)
        waits = [lk["xmit_wait"] for lk in links if lk["xmit_wait"] is not None]
        assert ctx["xmit_wait"] == (sum(waits) if waits else None)
        leaves = {end["name"] for lk in links if lk["kind"] == "host" for end in (lk["a"], lk["b"])
                  if end["name"].startswith("leaf")}  # fmt: skip
        assert sorted(leaves) == ctx["leaves"]
    assert body["a"]["context"]["crossed_links"] == 0  # one leaf: no switch-to-switch link
    assert body["b"]["context"]["crossed_links"] > 0


#: The congesting job's doubles per rank and call, and its iterations (seconds of traffic).
CONGESTOR_COUNT, CONGESTOR_ITERATIONS = 1 << 20, 3000
#: Both runs last ~0.5 s (rank 1 sleeps 50 ms per iteration), over several of the congesting
#: job's intervals (only intervals that end during a run are its traffic during the run).
LONGER = {"PHASES_SLOW_MS": "50"}


def test_a_run_beside_a_congesting_job_is_named(
    tmp_path, collector, pg_url, api_client, sim: FabricSim, mad: MadSource
) -> None:
    """Both runs on host01 and host12, ~0.5 s each; run b while another job (phases.c,
    8 MiB allreduces on its pair, on the same two hosts) runs: the first fabric change the
    finding names is the other job's bytes on the links run b's traffic crossed, during
    run b, and that figure equals the link attribution of those link directions over run
    b's time, less run b's own bytes."""
    program = tmp_path / "phases"
    subprocess.run(["mpicc", "-g", "-O2", "-o", program, HERE / "phases.c"], check=True)
    names = {side: f"beside-{side}-{uuid.uuid4().hex[:8]}" for side in ("a", "b")}
    busy = f"congestor-{uuid.uuid4().hex[:8]}"
    hosts = PLACED["b"]
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    try:
        sampler.step()
        _run(collector, str(program), names["a"], hosts, **LONGER)
        sampler.step()
        cmd = ["mpirun"]
        for i, host in enumerate(hosts):
            cmd += ([":"] if i else []) + ["-np", "1", "-x", f"STACKLENS_HOST={host}",
                                           str(program), str(CONGESTOR_ITERATIONS)]  # fmt: skip
        env = jobs.job_env(collector, "openmpi", busy, 50, PHASES_COUNT=str(CONGESTOR_COUNT))
        congestor = jobs.start(cmd, env)
        try:
            deadline = time.monotonic() + 60
            while query(pg_url, "SELECT count(*) FROM ranks r JOIN jobs j ON j.id = r.job_id "
                        "WHERE j.job_key = %s", (busy,))[0][0] < 2:  # fmt: skip
                assert time.monotonic() < deadline and congestor.poll() is None
                time.sleep(0.1)
            time.sleep(0.5)  # in its loop
            _run(collector, str(program), names["b"], hosts, **LONGER)
            assert congestor.poll() is None, "the congesting job ended before run b did"
            sampler.step()
        finally:
            jobs.kill_group(congestor)
    finally:
        sampler.store.close()
    body = api_client.get("/api/compare", params={"a": names["a"], "b": names["b"]}).json()
    a, b = body["a"]["context"], body["b"]["context"]
    assert (a["other_job_bytes"], a["other_jobs"]) == (0, 0)
    assert b["other_jobs"] == 1 and b["other_job_bytes"] > 16 * 2**20
    fabric = body["finding"].split("; ", 1)[1]
    assert fabric.startswith("on links that carried "), body["finding"]
    assert " of another job during run b (0 B during run a)" in fabric
    # the figure is the link attribution over run b's time, jobs other than b
    window = {"from": _seconds(b["from_ns"]), "to": _seconds(b["to_ns"])}
    own = api_client.get(f"/api/jobs/{names['b']}/links", params={"run": 1, **window}).json()
    others = 0.0
    for crossing in own["links"]:
        answer = api_client.get(f"/api/fabric/links/{crossing['id']}/attribution",
                                params=window).json()  # fmt: skip
        direction = next(d for d in answer["directions"]
                         if d["direction"] == crossing["direction"])  # fmt: skip
        others += sum(f["bytes"] for f in direction["by_job"] if f["job"] != names["b"])
    assert b["used_links"] == len(own["links"])
    assert b["other_job_bytes"] == pytest.approx(others, rel=1e-12)
