"""/metrics shows whether the fabric sampler keeps up (sweep and discovery durations,
ports answered, failed and stale, sweeps stored, merged and waiting) and how long the web
server takes to answer, by kind; `stacklens status` shows the same. A real sampler over the
sysfs fixture tree, the real app served over HTTP, the real database."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collector.fabric.service import FabricSampler
from collector.fabric.sysfs import SysfsSource
from server.app import create_app
from stacklens.db import make_engine
from stacklens.settings import Settings
from stacklens.timings import Timings
from stacklens_cli.status import status_lines
from tests.conftest import serving

SYSFS_FIXTURE = Path(__file__).parents[1] / "fabric" / "fixtures" / "sysfs"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of an exposition by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip


def test_timings_count_into_cumulative_buckets():
    t = Timings()
    for seconds in (0.0004, 0.003, 0.003, 7.0, 100.0):
        t.observe(seconds)
    buckets = dict(t.cumulative())
    assert (buckets["0.001"], buckets["0.0025"], buckets["0.005"]) == (1, 1, 3)
    assert (buckets["5.0"], buckets["10.0"], buckets["60.0"], buckets["+Inf"]) == (3, 4, 4, 5)
    assert (t.count, round(t.total_s, 4), t.last_s) == (5, 107.0064, 100.0)


def test_the_loop_counts_the_sweeps_that_overran_their_period(pg_url):
    """A period of 1 ns is overrun by every step (each counted once it is done: at most the
    step in progress is not yet); a period of 60 s by none."""

    async def sample(period_s: float, behind: int) -> tuple[int, int]:
        sampler = FabricSampler(pg_url, SysfsSource(SYSFS_FIXTURE), period_s, 60.0)
        await sampler.start()
        try:
            while sampler.sweeps < 1 or sampler.behind < behind:
                await asyncio.sleep(0.01)
        finally:
            await sampler.stop()
        return sampler.sweeps, sampler.behind

    sweeps, behind = asyncio.run(sample(1e-9, 3))
    assert behind >= 3 and sweeps - behind in (0, 1)
    assert asyncio.run(sample(60.0, 0)) == (1, 0)


def test_metrics_and_status_show_the_sampler_and_the_answers(pg_url, tmp_path):
    sampler = FabricSampler(pg_url, SysfsSource(SYSFS_FIXTURE), 1.0, 60.0)
    for _ in range(3):
        sampler.step()
    engine = make_engine(pg_url)
    app = create_app(engine)
    app.state.fabric_samplers = [sampler]
    try:
        with serving(app) as port:
            base = f"http://127.0.0.1:{port}"
            assert httpx.get(f"{base}/api/health").status_code == 200
            assert httpx.get(f"{base}/api/jobs").status_code == 200
            got = samples(httpx.get(f"{base}/metrics").text)
            settings = Settings(http_port=port, state_dir=tmp_path / "state", spool_dir="off",
                                collector="127.0.0.1:9")  # fmt: skip
            _, lines = status_lines(settings)
    finally:
        sampler.store.close()
        engine.dispose()
    assert got[("stacklens_fabric_sweeps_total", ())] == 3
    assert got[("stacklens_fabric_sweeps_behind_total", ())] == 0  # steps alone: no period
    assert got[("stacklens_fabric_sweep_seconds_count", ())] == 3
    assert got[("stacklens_fabric_sweep_seconds_bucket", (("le", "+Inf"),))] == 3
    assert got[("stacklens_fabric_ports_answered_total", ())] == 3  # one port, three sweeps
    assert got[("stacklens_fabric_ports_failed_total", ())] == 0
    assert got[("stacklens_fabric_stale_ports", ())] == 0
    assert got[("stacklens_fabric_sweeps_stored_total", ())] == 3  # stepped by hand: at once
    assert got[("stacklens_fabric_sweeps_merged_total", ())] == 0
    assert got[("stacklens_fabric_store_queue", ())] == 0
    assert got[("stacklens_fabric_store_queue_limit", ())] == 8
    assert got[("stacklens_fabric_store_errors_total", ())] == 0
    assert got[("stacklens_fabric_store_seconds_count", ())] == 3
    assert got[("stacklens_fabric_sweep_interval_seconds", ())] == 1.0
    assert got[("stacklens_fabric_discoveries_total", ())] == sampler.discoveries >= 1
    assert got[("stacklens_fabric_discovery_seconds_count", ())] == sampler.discoveries
    assert got[("stacklens_http_request_seconds_count", (("kind", "api"),))] == 2
    rows = {line[:10].strip(): line[12:] for line in lines[1:]}
    assert re.fullmatch(
        r"3 sweeps of \d+ ms on average \(every 1 s\), 0 failed, 0 behind schedule; 3 stored, "
        r"0 merged, 0 waiting; ports 3 "
        r"answered, 0 did not, "
        rf"0 stale now; {sampler.discoveries} discoveries of \d+ ms on average",
        rows["sampler"],
    ), rows
    # /health, /jobs and /metrics, then status's own /api/health before its /metrics
    assert re.fullmatch(r"api 3 \(\d+ ms on average\); metrics 1 \(\d+ ms on average\)",
                        rows["requests"]), rows  # fmt: skip
