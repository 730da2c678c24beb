"""Placement of a real job on the simulated 32-host fat tree: a 4-rank Open MPI job under the
hooks, each rank on its own host (STACKLENS_HOST, MPMD), sampled by the real fabric sampler
while the emulator sends a flow between two of its hosts and raises PortXmitWait on one of
their links.

Rank 0 is "host03" and rank 1 "host12" (matched by host name); rank 2 is "gpu-a", whose
hooks read a sysfs tree holding host20's node GUID (matched by GUID, not by its name);
rank 3 is "login01", outside the fabric (unmatched, listed). The API answers exactly their
host links and, as topological candidates, every up link of their three leaves; the load
figures are exactly those of the stored samples overlapping the job; the job page's
"Hosts and links" card in Chromium shows them, and the Fabric page with `?job=` marks
exactly the job's HCAs and links.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import expect

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.ibsim import FabricSim, Flow, TrafficEmulator
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, free_port, mpi_env, query, serving

SYSFS = Path(__file__).parent / "fixtures" / "sysfs"
HOLD_JOB = Path(__file__).parent / "hold_job.py"
#: Rank -> STACKLENS_HOST.
HOSTS = ["host03", "host12", "gpu-a", "login01"]
#: The simulated host whose node GUID rank 2's sysfs tree holds.
GUID_HOST = "host20"
FLOW_BYTES = 64 * 1024 * 1024
MAD_SLACK = 64 * 1024
WAIT_TICKS = 4242


def _sysfs_with_guid(root: Path, guid: int) -> Path:
    """A copy of the fixture sysfs tree whose mlx5_0 has node GUID `guid`."""
    shutil.copytree(SYSFS, root)
    text = f"{guid:016x}"
    (root / "mlx5_0" / "node_guid").write_text(
        ":".join(text[i : i + 4] for i in range(0, 16, 4)) + "\n"
    )
    return root


def _wait_for(pg_url: str, sql: str, params: tuple, want: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while query(pg_url, sql, params)[0][0] != want:
        assert time.monotonic() < deadline, f"timed out waiting for {sql}"
        time.sleep(0.1)


def _label(end: dict) -> str:
    return f"{end['name']}[{end['port']}]"


def _name(link: dict) -> str:
    """`a[p] - b[q]` with the ends sorted by name."""
    return " - ".join(sorted((_label(link["a"]), _label(link["b"]))))


def _expected_load(pg_url: str, link: dict, lo: int, hi: int) -> dict:
    """The link's window figures recomputed from the stored samples of its ends."""
    ends = {}
    for side in ("a", "b"):
        end = link[side]
        ends[side] = tuple(int(v) for v in query(
            pg_url,
            "SELECT count(*), sum(d_xmit_bytes), sum(dt_ns), sum(d_xmit_wait) "
            "FROM fabric_port_samples s JOIN fabric_ports p ON p.id = s.port_id "
            "WHERE p.guid = %s AND p.port = %s AND s.ts_ns > %s AND s.ts_ns - s.dt_ns < %s",
            (int(end["guid"], 16) - (1 << 64) if int(end["guid"], 16) >= 1 << 63
             else int(end["guid"], 16), end["port"], lo, hi),
        )[0])  # fmt: skip
    rate = {s: float(ends[s][1] * 1e9 / ends[s][2]) for s in ends}
    return {
        "samples": ends["a"][0] + ends["b"][0],
        "a_to_b_bytes": ends["a"][1],
        "b_to_a_bytes": ends["b"][1],
        "utilisation": max(rate.values()) / link["capacity_bytes_per_s"],
        "xmit_wait": ends["a"][3] + ends["b"][3],
        "xmit_wait_per_s": sum(float(ends[s][3] * 1e9 / ends[s][2]) for s in ends),
    }


