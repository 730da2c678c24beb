"""Pure pieces of the dashboard: durations, and the Markdown tables of MPI ops and file I/O
(the browser shows them in tests/e2e/test_dashboard.py)."""

from __future__ import annotations

import pytest

from frontend import components
from presentation import components as card_parts
from presentation.formatting import format_duration_ns
from stacklens.api_models import (
    CategoryTotal,
    FileIo,
    IoTotals,
    JobIo,
    JobLinks,
    JobOps,
    OpTotal,
    PageInfo,
)

NO_IO = IoTotals(files=0, bytes_read=0, bytes_written=0)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (999, "999 ns"),
        (1000, "1.00 µs"),
        (12_345, "12.3 µs"),
        (999_499, "999 µs"),
        (999_500, "1.00 ms"),
        (3_200_000, "3.20 ms"),
        (100_000_000, "100 ms"),
        (75_000_000_000, "75.0 s"),
        (999_499_999_999, "999 s"),
        (1_234_567_890_123, "1,235 s"),
    ],
)
def test_durations_read_with_three_digits(ns, text):
    assert format_duration_ns(ns) == text


def _op(name: str, time_ns: int) -> OpTotal:
    return OpTotal(
        op=name, category="mpi_p2p", received=False, calls=1, bytes=2048, time_ns=time_ns, ranks=1
    )


def test_ops_table_is_capped_and_says_so():
    n = card_parts.MAX_OP_ROWS + 5
    ops = JobOps(job="j", categories=(), ops=tuple(_op(f"MPI_Op{i}", n - i) for i in range(n)))
    lines = card_parts.ops_table_markdown(ops).splitlines()
    assert lines[0].startswith(f"Heaviest {card_parts.MAX_OP_ROWS} of {n} MPI operations")
    rows = lines[4:]
    assert len(rows) == card_parts.MAX_OP_ROWS
    assert rows[0] == "| MPI&#95;Op0 | point-to-point | 1 | 1 | 2048 | 2.00 KiB | 55 ns |"


def test_ops_summary_lists_the_categories_with_calls():
    """Time inside MPI is communication only: start-up comes after it, apart; bytes say
    whether they were sent or received."""
    categories = (
        CategoryTotal(category="mpi_p2p", calls=3, bytes_sent=1536, bytes_received=1536,
                      time_ns=2_000, communication=True),
        CategoryTotal(category="mpi_rma", calls=0, bytes_sent=0, bytes_received=0, time_ns=0,
                      communication=True),
        CategoryTotal(category="io", calls=1, bytes_sent=0, bytes_received=0, time_ns=500,
                      communication=True),
        CategoryTotal(category="mpi_startup", calls=2, bytes_sent=0, bytes_received=0,
                      time_ns=9_000_000, communication=False),
    )  # fmt: skip
    summary = card_parts.ops_summary(JobOps(job="j", categories=categories, ops=()))
    text = "".join(
        part if isinstance(part, str) else part.children[0].children + part.children[1]
        for part in summary
    )
    assert text == (
        "2.50 µs inside MPI communication calls: point-to-point 2.00 µs, 1.50 KiB sent, "
        "1.50 KiB received · file I/O 500 ns, 0 B sent; apart from it: start-up (MPI_Init, "
        "MPI_Finalize, MPI_Abort) 9.00 ms, 0 B sent"
    )
    none = JobOps(job="j", categories=categories[1:2], ops=())
    assert card_parts.ops_summary(none) == "No MPI operations recorded for this job."


def _io(files: list[FileIo], total: int, startup: IoTotals = NO_IO) -> JobIo:
    page = PageInfo(total=total, limit=len(files) or 1, next_cursor=None)
    return JobIo(job="j", files=files, startup=startup, page=page)


def test_a_job_without_files_gets_a_sentence():
    assert card_parts.file_caption(_io([], 0)) == (
        "No file I/O: the job has not opened, read or written any file "
        "through POSIX, stdio or MPI-IO."
    )
    startup = IoTotals(files=3, bytes_read=2048, bytes_written=0)
    assert card_parts.file_caption(_io([], 0, startup)).endswith(
        " Start-up I/O before MPI_Init, not in the grid: 3 files, 2.00 KiB read, 0 B written."
    )


