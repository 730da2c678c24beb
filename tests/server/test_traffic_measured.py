"""Measured collectives in the attribution (server/traffic/repository.py): a run whose MPI
monitored its traffic (wire table monitored, server/traffic/monitored.py) gets collective transfers
of exactly measured - its own p2p per pair, labelled `measured`, and no modelled ones; a
run without measurements is modelled. Frames through the real collector."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.query_params import Window
from server.traffic.attribution import Transfer
from server.traffic.repository import TrafficConfig, job_traffic
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from stacklens.schema import Job
from tests.collector.test_ingest import T0, exchange


def _frame(job: str, rank: int, hosts: list[str], measured: dict[int, int] | None,
           run: int = 1) -> bytes:  # fmt: skip
    op = op_names().index
    tables: dict[str, list[dict[str, Any]]] = {
        "rank_info": [{"command": b"./prog", "user": b"alice"}],
        "p2p": [{"peer": 1 - rank, "bytes_sent": 1000 * (rank + 1), "msgs_sent": 1}],
        "coll": [
            {
                "op_id": op("MPI_Bcast"),
                "comm_id": 7,
                "comm_size": 2,
                "root": 0,
                "calls": 1,
                "bytes": 64,
            }
        ],  # fmt: skip
    }
    if measured is not None:
        tables["monitored"] = [{"peer": p, "bytes": b, "msgs": 1} for p, b in measured.items()]
    return wire.encode_frame(
        job_id=job, run_id=run, world_rank=rank, world_size=2, seq=0, host=hosts[rank],
        interval_start_ns=T0, interval_end_ns=T0 + 10**9, token="secret",
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )  # fmt: skip


def test_measured_collectives_replace_the_model(collector, pg_url):
    hosts = ["hA", "hB"]
    frames = _frame("measured", 0, hosts, {0: 10, 1: 5000}) + _frame(
        "measured", 1, hosts, {0: 3000}
    )
    frames += _frame("modelled", 0, hosts, None) + _frame("modelled", 1, hosts, None)
    # a job of two runs, the second one measured
    frames += _frame("mixed", 0, hosts, None) + _frame("mixed", 1, hosts, None)
    frames += _frame("mixed", 0, hosts, {1: 1000}, 2) + _frame("mixed", 1, hosts, {0: 2000}, 2)
    assert [s for s, _ in exchange(collector.address, frames, acks=8)] == [0] * 8
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            ids = dict(session.execute(select(Job.job_key, Job.id)).all())
            got = job_traffic(session, Window(T0, T0 + 2 * 10**9), TrafficConfig())
    finally:
        engine.dispose()
    m, o, x = ids["measured"], ids["modelled"], ids["mixed"]
    assert sorted(got.transfers, key=repr) == sorted([
        Transfer(x, "mpi_p2p", "routed", "hA", "hB", 1000),
        Transfer(x, "mpi_p2p", "routed", "hB", "hA", 2000),
        Transfer(x, "mpi_coll", "modelled", "hA", "hB", 64),
        Transfer(x, "mpi_p2p", "routed", "hA", "hB", 1000),
        Transfer(x, "mpi_p2p", "routed", "hB", "hA", 2000),
        Transfer(m, "mpi_p2p", "routed", "hA", "hB", 1000),
        Transfer(m, "mpi_p2p", "routed", "hB", "hA", 2000),
        Transfer(m, "mpi_coll", "measured", "hA", "hA", 10),
        Transfer(m, "mpi_coll", "measured", "hA", "hB", 4000),
        Transfer(m, "mpi_coll", "measured", "hB", "hA", 1000),
        Transfer(o, "mpi_p2p", "routed", "hA", "hB", 1000),
        Transfer(o, "mpi_p2p", "routed", "hB", "hA", 2000),
        Transfer(o, "mpi_coll", "modelled", "hA", "hB", 64),
    ], key=repr)  # fmt: skip
    assert got.collective_source == {m: "measured", o: "modelled", x: "mixed"}
    # the measured run's monitored bytes equal its p2p: no collective bytes, none below
    assert got.left_out == {}
