"""Pure pieces of the jobs page's collectives, message-size, RMA and ranks sections (the
browser shows them in tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import pytest

from presentation import card_reports, components, figures
from presentation.formatting import format_size_bucket
from stacklens import api_models
from stacklens.constants import OVERFLOW_COMM_ID
from tests.frontend import positional

CollectiveTotal = positional(api_models.CollectiveTotal)
CommunicatorTotal = positional(api_models.CommunicatorTotal)
JobCollectives = positional(api_models.JobCollectives)
JobRanks = positional(api_models.JobRanks)
JobRma = positional(api_models.JobRma)
JobSizes = positional(api_models.JobSizes)
OpSizes = positional(api_models.OpSizes)
RankInfo = positional(api_models.RankInfo)
HostRanks = positional(api_models.HostRanks)
RmaCell = positional(api_models.RmaCell)
RmaOp = positional(api_models.RmaOp)
SizeBucket = positional(api_models.SizeBucket)


@pytest.mark.parametrize(
    ("lower", "upper", "text"),
    [
        (0, 1, "0 B (empty)"),
        (1, 2, "1 B"),
        (2, 4, "2 B – 4 B"),
        (512, 1024, "512 B – 1 KiB"),
        (2**20, 2**21, "1 MiB – 2 MiB"),
        (2**63, 2**64, "8 EiB – 16 EiB"),
    ],
)
def test_size_buckets_read_as_byte_ranges(lower, upper, text):
    assert format_size_bucket(lower, upper) == text


def _coll() -> api_models.JobCollectives:
    return JobCollectives(
        job="j",
        communicators=(
            CommunicatorTotal(0x1234, 4, False, 4, 2, 8, 4160, 9000),
            CommunicatorTotal(OVERFLOW_COMM_ID, 3, True, 1, 1, 5, 50, 10),
        ),
        collectives=(
            CollectiveTotal("MPI_Bcast", 0x1234, 4, 1, 4, 4, 4000, 6000),
            CollectiveTotal("MPI_Allreduce", 0x1234, 4, -1, 4, 4, 160, 3000),
            CollectiveTotal("MPI_Reduce", OVERFLOW_COMM_ID, 3, 2, 1, 5, 50, 10),
        ),
    )


def test_collectives_tables_name_communicator_root_and_overflow():
    comms = components.communicators_table_markdown(_coll()).splitlines()
    assert comms[0].startswith("2 communicators with collective calls.")
    assert comms[4:] == [
        "| 00001234 | 4 | 4 | 2 | 8 | 4160 | 4.06 KiB | 9.00 µs |",
        "| overflow | 3 | 1 | 1 | 5 | 50 | 50 B | 10 ns |",
    ]
    rows = components.collectives_table_markdown(_coll()).splitlines()
    assert rows[0].startswith("3 collectives (per communicator, op and root).")
    assert rows[4:] == [
        "| 00001234 | 4 | MPI&#95;Bcast | 1 | 4 | 4 | 4000 | 3.91 KiB | 6.00 µs |",
        "| 00001234 | 4 | MPI&#95;Allreduce | none | 4 | 4 | 160 | 160 B | 3.00 µs |",
        "| overflow | 3 | MPI&#95;Reduce | 2 | 1 | 5 | 50 | 50 B | 10 ns |",
    ]
    empty = JobCollectives(job="j", communicators=(), collectives=())
    assert components.communicators_table_markdown(empty) == (
        "No collective calls recorded for this job."
    )
    assert components.collectives_table_markdown(empty) == ""


def test_collectives_table_is_capped_and_says_so():
    n = components.MAX_COLL_ROWS + 3
    rows = tuple(CollectiveTotal("MPI_Bcast", 1, 2, i, 2, 2, 0, n - i) for i in range(n))
    lines = components.collectives_table_markdown(JobCollectives("j", (), rows)).splitlines()
    assert lines[0].startswith(f"Heaviest {components.MAX_COLL_ROWS} of {n} collectives")
    assert len(lines[4:]) == components.MAX_COLL_ROWS


def _sizes() -> api_models.JobSizes:
    return JobSizes(
        job="j",
        ops=(
            OpSizes("MPI_Isend", "mpi_p2p", 7, (SizeBucket(8, 128, 256, 1),
                                               SizeBucket(10, 512, 1024, 6))),
            OpSizes("MPI_Barrier", "mpi_coll", 2, (SizeBucket(0, 0, 1, 2),)),
        ),
    )  # fmt: skip


def test_sizes_table_has_exact_bounds_and_counts():
    lines = components.sizes_table_markdown(_sizes()).splitlines()
    assert lines[4:] == [
        "| MPI&#95;Isend | 128 B – 256 B | 128 | 256 | 1 |",
        "| MPI&#95;Isend | 512 B – 1 KiB | 512 | 1024 | 6 |",
        "| MPI&#95;Barrier | 0 B (empty) | 0 | 1 | 2 |",
    ]
    assert components.sizes_table_markdown(JobSizes("j", ())) == (
        "No message sizes recorded for this job."
    )


def test_size_histogram_has_a_trace_per_op_over_every_bucket_between():
    fig = figures.size_histogram(_sizes())
    assert [t.name for t in fig.data] == ["MPI_Isend", "MPI_Barrier"]
    assert list(fig.data[0].x) == ["128 B – 256 B", "512 B – 1 KiB"]
    assert list(fig.data[0].y) == [1, 6]
    assert list(fig.data[1].x) == ["0 B (empty)"] and list(fig.data[1].y) == [2]
    # Buckets 0 to 10, gaps included, in size order.
    assert len(fig.layout.xaxis.categoryarray) == 11
    assert fig.layout.xaxis.categoryarray[9] == "256 B – 512 B"
    many = JobSizes(
        "j", tuple(OpSizes(f"op{i}", "other", 1, (SizeBucket(1, 1, 2, 1),)) for i in range(9))
    )
    assert len(figures.size_histogram(many).data) == figures.MAX_SIZE_TRACES
    empty = figures.size_histogram(JobSizes("j", ()))
    assert empty.data == () and empty.layout.annotations[0].text == "No message sizes recorded."


def test_rma_table_lists_pairs_and_ops():
    rma = JobRma(
        job="j",
        world_size=4,
        ops=(RmaOp("MPI_Put", 4, 64), RmaOp("MPI_Get", 1, 8)),
        cells=(
            RmaCell(0, 1, 4, 88, (RmaOp("MPI_Accumulate", 1, 40), RmaOp("MPI_Put", 3, 48))),
            RmaCell(0, 2, 1, 8, (RmaOp("MPI_Get", 1, 8),)),
        ),
        page=api_models.PageInfo(total=2, limit=9, next_cursor=None),
    )
    assert components.rma_caption(rma) == (
        "2 (origin, target) pairs. In all: MPI_Put 4 calls, 64 B; MPI_Get 1 call, 8 B."
    )
    assert [(r["origin"], r["target"], r["calls"], r["bytes"], r["moved"], r["per_op"])
            for r in components.rma_rows(rma)] == [
        (0, 1, 4, 88, "88 B", "MPI_Accumulate 1 call, 40 B; MPI_Put 3 calls, 48 B"),
        (0, 2, 1, 8, "8 B", "MPI_Get 1 call, 8 B"),
    ]  # fmt: skip
    more = rma.model_copy(update={"page": api_models.PageInfo(total=9, limit=2, next_cursor="x")})
    assert components.rma_caption(more).startswith("The first 2 of 9 (origin, target) pairs.")
    none = JobRma("j", 4, (), (), page=api_models.PageInfo(total=0, limit=9, next_cursor=None))
    assert components.rma_caption(none) == "No one-sided (RMA) calls in this job."


def _rank(rank: int, host: str, status: str = "finished", health=(0, 0, 0),
          abort_code: int | None = None, *, run: int = 1,
          kind: str = "mpi") -> api_models.RankInfo:  # fmt: skip
    return RankInfo(rank, host, 100 + rank, 0, 60 * 10**9, status != "running",
                    status == "killed", status == "aborted", False, abort_code, status,
                    *health, run=run, kind=kind)  # fmt: skip


def test_ranks_put_lost_and_folded_counts_first_and_in_bold():
    ranks = JobRanks(
        job="j",
        world_size=4,
        ranks=(
            _rank(0, "cn01"),
            _rank(1, "cn|01", "killed", health=(0, 2, 1)),
            _rank(3, "cn02", "running", health=(5, 0, 0)),
            _rank(2, "cn02", "aborted", abort_code=-3),
        ),
        page=api_models.PageInfo(total=4, limit=9, next_cursor=None),
        ranks_reported=4,
        processes_reported=0,
        hosts=(HostRanks("cn02", 2), HostRanks("cn01", 1), HostRanks("cn|01", 1)),
        health=api_models.RankHealth(
            ranks_folded=1, keys_dropped=5, ranks_lost=1, frames_dropped=2
        ),
    )
    lines = components.ranks_table_markdown(ranks).splitlines()
    start, end = "1970-01-01 00&#58;00&#58;00 UTC", "1970-01-01 00&#58;01&#58;00 UTC"
    assert lines[4:] == [
        f"| 1 | cn&#124;01 | 101 | killed | {start} | {end} | 0 | **⚠ 2** | 1 |",
        f"| 3 | cn02 | 103 | running | {start} | {end} | **⚠ 5** | 0 | 0 |",
        f"| 0 | cn01 | 100 | finished | {start} | {end} | 0 | 0 | 0 |",
        f"| 2 | cn02 | 102 | aborted &#40;code -3&#41; | {start} | {end} | 0 | 0 | 0 |",
    ]
    summary = components.ranks_summary(ranks)
    assert summary[0] == "4 of 4 ranks reported, on 3 hosts: cn02 (2), cn01 (1), cn|01 (1)."
    assert summary[1].className == "health-warning"
    assert summary[1].children.startswith(" 1 rank folded 5 new keys into overflow rows")
    assert summary[2].className == "health-error"
    assert summary[2].children == " 1 rank lost 2 frames: this job's counts are incomplete."
    healthy = components.ranks_summary(
        JobRanks(
            "j",
            2,
            (_rank(0, "a"), _rank(1, "a")),
            page=api_models.PageInfo(total=2, limit=9, next_cursor=None),
            ranks_reported=2,
            processes_reported=0,
            hosts=(HostRanks("a", 2),),
            health=api_models.RankHealth(
                ranks_folded=0, keys_dropped=0, ranks_lost=0, frames_dropped=0
            ),
        )
    )
    assert healthy == ["2 of 2 ranks reported, on 1 host: a (2)."]


def _job_ranks(world: int, ranks: tuple, hosts: tuple, mpi: int, processes: int,
               limit: int = 1000) -> api_models.JobRanks:  # fmt: skip
    """The ranks card's answer: a page `ranks` of `mpi` MPI ranks and `processes` non-MPI
    processes that reported (all pages), healthy."""
    total = mpi + processes
    return JobRanks(
        "j", world, ranks,
        page=api_models.PageInfo(total=total, limit=limit,
                                 next_cursor="x" if total > len(ranks) else None),
        ranks_reported=mpi, processes_reported=processes, hosts=hosts,
        health=api_models.RankHealth(ranks_folded=0, keys_dropped=0, ranks_lost=0,
                                     frames_dropped=0),
    )  # fmt: skip


#: `stacklens run -- bash script.sh` whose script runs `mpirun -np 2`: the shell (run 1, a
#: process) was seen first, then the MPI run's two ranks (run 2), as the API orders them.
SCRIPT = (_rank(0, "node1", run=1, kind="processes"), _rank(0, "node1", run=2),
          _rank(1, "node1", run=2))  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        # the shell is a process, not a third rank of a world of 2
        (_job_ranks(2, SCRIPT, (HostRanks("node1", 3),), 2, 1),
         "2 of 2 ranks reported, and 1 process, on 1 host: node1 (3)."),
        # MPI ranks only: as ever
        (_job_ranks(2, SCRIPT[1:], (HostRanks("node1", 2),), 2, 0),
         "2 of 2 ranks reported, on 1 host: node1 (2)."),
        (_job_ranks(4, (), (), 0, 0), "0 of 4 ranks reported."),
        # processes only (the job's world: no MPI run, 0), no rank named
        (_job_ranks(0, SCRIPT[:1], (HostRanks("node1", 1),), 0, 1),
         "1 process reported, on 1 host: node1 (1)."),
        (_job_ranks(0, (), (HostRanks("node1", 2), HostRanks("node2", 1)), 0, 3),
         "3 processes reported, on 2 hosts: node1 (2), node2 (1)."),
        # counted over every page, not the page: 5,000 ranks paged at 100, and the shell
        (_job_ranks(5000, tuple(_rank(r, "node1", run=2) for r in range(100)),
                    (HostRanks("node1", 5001),), 5000, 1, limit=100),
         "5000 of 5000 ranks reported, and 1 process, on 1 host: node1 (5001)."),
    ],
)  # fmt: skip
def test_the_ranks_card_says_ranks_and_processes_apart(answer, sentence):
    assert components.ranks_summary(answer) == [sentence]


def test_the_ranks_table_tells_a_process_from_the_rank_of_its_number():
    lines = components.ranks_table_markdown(
        _job_ranks(2, SCRIPT, (HostRanks("node1", 3),), 2, 1)
    ).splitlines()
    assert lines[0].startswith("2 ranks and 1 process, those with folded or lost counts first.")
    assert lines[2] == ("| Rank | Host | PID | Status | First seen | Last seen | Keys folded "
                        "| Frames lost | Frames spooled |")  # fmt: skip
    start, end = "1970-01-01 00&#58;00&#58;00 UTC", "1970-01-01 00&#58;01&#58;00 UTC"
    assert lines[4:] == [  # the ranks, then the processes
        f"| 0 | node1 | 100 | finished | {start} | {end} | 0 | 0 | 0 |",
        f"| 1 | node1 | 101 | finished | {start} | {end} | 0 | 0 | 0 |",
        f"| process 0 | node1 | 100 | finished | {start} | {end} | 0 | 0 | 0 |",
    ]
    paged = _job_ranks(5000, tuple(_rank(r, "node1", run=2) for r in range(100)),
                       (HostRanks("node1", 5001),), 5000, 1, limit=100)  # fmt: skip
    assert components.ranks_table_markdown(paged).startswith(
        "100 of 5000 ranks and 1 process, those with folded or lost counts first."
    )
    # the job report's ranks table says the same
    _, _, (table,) = card_reports.ranks_report(_job_ranks(2, SCRIPT, (HostRanks("node1", 3),),
                                                          2, 1))  # fmt: skip
    assert [row[0] for row in table.rows] == ["process 0", "0", "1"]  # the API's order
    assert table.note == "2 ranks and 1 process."


def test_heatmap_is_sized_by_the_data_never_by_the_claimed_world():
    cell = positional(api_models.MatrixCell)
    page = api_models.PageInfo(total=2, limit=9, next_cursor=None)
    claimed = api_models.Matrix(
        job="j", world_size=2**31 - 1, cells=(), page=page, block_ranks=1,
        blocks=(cell(0, 1, 300, 3), cell(1, 0, 50, 1)),
    )  # fmt: skip
    z = figures.matrix_heatmap(claimed).data[0].z
    assert [list(row) for row in z] == [[0, 300], [50, 0]]
    # Block indexes beyond the figure's side are merged further: 1,000 -> 126 per side
    # (8 blocks of 4 ranks per cell), never a 1,000 x 1,000 grid.
    far = claimed.model_copy(update={"block_ranks": 4, "blocks": (cell(0, 999, 7, 1),)})
    heatmap = figures.matrix_heatmap(far).data[0]
    assert len(heatmap.z) == 125 and heatmap.z[0][124] == 7
    assert heatmap.customdata[0][124][1:] == ["0–31", "3968–3999"]
    empty = figures.matrix_heatmap(claimed.model_copy(update={"blocks": ()}))
    assert empty.layout.annotations[0].text == "No point-to-point traffic recorded yet."
