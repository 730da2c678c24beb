"""A real MPI job under the hooks with a known time profile (examples/slow_rank.c): four
ranks meet in MPI_Allreduce every iteration; rank 2 computes 150 ms instead of 20 ms in
ten known iterations, so the others wait for it inside the collective. The profile names
rank 2 as the outlier in computation and as the last to arrive at MPI_Allreduce, and the
slow iterations lie in the steps where it stood out."""

from __future__ import annotations

import uuid

from tests.hooks.test_openmpi import run_under_hooks

RANKS, ITERATIONS, STEP_MS, SLOW_RANK, SLOW_FROM, SLOW_TO, SLOW_MS = 4, 30, 20, 2, 10, 20, 150


def test_the_slow_rank_of_a_real_job_is_named(collector, api_client, examples_built):
    job = f"slow-{uuid.uuid4().hex[:8]}"
    arguments = (ITERATIONS, STEP_MS, SLOW_RANK, SLOW_FROM, SLOW_TO, SLOW_MS)
    program = [str(examples_built / "slow_rank"), *map(str, arguments)]
    result = run_under_hooks(collector, program, job, ranks=RANKS)
    assert result.returncode == 0, result.stderr
    profile = api_client.get(f"/api/jobs/{job}/profile").json()

    named = [o for o in profile["outliers"] if o["what"] == "computation"]
    assert [o["rank"] for o in named] == [SLOW_RANK], profile["outliers"]
    slow = named[0]
    # rank 2 computes 10 x 150 + 20 x 20 ms = 1.9 s, the others 30 x 20 ms (their waits
    # are MPI time); the elapsed time of a step's edge intervals without a call is not seen
    assert 1.9e9 * 0.75 <= slow["time_ns"] <= 1.9e9 * 1.5, slow
    assert slow["ratio"] >= 2, slow
    assert slow["text"].startswith(f"rank {SLOW_RANK}: ")
    assert "× the median time in computation" in slow["text"]

    allreduce = [g for g in profile["imbalance"] if g["op"] == "MPI_Allreduce"]
    assert len(allreduce) == 1 and allreduce[0]["ranks"] == RANKS
    assert allreduce[0]["min_rank"] == SLOW_RANK  # the last to arrive
    assert "it is the last to arrive" in allreduce[0]["text"]

    # start-up and shutdown apart: every rank spent time in MPI_Init, in no MPI category
    shares = profile["shares"]
    startup = {s["rank"] for s in shares if s["startup_ns"] > 0}
    assert startup == set(range(RANKS))
    assert all(s["compute_ns"] >= 0 for s in shares)
