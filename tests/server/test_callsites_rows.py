"""server/callsites/repository.callsite_rows over frames sent through the real collector
into the real database: one row per (run, rank, site, op, communicator) with its calls,
bytes, time, size buckets and frames as the hooks sent them; the window."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.callsites.repository import OVERFLOW_SITE, callsite_rows
from server.jobs.repository import Scope
from server.query_params import Window
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import io_function_names, op_names
from stacklens.schema import Job
from tests.collector.test_ingest import T0, exchange

JOB = "sites/J"
S = 10**9
BID = "ab" * 20


def _frame(rank: int, seq: int, tables: dict) -> bytes:
    return wire.encode_frame(
        job_id=JOB, world_rank=rank, world_size=2, seq=seq, interval_start_ns=T0 + seq * S,
        interval_end_ns=T0 + (seq + 1) * S, token="secret",
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )  # fmt: skip


def _sites(rank: int) -> bytes:
    """Rank `rank`: Allreduce at site 0 (3 x 64 B, then 1 x 4000 B a second later), write()
    at site 1, sends beyond the bound (the overflow site)."""
    op = op_names().index
    write = io_function_names().index("write")
    frames = [
        {"site_id": 0, "frame": 0, "depth": 1, "site_offset": 0x1234 + rank,
         "build_id": BID.encode(), "module": b"/apps/solver"},
        {"site_id": 1, "frame": 0, "depth": 1, "site_offset": 0x99,
         "build_id": b"", "module": b"/lib/libio.so"},
    ]  # fmt: skip
    first = {
        "callsite": [
            {"site_id": 0, "op_id": op("MPI_Allreduce"), "comm_id": 7, "bucket": 7, "calls": 3,
             "bytes": 192, "time_ns": 300 + rank},
            {"site_id": 1, "layer": 1, "op_id": write, "comm_id": 2**32 - 1, "bucket": 13,
             "calls": 2, "bytes": 8192, "time_ns": 50},
            {"site_id": OVERFLOW_SITE, "op_id": op("MPI_Send"), "comm_id": 2**32 - 1,
             "calls": 4, "time_ns": 10},
        ],
        "callsite_frame": frames,
    }  # fmt: skip
    second = {
        "callsite": [
            {"site_id": 0, "op_id": op("MPI_Allreduce"), "comm_id": 7, "bucket": 12, "calls": 1,
             "bytes": 4000, "time_ns": 1000},
        ],
        "callsite_frame": frames[:1],  # a resent description: the same values
    }  # fmt: skip
    return _frame(rank, 0, first) + _frame(rank, 1, second)


def _allreduce(rank: int, calls: int, nbytes: int, ns: int, buckets: dict) -> dict:
    return {
        "run_id": 1, "rank": rank, "site_id": 0, "overflow": False, "layer": 0,
        "op_id": op_names().index("MPI_Allreduce"), "op": "MPI_Allreduce", "comm_id": 7,
        "calls": calls, "bytes": nbytes, "time_ns": ns, "buckets": buckets,
        "frames": [{"frame": 0, "module": "/apps/solver", "build_id": BID,
                    "offset": 0x1234 + rank}],
    }  # fmt: skip


def test_call_site_rows_per_rank_exact(collector, pg_url):
    payload = _sites(0) + _sites(1)
    assert [s for s, _ in exchange(collector.address, payload, acks=4)] == [0] * 4
    engine = make_engine(pg_url)
    with Session(engine) as session:
        job = session.scalars(select(Job.id)).one()
        rows = callsite_rows(session, Scope(job))
        first = callsite_rows(session, Scope(job, None, Window(T0, T0 + S + 1)))
    engine.dispose()
    assert len(rows) == 6
    assert rows[:2] == [
        _allreduce(1, 4, 4192, 1301, {7: 3, 12: 1}),
        _allreduce(0, 4, 4192, 1300, {7: 3, 12: 1}),
    ]
    assert rows[2] == {
        "run_id": 1, "rank": 0, "site_id": 1, "overflow": False, "layer": 1,
        "op_id": io_function_names().index("write"), "op": "write", "comm_id": None,
        "calls": 2, "bytes": 8192, "time_ns": 50, "buckets": {13: 2},
        "frames": [{"frame": 0, "module": "/lib/libio.so", "build_id": "", "offset": 0x99}],
    }  # fmt: skip
    assert rows[4] == {
        "run_id": 1, "rank": 0, "site_id": OVERFLOW_SITE, "overflow": True, "layer": 0,
        "op_id": op_names().index("MPI_Send"), "op": "MPI_Send", "comm_id": None, "calls": 4,
        "bytes": 0, "time_ns": 10, "buckets": {0: 4}, "frames": [],
    }  # fmt: skip
    # the first second only: the 64-byte calls
    assert first[0] == _allreduce(1, 3, 192, 301, {7: 3})
