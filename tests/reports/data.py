"""A job with hostile names for the report tests, sent through the real collector: its id,
command, user and file path hold HTML, a script and Markdown; two ranks on host1 and host2
of the small known fabric (tests/server/fabric_data.py, same T0), with point-to-point
traffic, a collective, message sizes, RMA and file I/O, so every figure of a report has
data."""

from __future__ import annotations

from stacklens import wire
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import T0, exchange

HOSTILE_JOB = "<script>window.pwned=1</script>"
HOSTILE_COMMAND = '<img src=x onerror="window.pwned=2"> **bold** [a](javascript:alert(1))'
HOSTILE_PATH = "/scratch/</script><b>x</b>/_under_.dat"
HOSTILE_USER = "<i>eve</i>"
INTERVALS = 3


def _frame(rank: int, seq: int) -> bytes:
    op = op_names().index
    tables = {
        "p2p": wire.records("p2p", [{"peer": 1 - rank, "bytes_sent": 4096, "msgs_sent": 4,
                                     "bytes_recv": 4096, "msgs_recv": 4}]),
        "op": wire.records("op", [
            {"op_id": op("MPI_Send"), "calls": 4, "bytes": 4096, "time_ns": 5_000_000},
            {"op_id": op("MPI_Bcast"), "calls": 1, "bytes": 64, "time_ns": 900_000},
        ]),
        "hist": wire.records("hist", [{"op_id": op("MPI_Send"), "bucket": 11, "count": 4}]),
        "coll": wire.records("coll", [{"op_id": op("MPI_Bcast"), "comm_id": 7, "comm_size": 2,
                                       "root": 0, "calls": 1, "bytes": 64, "time_ns": 900_000}]),
        "rma": wire.records("rma", [{"target": 1 - rank, "op_id": op("MPI_Put"), "calls": 2,
                                     "bytes": 32}]),
        "io": wire.records("io", [{"layer": 1, "phase": 0, "opens": 1, "writes": 1,
                                   "bytes_written": 100, "write_time_ns": 2_000_000,
                                   "path": HOSTILE_PATH.encode(), "mount": b"/scratch",
                                   "fstype": b"ext4"}]),
    }  # fmt: skip
    if seq == 0:
        tables["rank_info"] = wire.records(
            "rank_info", [{"command": HOSTILE_COMMAND.encode(), "user": HOSTILE_USER.encode()}]
        )
    return wire.encode_frame(job_id=HOSTILE_JOB, world_rank=rank, world_size=2, seq=seq,
                             host=f"host{rank + 1}", pid=300 + rank,
                             interval_start_ns=T0 + seq * 10**9,
                             interval_end_ns=T0 + (seq + 1) * 10**9, token="secret",
                             tables=tables)  # fmt: skip


def send_hostile_job(collector) -> None:
    """The hostile job's frames, committed."""
    frames = [_frame(rank, seq) for rank in (0, 1) for seq in range(INTERVALS)]
    acks = exchange(collector.address, b"".join(frames), acks=len(frames))
    assert [status for status, _ in acks] == [0] * len(frames)