def test_a_jobs_hosts_ports_and_links(
    tmp_path, collector, pg_url, hook_library, sim: FabricSim, mad: MadSource
):
    pytest.importorskip("mpi4py")
    sampler = FabricSampler(pg_url, mad, interval_s=0.1, rediscover_s=3600)
    stop = tmp_path / "stop"
    job = f"place-{uuid.uuid4().hex[:8]}"
    try:
        sampler.step()  # topology and baselines, before the job
        topo = sampler.topology
        guid = topo.node(GUID_HOST).guid
        sysfs = _sysfs_with_guid(tmp_path / "sysfs", guid)
        program = [sys.executable, str(HOLD_JOB), str(stop)]
        mpirun = ["mpirun"]
        for i, host in enumerate(HOSTS):
            extra = ["-x", f"STACKLENS_SYSFS_ROOT={sysfs}"] if host == "gpu-a" else []
            mpirun += ([":"] if i else []) + ["-np", "1", "-x", f"STACKLENS_HOST={host}"]
            mpirun += extra + program
        env = mpi_env(
            STACKLENS_COLLECTOR=collector.endpoint,
            STACKLENS_INGEST_TOKEN="secret",
            STACKLENS_INGEST_AUTH="trusted",  # the test collector's mode
            STACKLENS_INTERVAL_MS="100",
            STACKLENS_JOB_ID=job,
        )
        log = tmp_path / "job.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "stacklens_cli", "run", "--", *mpirun],
                env=env, stdout=out, stderr=out, start_new_session=True,
            )  # fmt: skip
        try:
            _wait_for(pg_url, "SELECT count(DISTINCT host) FROM ranks", (), len(HOSTS))
            # The hooks send a port's record when one of its counters moved: some traffic.
            counters = sysfs / "mlx5_0" / "ports" / "1" / "counters"
            sent = int((counters / "port_xmit_data").read_text()) + 250
            (counters / ".tmp").write_text(f"{sent}\n")
            (counters / ".tmp").replace(counters / "port_xmit_data")
            _wait_for(pg_url, "SELECT count(*) > 0 FROM hca_deltas", (), True)
            sampler.step()
            emu = TrafficEmulator(sim, mad, topo)
            emu.apply([Flow("host03", "host12", FLOW_BYTES)])
            emu.raise_counter("leaf02", 4, "xmit_wait", WAIT_TICKS)  # leaf02[4] - host12[1]
            sampler.step()
            time.sleep(0.3)  # the job outlives the last sweep
        finally:
            stop.touch()  # the ranks (each in a process group of its own) end themselves
            try:
                proc.wait(60)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        assert proc.returncode == 0, log.read_text()
    finally:
        sampler.store.close()

    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    try:
        with serving(app, port=port):
            base = f"http://127.0.0.1:{port}"
            answer = _check_api(base, pg_url, job, topo, guid)
            _check_page(base, job)
            _check_fabric_page(base, job, answer)
    finally:
        engine.dispose()


def _check_api(base: str, pg_url: str, job: str, topo, guid: int) -> dict:
    """The placement's exact hosts, ports, links and load; the answer."""
    import httpx

    answer = httpx.get(f"{base}/api/jobs/{job}/placement", timeout=30).json()
    started, last = query(pg_url, "SELECT started_ns, last_seen_ns FROM jobs")[0]
    assert (answer["from_ns"], answer["to_ns"]) == (started, last + 1)
    assert answer["crossed"] == "topological candidates"
    hosts = {h["host"]: h for h in answer["hosts"]}
    assert sorted(hosts) == sorted(HOSTS)
    assert [(h, hosts[h]["ranks"], hosts[h]["match"]) for h in HOSTS] == [
        ("host03", [0], "host name"),
        ("host12", [1], "host name"),
        ("gpu-a", [2], "guid"),
        ("login01", [3], "unmatched"),
    ]
    assert [[_label(p) for p in hosts[h]["ports"]] for h in HOSTS] == [
        ["host03[1]"], ["host12[1]"], ["host20[1]"], []
    ]  # fmt: skip
    assert hosts["gpu-a"]["ports"][0]["guid"] == f"{guid:#018x}"
    assert hosts["host03"]["ports"][0]["guid"] == f"{topo.node('host03').guid:#018x}"

    links = {_name(lk): lk for lk in answer["links"]}
    host_links = {n for n, lk in links.items() if lk["kind"] == "host"}
    assert host_links == {"host03[1] - leaf01[3]", "host12[1] - leaf02[4]",
                          "host20[1] - leaf03[4]"}  # fmt: skip
    assert [links[n]["hosts"] for n in sorted(host_links)] == [["host03"], ["host12"], ["gpu-a"]]
    # Leaf i's up ports 9-12 go to spine01 ports 4(i-1)+1.., 13-16 to spine02 likewise.
    want = {
        f"leaf0{i}[{9 + s * 4 + k}] - spine0{s + 1}[{4 * (i - 1) + k + 1}]"
        for i in (1, 2, 3) for s in (0, 1) for k in range(4)
    }  # fmt: skip
    assert {n for n, lk in links.items() if lk["kind"] == "candidate"} == want
    assert [lk["id"] for lk in answer["links"]] == sorted(lk["id"] for lk in answer["links"])
    # The flow's real route (over the forwarding tables) is inside the listed set.
    route = topo.route(topo.node("host03").guid, topo.node("host12").guid)
    crossed = {frozenset(((f"{h.tx[0]:#018x}", h.tx[1]), (f"{h.rx[0]:#018x}", h.rx[1])))
               for h in route}  # fmt: skip
    listed = {frozenset(((lk["a"]["guid"], lk["a"]["port"]), (lk["b"]["guid"], lk["b"]["port"])))
              for lk in answer["links"]}  # fmt: skip
    assert len(crossed) == 4 and crossed <= listed

    lo, hi = answer["from_ns"], answer["to_ns"]
    for name, lk in links.items():
        assert lk["samples"] >= 4, name  # two sweeps during the job, two ends
        expected = _expected_load(pg_url, lk, lo, hi)
        assert {k: lk[k] for k in expected} == expected, name
        assert lk["peak_utilisation"] >= lk["utilisation"] >= 0, name
    sender = links["host03[1] - leaf01[3]"]
    sent = sender["a_to_b_bytes"] if sender["a"]["name"] == "host03" else sender["b_to_a_bytes"]
    assert FLOW_BYTES <= sent < FLOW_BYTES + MAD_SLACK
    assert links["host12[1] - leaf02[4]"]["xmit_wait"] == WAIT_TICKS
    assert {lk["xmit_wait"] for n, lk in links.items() if n != "host12[1] - leaf02[4]"} == {0}

    run = httpx.get(f"{base}/api/jobs/{job}/placement", params={"run": 1}).json()
    assert (run["run"], run["hosts"]) == (1, answer["hosts"])
    empty = httpx.get(f"{base}/api/jobs/{job}/placement", params={"to": str(lo / 1e9 - 60)})
    assert empty.status_code == 200 and empty.json()["hosts"] == []
    assert httpx.get(f"{base}/api/jobs/nope/placement").status_code == 404
    assert httpx.get(f"{base}/api/jobs/{job}/placement", params={"run": 2}).status_code == 404
    assert httpx.get(f"{base}/api/jobs/{job}/placement", params={"from": "x"}).status_code == 422
    return answer


