"""Every job endpoint answers for exactly its window: a job with a known time profile (frames
built with the real wire encoder, ingested through the real collector, partly rolled up
into minutes) gives, for every window, exactly the sums of the intervals that ended in it,
whether they are read from the rollups, the raw deltas or both; an empty window is empty."""

from __future__ import annotations

from typing import Any

import pytest

from stacklens import wire
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0, roll_up

S = 10**9
#: Interval ends of each rank: every 10 s over three minutes, 1 ns past a 10-second mark.
ENDS = [M0 + k * 10 * S + 1 for k in range(18)]


def sent(k: int, rank: int) -> int:
    """Bytes rank `rank` sent to the other rank in its interval number k."""
    return (k + 1) * (10 if rank == 0 else 1)


def profile_frame(k: int, rank: int) -> bytes:
    """Interval k of a two-rank job: point-to-point, MPI_Send and file I/O records whose
    values name the interval."""
    op = op_names().index
    tables: dict[str, list[dict[str, Any]]] = {
        "p2p": [{"peer": 1 - rank, "bytes_sent": sent(k, rank), "msgs_sent": 1}],
        "op": [{"op_id": op("MPI_Send"), "calls": 1, "bytes": sent(k, rank), "time_ns": k}],
        "io": [{"layer": 1, "writes": 1, "bytes_written": 100 * k, "path": b"/tmp/out",
                "mount": b"/", "fstype": b"ext4"}],
    }  # fmt: skip
    return wire.encode_frame(
        job_id="windows", world_rank=rank, world_size=2, seq=k, token="secret",
        interval_start_ns=ENDS[k] - 10 * S, interval_end_ns=ENDS[k],
        tables={name: wire.records(name, rows) for name, rows in tables.items()},
    )  # fmt: skip


@pytest.fixture
def job(collector):
    """The job stored, rolled up, and then one minute made dirty again by a late frame."""
    frames = [profile_frame(k, rank) for k in range(17) for rank in (0, 1)]
    assert [s for s, _ in exchange(collector.address, b"".join(frames), acks=34)] == [0] * 34
    assert roll_up(collector) > 0
    exchange(collector.address, profile_frame(17, 0) + profile_frame(17, 1), acks=2)
    return collector


def expected(lo: int | None, hi: int | None) -> dict:
    """The sums of the intervals that ended in [lo, hi)."""
    ks = [k for k, end in enumerate(ENDS) if (lo is None or end >= lo) and (hi is None or end < hi)]
    cells = [{"src": r, "dst": 1 - r, "bytes": sum(sent(k, r) for k in ks), "messages": len(ks)}
             for r in (0, 1)] if ks else []  # fmt: skip
    return {"cells": cells, "time_ns": 2 * sum(ks), "written": 2 * 100 * sum(ks), "n": len(ks)}


WINDOWS = [
    (None, None),  # the whole job
    (M0, M0 + 60 * S),  # one whole minute, rolled up
    (M0 + 60 * S, M0 + 180 * S),  # a rolled-up minute and the dirty one
    (M0 + 15 * S, M0 + 125 * S),  # edges inside minutes on both sides
    (M0 + 21 * S, M0 + 29 * S),  # inside one minute, no whole minute
    (M0 + 20 * S + 1, M0 + 30 * S + 1),  # exactly one interval: from inclusive, to exclusive
    (M0 + 2 * S, M0 + 8 * S),  # no interval ended in it: empty
    (M0 + 1000 * S, None),  # after the job: empty
    (None, M0 + 100 * S),  # open start
]


@pytest.mark.parametrize(("lo", "hi"), WINDOWS)
def test_every_window_is_the_sum_of_its_intervals(job, api_client, lo, hi):
    params = {k: f"{v // S}.{v % S:09d}" for k, v in (("from", lo), ("to", hi)) if v is not None}
    want = expected(lo, hi)
    base = "/api/jobs/windows"
    assert api_client.get(f"{base}/matrix", params=params).json()["cells"] == want["cells"]
    ops = api_client.get(f"{base}/ops", params=params).json()["ops"]
    assert [(o["op"], o["calls"], o["time_ns"]) for o in ops] == (
        [("MPI_Send", 2 * want["n"], want["time_ns"])] if want["n"] else []
    )
    files = api_client.get(f"{base}/io", params=params).json()["files"]
    assert [(f["path"], f["bytes_written"]) for f in files] == (
        [("/tmp/out", want["written"])] if want["n"] else []
    )
    ranks = api_client.get(f"{base}/ranks", params=params).json()["ranks"]
    # ranks seen during the window: their first interval began before its end, their last
    # ended at or after its start
    seen = (lo is None or ENDS[-1] >= lo) and (hi is None or ENDS[0] - 10 * S < hi)
    assert [r["rank"] for r in ranks] == ([0, 1] if seen else [])


def test_adjacent_windows_add_up_to_the_whole(job, api_client):
    cuts = [M0 + c * S for c in (0, 7, 61, 90, 119, 181)]
    total = [0, 0]
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        cells = api_client.get(
            "/api/jobs/windows/matrix", params={"from": lo / S, "to": hi / S}
        ).json()["cells"]
        for cell in cells:
            total[cell["src"]] += cell["bytes"]
    assert total == [c["bytes"] for c in expected(None, None)["cells"]]


def test_rfc3339_and_epoch_windows_agree(job, api_client):
    epoch = {"from": str(M0 // S + 60), "to": str(M0 // S + 120)}
    rfc = {"from": "2023-11-14T22:15:00Z", "to": "2023-11-14T23:16:00+01:00"}
    a = api_client.get("/api/jobs/windows/matrix", params=epoch).json()
    assert a == api_client.get("/api/jobs/windows/matrix", params=rfc).json()
    assert a["cells"] == expected(M0 + 60 * S, M0 + 120 * S)["cells"]
