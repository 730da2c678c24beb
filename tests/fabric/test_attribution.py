"""Attribution of link bytes to job x category (#15 points 2 and 3), the short form of
bench/attribution_accuracy.py on the session's simulated 32-host fat tree: three jobs'
frames through the real collector, their flows (and noise) moved on the simulator's
counters by the emulator, sampled by the real fabric sampler. Per link direction the
attribution equals the emulated truth exactly for p2p, RMA and I/O, is within the stated
tolerance for modelled collectives, and `other` is the injected noise plus the cycle's
management MADs (up to the collectives' model error there). Then the API: a link's
attribution and a job's links as an admin sees them (every job named) and as alice sees
them (bob's job only as "another job"; bob's job's links a 404).
"""

from __future__ import annotations

import ipaddress

import httpx

from bench.attribution_accuracy import COLL_TOLERANCE, measure
from collector.fabric.mad import MadSource
from emulator.fattree import FatTree
from emulator.ibsim import FabricSim
from server.access.viewer import Access
from server.app import create_app
from server.traffic.repository import TrafficConfig
from stacklens.db import make_engine
from tests.conftest import query, serving


def test_attribution_matches_the_emulated_truth_and_the_api_masks_other_users(
    pg_url, tree: FatTree, sim: FabricSim, mad: MadSource
):
    rows = measure(tree, pg_url, sim, mad, "fixed")
    for category in ("mpi_p2p", "mpi_rma", "io"):
        assert rows[category]["compared"] > 20, category
        assert rows[category]["exact"] == rows[category]["compared"], (category, rows[category])
        assert rows[category]["truth"] == rows[category]["attributed"]
    assert rows["mpi_coll"]["compared"] > 20
    assert 0 < rows["mpi_coll"]["worst"] <= COLL_TOLERANCE
    other = rows["other"]
    assert other["compared"] == other["explained"] == rows["links"]
    assert other["exact"] > rows["links"] // 2
    assert rows["left_out"] == {"intra_host": rows["left_out"]["intra_host"], "local_io": 12288}
    assert rows["left_out"]["intra_host"] > 0

    # the API, over the same window: the busiest link direction of bob's p2p
    window = rows["window"]
    bob_p2p = rows["truth_on"][("job-b", "mpi_p2p")]
    (link, direction), nbytes = max(bob_p2p.items(), key=lambda kv: (kv[1], kv[0]))
    params = {"from": f"{window.from_ns // 10**9}.{window.from_ns % 10**9:09d}",
              "to": f"{window.to_ns // 10**9}.{window.to_ns % 10**9:09d}"}  # fmt: skip
    engine = make_engine(pg_url)
    access = Access(mode="proxy", proxies=(ipaddress.ip_network("127.0.0.1/32"),),
                    admins=frozenset({"carol"}))  # fmt: skip
    config = TrafficConfig("fixed", {"/scratch": list(tree.storage)}, "file-hash")
    app = create_app(engine, access=access, traffic=config)
    try:
        with serving(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:

            def get(path: str, user: str, **extra: str) -> httpx.Response:
                return http.get(path, params={**params, **extra},
                                headers={"X-Forwarded-User": user}, timeout=60)  # fmt: skip

            url = f"/api/fabric/links/{link}/attribution"
            admin = get(url, "carol").json()
            side = next(d for d in admin["directions"] if d["direction"] == direction)
            figures = {(f["job"], f["category"]): f for f in side["by_job"]}
            assert figures[("job-b", "mpi_p2p")]["bytes"] == nbytes
            assert figures[("job-b", "mpi_p2p")]["user"] == "bob"
            assert figures[("job-b", "mpi_p2p")]["provenance"] == "routed"
            assert figures[("job-b", "mpi_p2p")]["path"] == "fixed"
            for (job, category), f in figures.items():
                truth = rows["truth_on"].get((job, category), {}).get((link, direction), 0)
                if f["provenance"] == "modelled":
                    assert abs(f["bytes"] - truth) <= COLL_TOLERANCE * truth, (job, category)
                else:
                    assert f["bytes"] == truth, (job, category)
            assert side["other_bytes"] == side["measured_bytes"] - side["attributed_bytes"]
            want = rows["noise_on"].get((link, direction), 0) + rows["management"][
                (link, direction)]  # fmt: skip
            coll_error = sum(rows["truth_on"].get((j, "mpi_coll"), {}).get((link, direction), 0)
                             for j in ("job-a", "job-b", "job-c")) - sum(
                f["bytes"] for f in side["by_job"] if f["category"] == "mpi_coll")  # fmt: skip
            assert side["other_bytes"] == want + coll_error

            alice = get(url, "alice").json()
            a_side = next(d for d in alice["directions"] if d["direction"] == direction)
            assert "bob" not in str(alice) and "job-b" not in str(alice)
            hidden = [f for f in a_side["by_job"] if f["job"] is None]
            assert hidden and all(f["user"] is None for f in hidden)
            assert {(f["category"], f["bytes"]) for f in hidden if f["category"] == "mpi_p2p"} == {
                ("mpi_p2p", nbytes)}  # fmt: skip
            assert a_side["other_bytes"] == side["other_bytes"]
            # one attribution of the window served both viewers (masked per request)
            assert len(app.state.attributions) == 1

            # per step: two steps that sum to the window's figures
            half = (window.to_ns - window.from_ns + 1) // 2
            series = get(
                f"{url}/series", "carol", step=f"{half // 10**9}.{half % 10**9:09d}"
            ).json()
            assert [p["t_ns"] for p in series["points"]] == [
                window.from_ns, window.from_ns + half]  # fmt: skip
            steps = [next(d for d in p["directions"] if d["direction"] == direction)
                     for p in series["points"]]  # fmt: skip
            # the one sweep of the window is in one step; a step without a sample is unknown
            assert [d["measured_bytes"] for d in steps].count(None) == 1
            assert sum(d["measured_bytes"] or 0 for d in steps) == side["measured_bytes"]
            assert sum(d["attributed_bytes"] for d in steps) == side["attributed_bytes"]
            for d in steps:
                want = None if d["measured_bytes"] is None else (
                    d["measured_bytes"] - d["attributed_bytes"])  # fmt: skip
                assert d["other_bytes"] == want
            stepped = [f for p in series["points"] for d in p["directions"]
                       if d["direction"] == direction for f in d["by_job"]
                       if (f["job"], f["category"]) == ("job-b", "mpi_p2p")]  # fmt: skip
            assert sum(f["bytes"] for f in stepped) == nbytes
            assert get(f"{url}/series", "carol", step="0.000001").status_code == 422

            # default windows: the minute up to the newest sweep; a job's own span
            plain = http.get(url, headers={"X-Forwarded-User": "carol"}, timeout=60).json()
            assert (plain["from_ns"], plain["to_ns"]) == (window.to_ns - 60 * 10**9, window.to_ns)
            span = http.get("/api/jobs/job-b/links", headers={"X-Forwarded-User": "bob"},
                            timeout=60).json()  # fmt: skip
            started, last = query(pg_url, "SELECT started_ns, last_seen_ns FROM jobs"
                                  " WHERE job_key = 'job-b'")[0]  # fmt: skip
            assert (span["from_ns"], span["to_ns"]) == (started, last + 1)

            # a job's links: its bytes per link direction and category, paged
            mine = get("/api/jobs/job-b/links", "bob", limit="1000").json()
            assert mine["collectives"] == "modelled" and mine["page"]["next_cursor"] is None
            on = {(r["id"], r["direction"]): r for r in mine["links"]}
            categories = {f["category"]: f["bytes"] for f in on[(link, direction)]["categories"]}
            assert categories["mpi_p2p"] == nbytes
            total_p2p = sum(f["bytes"] for r in mine["links"] for f in r["categories"]
                            if f["category"] == "mpi_p2p")  # fmt: skip
            assert total_p2p == sum(bob_p2p.values())
            assert [(r["id"], r["direction"], r["bytes"]) for r in span["links"]] == [
                (r["id"], r["direction"], r["bytes"]) for r in mine["links"]]  # fmt: skip
            first = get("/api/jobs/job-b/links", "bob", limit="2").json()
            assert len(first["links"]) == 2 and first["page"]["total"] == len(mine["links"])
            second = get("/api/jobs/job-b/links", "bob", limit="2",
                         cursor=first["page"]["next_cursor"]).json()  # fmt: skip
            assert second["links"] == mine["links"][2:4]
            assert get("/api/jobs/job-b/links", "alice").status_code == 404
            assert get("/api/fabric/links/999999/attribution", "carol").status_code == 404
            assert get(url, "carol", bogus="1").status_code == 422
    finally:
        engine.dispose()