def _check_page(base: str, job: str) -> None:
    with chromium_page() as (page, errors):
        page.goto(f"{base}/jobs/{job}")
        card = page.locator("#jv-placement")
        expect(card).to_contain_text("gpu-a", timeout=30_000)
        rows = page.locator("#jv-placement-hosts tbody tr")
        expect(rows).to_have_count(len(HOSTS))
        expect(card).to_contain_text("login01")
        expect(card).to_contain_text("unmatched")
        expect(card).to_contain_text("host20[1]")
        expect(card).to_contain_text("topological candidates")
        expect(card).to_contain_text("host12[1] - leaf02[4]")
        expect(page.locator("#jv-placement-links tbody tr")).to_have_count(27)
        assert errors == []


#: What the fabric graph marks as the job's: node ids (GUIDs) and the link ids of its edges.
_MARKED = """() => {
    const cy = document.querySelector('#fabric-graph')._cyreg.cy;
    const links = cy.edges('.job').map((e) => e.data('links')).flat();
    const dimmed = cy.edges('.dim').filter((e) => !e.hasClass('job')).length;
    return {nodes: cy.nodes('.job').map((n) => n.id()).sort(), links: links.sort((a, b) => a - b),
            others_dimmed: dimmed === cy.edges().length - cy.edges('.job').length};
}"""


def _check_fabric_page(base: str, job: str, answer: dict) -> None:
    """`/fabric?job=` marks exactly the job's HCAs and links and dims every other link."""
    with chromium_page() as (page, errors):
        page.goto(f"{base}/fabric?job={job}")
        expect(page.locator("#fabric-job-message")).to_have_text(
            f"job {job}: 3 hosts, 27 links (topological candidates between switches); "
            "not on the fabric: login01",
            timeout=30_000,
        )
        page.wait_for_function(
            "() => { const el = document.querySelector('#fabric-graph');"
            " return el && el._cyreg && el._cyreg.cy.edges('.job').length > 0; }",
            timeout=30_000,
        )
        marked = page.evaluate(_MARKED)
        assert marked == {
            "nodes": sorted(p["guid"] for h in answer["hosts"] for p in h["ports"]),
            "links": sorted(lk["id"] for lk in answer["links"]),
            "others_dimmed": True,
        }
        assert errors == []
