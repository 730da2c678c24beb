"""How many ranks a job had, said truly: MPI ranks as ranks, the non-MPI processes of its
processes run (a batch script's shell, a helper) apart, in the one wording the command
line's summary, the jobs grid and the overview share (presentation.formatting)."""

from __future__ import annotations

import pytest
from dash import html

from frontend import components
from presentation.formatting import ranks_and_processes, ranks_or_processes
from stacklens.api_models import JobList, JobSummary, PageInfo, RunSummary


def run(ordinal: int, kind: str, ranks_seen: int, world_size: int | None = None) -> RunSummary:
    """A finished run of `kind` whose `ranks_seen` ranks (or processes) reported."""
    size = ranks_seen if world_size is None else world_size
    return RunSummary(
        run=ordinal, kind=kind, label=None, world_size=size, command="./app", user="alice",
        status="finished", started_ns=0, last_seen_ns=1, finished_ns=1, ranks_seen=ranks_seen,
    )  # fmt: skip


def job(*runs: RunSummary) -> JobSummary:
    """A running job of `runs` that sent 1.5 MiB; its ranks_seen sums them, as the API's."""
    return JobSummary(
        job="j-1", world_size=max((r.world_size for r in runs if r.kind == "mpi"), default=0),
        command="bash script.sh", user="alice", status="running", started_ns=0, last_seen_ns=1,
        ranks_seen=sum(r.ranks_seen for r in runs), bytes_sent=1536 * 1024, messages_sent=9,
        runs=list(runs),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "count", "text"),
    [
        ("mpi", 0, "0 ranks"),
        ("mpi", 1, "1 rank"),
        ("mpi", 4, "4 ranks"),
        ("processes", 1, "1 process"),
        ("processes", 3, "3 processes"),
    ],
)
def test_a_runs_members_are_ranks_or_processes_by_its_kind(kind, count, text):
    assert ranks_or_processes(kind, count) == text


@pytest.mark.parametrize(
    ("runs", "words", "of_world"),
    [
        # `stacklens run -- bash script.sh` whose script runs `mpirun -np 2`: the shell is a
        # process, not a third rank
        ([run(1, "processes", 1), run(2, "mpi", 2)], ["2 ranks", "1 process"], ["2 / 2",
                                                                                "1 process"]),
        # MPI runs only: as they read before (the ranks of every run, of the largest world)
        ([run(1, "mpi", 4)], ["4 ranks"], ["4 / 4"]),
        ([run(1, "mpi", 4), run(2, "mpi", 8)], ["12 ranks"], ["12 / 8"]),
        ([run(1, "mpi", 1)], ["1 rank"], ["1 / 1"]),
        ([run(1, "mpi", 3, world_size=4)], ["3 ranks"], ["3 / 4"]),
        # processes only: no rank named
        ([run(1, "processes", 1)], ["1 process"], ["1 process"]),
        ([run(1, "processes", 3)], ["3 processes"], ["3 processes"]),
        # a launch none of whose ranks reported (its own run, kind mpi, world = -np) beside
        # the script's processes; and alone
        ([run(1, "processes", 2), run(2, "mpi", 0, world_size=4)], ["2 processes"],
         ["2 processes"]),
        ([run(1, "mpi", 0, world_size=4)], ["0 ranks"], ["0 / 4"]),
        # nothing yet
        ([], ["0 ranks"], ["0 / 0"]),
    ],
)  # fmt: skip
def test_a_jobs_ranks_and_processes_are_counted_apart(runs, words, of_world):
    assert ranks_and_processes(runs) == words
    assert ranks_and_processes(runs, of_world=True) == of_world


def test_the_jobs_grid_and_the_overview_say_ranks_and_processes_apart():
    mixed = job(run(1, "processes", 1), run(2, "mpi", 2))
    mpi_only = job(run(1, "mpi", 4))
    listed = JobList(jobs=[mixed, mpi_only], page=PageInfo(total=2, limit=100, next_cursor=None))
    assert [r["ranks"] for r in components.job_rows(listed)] == ["2 / 2 · 1 process", "4 / 4"]
    items, _ = components.overview_jobs(listed, [None, None], {})
    assert isinstance(items, html.Ul)
    assert [li.children[1].children for li in items.children] == [  # the line after the link
        " alice · 2 ranks · 1 process · 1.50 MiB sent",
        " alice · 4 ranks · 1.50 MiB sent",
    ]