def test_file_rows_keep_paths_exact_and_the_caption_counts_all_pages():
    """A path is the job's text: the grid shows it as text, exactly as the job wrote it."""
    path = "/data/a|b*c_[x](y)<other>&amp;\\`z`\nnext:@~!"
    row = FileIo(
        layer="POSIX",
        path=path,
        mount="/data",
        fstype="lustre",
        ranks=1,
        opens=1,
        reads=0,
        writes=1,
        bytes_read=0,
        bytes_written=7,
        read_time_ns=0,
        write_time_ns=1500,
        meta_time_ns=20,
    )
    (shown,) = card_parts.file_rows(_io([row], 5000))
    assert shown == {
        "id": f"POSIX:{path}", "layer": "POSIX", "path": path, "fstype": "lustre",
        "mount": "/data", "ranks": 1, "opens": 1, "reads": 0, "writes": 1, "bytes_read": 0,
        "bytes_written": 7, "read_time": format_duration_ns(0),
        "write_time": format_duration_ns(1500), "meta_time": format_duration_ns(20),
    }  # fmt: skip
    assert card_parts.file_caption(_io([row], 5000)).startswith(
        "The 1 of 5,000 files (per I/O layer) with the most bytes."
    )
    assert {c["field"] for c in card_parts.FILE_COLUMNS} == set(shown) - {"id"}


def test_the_hosts_and_links_card_tables():
    from stacklens.api_models import JobPlacement

    end = {"guid": "0x0000000000000001", "port": 1}
    placement = JobPlacement(
        job="j",
        from_ns=0,
        to_ns=1,
        crossed="topological candidates",
        hosts=[
            {"host": "n|1", "ranks": [0, 1, 2, 5], "match": "guid",
             "ports": [{**end, "name": "n1"}]},
            {"host": "login", "ranks": [3], "match": "unmatched", "ports": []},
        ],
        links=[{
            "id": 7, "a": {**end, "name": "sw"}, "b": {**end, "name": "n1"}, "state": "up",
            "capacity_bytes_per_s": 100, "kind": "host", "hosts": ["n|1"], "samples": 2,
            "a_to_b_bytes": 10, "b_to_a_bytes": None, "a_to_b_bytes_per_s": 5.0,
            "b_to_a_bytes_per_s": None, "utilisation": 0.05, "peak_utilisation": 0.1,
            "xmit_wait": 3, "xmit_wait_per_s": 1.5,
        }],
    )  # fmt: skip
    hosts = components.placement_hosts_markdown(placement).splitlines()
    assert hosts[0] == "2 hosts, 1 not found on the fabric."
    assert hosts[4:] == [
        "| n&#124;1 | 0–2, 5 | guid | n1&#91;1&#93; 0x0000000000000001 |",
        "| login | 3 | **⚠ unmatched** | — |",
    ]
    links = components.placement_links_markdown(placement).splitlines()
    assert "topological candidates" in links[0]
    # Written n1[1] - sw[1]: left to right is b -> a (unknown), right to left a -> b.
    row = "| n1&#91;1&#93; - sw&#91;1&#93; | host | n&#124;1 | 5.0 % | 10.0 % | ? | 5 | 3 | 2 |"
    assert links[4:] == [row]


def test_the_rails_table_says_which_ranks_use_each_rail_and_its_bytes():
    rail = {"host": "host02", "guid": "0x0000000000000002", "received_bytes": 0}
    links = JobLinks(
        job="j", from_ns=0, to_ns=1, paths="fixed", collectives="modelled", links=[],
        page=PageInfo(limit=1, total=0, next_cursor=None), left_out={},
        rails=[
            {**rail, "rail": 0, "device": "mlx5_0", "ranks": [], "pinned": [],
             "sent_bytes": 0, "provenance": []},
            {**rail, "rail": 1, "device": "mlx5_1", "ranks": [2, 3], "pinned": [3],
             "sent_bytes": 3 * 1024**2, "received_bytes": 1024,
             "provenance": [
                 {"provenance": "routed", "sent_bytes": 2 * 1024**2, "received_bytes": 1024},
                 {"provenance": "modelled", "sent_bytes": 1024**2, "received_bytes": 0},
             ]},
        ],
    )  # fmt: skip
    text = components.placement_rails_markdown(links).splitlines()
    assert text[0].startswith("2 rails on 1 host: a rank sends and receives on the devices")
    assert text[2:] == [
        "| Host | Rail | Ranks | Sent | Received | By provenance |",
        "|---|---|---|---:|---:|---|",
        "| host02 | 0 mlx5&#95;0 | — | 0 B | 0 B | — |",
        "| host02 | 1 mlx5&#95;1 | 2–3 (pinned: 3) | 3.00 MiB | 1.00 KiB | routed 2.00 MiB sent, "
        "1.00 KiB received; modelled 1.00 MiB sent, 0 B received |",
    ]
    assert components.placement_rails_markdown(None) == "Every host of this job has one rail (HCA)."
