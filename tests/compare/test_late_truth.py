# tests/compare/test_late_truth.py — the late rank in a comparison: noise names nobody.
"""phases.c run three times under the hooks (Open MPI, 2 ranks) with the same command line
(issue #28 points 2 and 5): two short balanced runs (no rank sleeps: a few ms each, where
which rank arrives last is the scheduler's noise), then a run whose rank 1 sleeps SLOW_MS
before every MPI_Barrier. The two balanced runs compared name no late rank on either side
and the finding says nothing of one, as neither run's job profile names an outlier; the
balanced run against the slowed one names rank 1, the rank that arrives late, with rank 0
waiting for it at the barrier, and says "rank 1 (host) became late" (never the rank that
waits); the slowed run against the median of the two balanced ones says the same."""

from __future__ import annotations

import subprocess
import uuid

from tests.compare.test_sites_truth import COMPILERS, HERE, line_of, run

SLOW_MS = 100


def test_balanced_runs_name_no_late_rank_and_an_injected_one_is_named(
    collector, api_client, tmp_path
) -> None:
    program = tmp_path / "phases"
    subprocess.run([COMPILERS["openmpi"], "-g", "-O2", "-o", program, HERE / "phases.c"],
                   check=True)  # fmt: skip
    tag = uuid.uuid4().hex[:8]
    first, second, slowed = (f"late-{tag}-{n}" for n in ("bal1", "bal2", "slow"))
    for job, slow_ms in ((first, 0), (second, 0), (slowed, SLOW_MS)):
        run(collector, "openmpi", program, job, PHASES_SLOW_MS=str(slow_ms),
            PHASES_SLOW_RANK="1")  # fmt: skip
    # the balanced pair: nobody late on either side, nothing of it in the finding
    for job in (first, second):
        profile = api_client.get(f"/api/jobs/{job}/profile", params={"run": 1}).json()
        assert profile["outliers"] == [], (job, profile["outliers"])
    body = api_client.get("/api/compare", params={"a": first, "b": second}).json()
    assert (body["a"]["late"], body["b"]["late"], body["late_moved"]) == (None, None, None)
    assert "late" not in body["finding"], body["finding"]
    # the slowed run: rank 1 is late, rank 0 waits for it at the barrier
    barrier = f"phases.c:{line_of('slow')}"
    for params in ({"a": second, "b": slowed}, {"b": slowed}):
        body = api_client.get("/api/compare", params=params).json()
        late = body["b"]["late"]
        host = body["b"]["hosts"][0]
        assert (late["rank"], late["host"], late["op"], late["site"], late["ranks"]) == (
            1, host, "MPI_Barrier", barrier, [0])  # fmt: skip
        assert late["excess_ns"] >= 10 * SLOW_MS * 10**6 // 2, late
        assert late["text"].startswith(f"rank 1 arrives last at MPI_Barrier in {barrier}: ")
        assert (body["a"]["late"], body["late_moved"]) == (None, None), params
        assert body["finding"].endswith(f"; rank 1 ({host}) became late."), body["finding"]
        assert "rank 0" not in body["finding"], body["finding"]
    assert body["a"]["runs"] == 2  # the median of the two balanced runs
