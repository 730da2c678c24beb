"""The jobs API per run: `?run=<ordinal>` on every job endpoint, the whole job without it,
`/api/jobs/{job}/runs`, runs in the job list, 404 for an unknown run."""

from __future__ import annotations

import pytest

from tests.collector.test_ingest import T0
from tests.collector.test_rollups import roll_up
from tests.collector.test_runs import mpi_frame, process_frame, send

ROUTES = ["job_matrix", "job_ops", "job_io", "job_collectives", "job_sizes", "job_rma",
          "job_ranks"]  # fmt: skip


@pytest.fixture
def two_launches_and_a_helper(collector):
    """job-R: run 1 (MPI, 2 ranks x 2 frames of 1000 B), run 2 (MPI, label 3, 2 ranks x 3
    frames of 7000 B, ended), run 3 (a process without MPI that wrote 40 B)."""
    send(collector, [mpi_frame(1, seq, rank, 1000) for seq in (0, 1) for rank in (0, 1)])
    send(collector, [mpi_frame(2, seq, rank, 7000, label=b"3", frame_type=1 + (seq == 2))
                     for seq in (0, 1, 2) for rank in (0, 1)])  # fmt: skip
    send(collector, [process_frame(500, 9, 0, 40)])


def get(api_client, route: str, run: int | None = None, job: str = "job-R"):
    url = api_client.app.url_path_for(route, job=job)
    return api_client.get(url, params={} if run is None else {"run": run})


def test_runs_endpoint_lists_the_launches_by_ordinal(two_launches_and_a_helper, api_client):
    body = get(api_client, "job_runs").json()
    assert body["job"] == "job-R"
    assert [
        (r["run"], r["kind"], r["label"], r["world_size"], r["status"], r["ranks_seen"])
        for r in body["runs"]
    ] == [
        (1, "mpi", None, 2, "running", 2),
        (2, "mpi", "3", 2, "finished", 2),
        (3, "processes", None, 1, "running", 1),
    ]
    assert body["runs"][1]["finished_ns"] == T0 + 2 * 10**10 + 3 * 10**9
    jobs = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
    assert [(j["job"], j["status"], j["ranks_seen"]) for j in jobs] == [("job-R", "running", 5)]
    assert jobs[0]["runs"] == body["runs"]


def test_every_endpoint_answers_per_run_and_for_the_whole_job(
    two_launches_and_a_helper, api_client, collector
):
    def cells(run):
        body = get(api_client, "job_matrix", run).json()
        assert body["run"] == run
        return {(c["src"], c["dst"]): c["bytes"] for c in body["cells"]}

    assert cells(1) == {(0, 1): 2000, (1, 0): 2000}
    assert cells(2) == {(0, 1): 21000, (1, 0): 21000}
    assert cells(3) == {}
    assert cells(None) == {(0, 1): 23000, (1, 0): 23000}
    roll_up(collector)  # the same from the 1-minute rollups (per run) as from the raw deltas
    assert cells(1) == {(0, 1): 2000, (1, 0): 2000}
    assert cells(None) == {(0, 1): 23000, (1, 0): 23000}
    send(collector, [mpi_frame(2, 3, 0, 5)])  # a dirty minute again: read raw, all runs
    assert cells(2) == {(0, 1): 21005, (1, 0): 21000}
    assert cells(None) == {(0, 1): 23005, (1, 0): 23000}

    def files(run):
        return [
            (f["path"], f["bytes_written"]) for f in get(api_client, "job_io", run).json()["files"]
        ]

    assert files(3) == [("/scratch/out", 40)] and files(None) == files(3) and files(1) == []

    def ranks(run):
        body = get(api_client, "job_ranks", run).json()
        return body["world_size"], [
            (r["run"], r["rank"], r["host"], r["pid"]) for r in body["ranks"]
        ]

    assert ranks(2) == (2, [(2, 0, "n0", 10), (2, 1, "n1", 11)])
    assert ranks(3) == (1, [(3, 0, "n0", 500)])
    assert ranks(None) == (2, [(1, 0, "n0", 10), (1, 1, "n1", 11), (2, 0, "n0", 10),
                               (2, 1, "n1", 11), (3, 0, "n0", 500)])  # fmt: skip
    for route in ROUTES:
        assert get(api_client, route, 2).json()["run"] == 2


def test_ranks_say_which_run_and_kind_and_count_ranks_and_processes_apart(collector, api_client):
    """job-S, a batch script's job: its shell (a process without MPI, seen first: run 1) and
    the `mpirun -np 2` it started (run 2). Each row says its run and kind; the ranks and
    the processes that reported are counted apart, over every page."""
    send(collector, [process_frame(500, 9, 0, 40, job="job-S")])
    send(collector, [mpi_frame(1, 0, rank, 1000, job="job-S") for rank in (0, 1)])
    url = api_client.app.url_path_for("job_ranks", job="job-S")

    def ranks(**params) -> tuple:
        """(world, MPI ranks, processes, total, rows: run, kind, rank, host, pid; cursor)"""
        body = api_client.get(url, params=params).json()
        rows = [(r["run"], r["kind"], r["rank"], r["host"], r["pid"]) for r in body["ranks"]]
        counts = (body["world_size"], body["ranks_reported"], body["processes_reported"])
        return *counts, body["page"]["total"], rows, body["page"]["next_cursor"]

    shell = (1, "processes", 0, "n0", 500)
    rank0, rank1 = (2, "mpi", 0, "n0", 10), (2, "mpi", 1, "n1", 11)
    assert ranks() == (2, 2, 1, 3, [shell, rank0, rank1], None)
    # the counts are the whole job's on every page
    *first, cursor = ranks(limit=1)
    assert first == [2, 2, 1, 3, [shell]]
    assert ranks(limit=2, cursor=cursor) == (2, 2, 1, 3, [rank0, rank1], None)
    # per run: the MPI run's ranks; the processes run's process (its world: processes seen)
    assert ranks(run=2) == (2, 2, 0, 2, [rank0, rank1], None)
    assert ranks(run=1) == (1, 0, 1, 1, [shell], None)


@pytest.mark.parametrize("route", ROUTES)
def test_unknown_run_is_404_and_a_bad_one_422(two_launches_and_a_helper, api_client, route):
    response = get(api_client, route, 4)
    assert response.status_code == 404
    assert response.json() == {"detail": "job 'job-R' has no run 4"}
    assert get(api_client, route, 0).status_code == 422


def test_runs_of_an_unknown_job_is_404(api_client):
    response = get(api_client, "job_runs", job="no/such job")
    assert response.status_code == 404
    assert response.json() == {"detail": "unknown job 'no/such job'"}
