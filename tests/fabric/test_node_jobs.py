"""The jobs on a node (#17 point 3), on the session's simulated 32-host fat tree swept by the
real sampler: alice's job (host03 and host04, one leaf) and bob's (host03 and host20, two
leaves), their frames through the real collector. GET /api/fabric/nodes/{guid}/jobs lists
exactly those jobs on host03 (its hosts there, its bytes each way) and on its leaf, none on
another host, bob's job as "another job" to alice; in Chromium a click on host03 opens
its detail panel listing them.
"""

from __future__ import annotations

import ipaddress
import time

import httpx
from playwright.sync_api import expect

from collector.fabric.mad import MadSource
from collector.fabric.service import FabricSampler
from emulator.fattree import FatTree
from server.access.viewer import Access
from stacklens import wire
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.collector.test_ingest import exchange
from tests.conftest import free_port, serving
from tests.e2e.test_dashboard import _table_rows, browser_page  # noqa: F401 (fixture)
from tests.e2e.test_fabric_page import _click_until, _drawn

#: The bytes each rank of a job sends to the other.
SENT = 4096
JOBS = {"job-near": ("alice", "host03", "host04"), "job-far": ("bob", "host03", "host20")}


def _frames(start_ns: int) -> bytes:
    """Both jobs' frames: per rank one interval from `start_ns`, SENT bytes to the other."""
    out = b""
    for job, (user, *hosts) in JOBS.items():
        for rank, host in enumerate(hosts):
            tables = {
                "p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": SENT,
                                             "msgs_sent": 1, "bytes_recv": SENT,
                                             "msgs_recv": 1}]),
                "rank_info": wire.records("rank_info", [{"command": b"./a",
                                                         "user": user.encode()}]),
            }  # fmt: skip
            out += wire.encode_frame(job_id=job, world_rank=rank, world_size=2, seq=0,
                                     host=host, pid=100 + rank, interval_start_ns=start_ns,
                                     interval_end_ns=start_ns + 10**9, token="secret",
                                     tables=tables)  # fmt: skip
    return out


def _guid(base: str, name: str) -> str:
    """The GUID of the node called `name` (the topology as carol, an admin, reads it)."""
    topology = httpx.get(f"{base}/api/fabric/topology", headers={"X-Forwarded-User": "carol"},
                         timeout=30).json()  # fmt: skip
    return next(n["guid"] for n in topology["nodes"] if n["name"] == name)


def test_the_jobs_on_a_node_in_the_api_and_its_panel(
    pg_url,
    collector,
    tree: FatTree,
    sim,
    mad: MadSource,
    browser_page,  # noqa: F811
):
    sampler = FabricSampler(pg_url, mad, interval_s=1.0, rediscover_s=3600)
    try:
        sampler.step()
        start = time.time_ns() - 3 * 10**9
        acks = exchange(collector.address, _frames(start), acks=4)
        assert [status for status, _ in acks] == [0] * 4
        sampler.step()  # the newest sweep after the frames: the default window holds them
    finally:
        sampler.store.close()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = make_engine(pg_url)
    access = Access(mode="proxy", proxies=(ipaddress.ip_network("127.0.0.1/32"),),
                    admins=frozenset({"carol"}))  # fmt: skip
    app = create_site(engine, api_base_url=base, access=access)
    try:
        with serving(app, port=port):

            def jobs(name: str, user: str) -> list[dict]:
                answer = httpx.get(f"{base}/api/fabric/nodes/{_guid(base, name)}/jobs",
                                   headers={"X-Forwarded-User": user}, timeout=60)  # fmt: skip
                assert answer.status_code == 200, answer.text
                return answer.json()["jobs"]

            near = {"job": "job-near", "user": "alice", "hosts": ["host03"],
                    "bytes_out": SENT, "bytes_in": SENT}  # fmt: skip
            far = {"job": "job-far", "user": "bob", "hosts": ["host03"],
                   "bytes_out": SENT, "bytes_in": SENT}  # fmt: skip
            assert jobs("host03", "carol") == [far, near]  # as busy: by job
            # host03's leaf: both jobs' bytes enter it and leave it twice (there and back)
            through = {"hosts": [], "bytes_out": 2 * SENT, "bytes_in": 2 * SENT}
            assert jobs("leaf01", "carol") == [
                {"job": "job-far", "user": "bob", **through},
                {"job": "job-near", "user": "alice", **through},
            ]
            assert jobs("host05", "carol") == []
            # alice: bob's job is "another job", no id, user or hosts
            assert jobs("host03", "alice") == [
                near, {"job": None, "user": None, "hosts": [], "bytes_out": SENT,
                       "bytes_in": SENT}]  # fmt: skip
            missing = httpx.get(f"{base}/api/fabric/nodes/0x1/jobs",
                                headers={"X-Forwarded-User": "carol"})  # fmt: skip
            assert missing.status_code == 404

            # The page, as carol: a click on host03 opens its panel with both jobs.
            page, errors = browser_page
            page.set_extra_http_headers({"X-Forwarded-User": "carol"})
            page.goto(f"{base}/fabric")
            _drawn(page, len(tree.links))  # not aggregated: every link drawn
            _click_until(page, _guid(base, "host03"), "#fabric-panel-title", "node host03")
            table = "fabric-panel-jobs"
            expect(page.locator(f"#{table}")).to_contain_text("2 jobs on this node",
                                                              timeout=30_000)  # fmt: skip
            assert _table_rows(page, table) == [
                ["job-far", "bob", "host03", "4.00 KiB", "4.00 KiB"],
                ["job-near", "alice", "host03", "4.00 KiB", "4.00 KiB"],
            ]
            assert errors == []
    finally:
        engine.dispose()
