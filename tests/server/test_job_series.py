"""Series of a job: values per step by category, op, rank, file and peer over the job with
the known time profile of test_job_windows; every step is the sum of the intervals that
ended in it, the steps add up to the window's totals, and CSV and Parquet carry the same
rows."""

from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
import pytest

from stacklens import wire
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0
from tests.server.test_job_windows import ENDS, S, job, sent  # noqa: F401 (fixture)

BASE = "/api/jobs/windows/series"


def ks_in(lo: int, hi: int) -> list[int]:
    return [k for k, end in enumerate(ENDS) if lo <= end < hi]


def test_series_by_rank_per_step(job, api_client):  # noqa: F811
    params = {"by": "rank", "from": M0 // S, "to": M0 // S + 60, "step": 20}
    answer = api_client.get(BASE, params=params).json()
    assert (answer["from_ns"], answer["to_ns"], answer["step_ns"]) == (M0, M0 + 60 * S, 20 * S)
    assert answer["metrics"] == ["mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes",
                                 "io_time_ns"]  # fmt: skip
    want = []
    for t in range(M0, M0 + 60 * S, 20 * S):
        ks = ks_in(t, t + 20 * S)
        for rank in (0, 1):
            values = [len(ks), sum(ks), sum(sent(k, rank) for k in ks), 100 * sum(ks), 0]
            want.append({"t_ns": t, "key": str(rank), "values": values})
    assert answer["points"] == want


@pytest.mark.parametrize("by", ["category", "op", "rank", "file", "peer"])
def test_steps_add_up_to_the_window_totals(job, api_client, by):  # noqa: F811
    lo, hi = M0 + 15 * S, M0 + 155 * S
    params = {"by": by, "from": lo // S, "to": hi // S, "step": 7}
    points = api_client.get(BASE, params=params).json()["points"]
    assert all((p["t_ns"] - lo) % (7 * S) == 0 for p in points)
    totals: dict[str, list[int]] = {}
    for p in points:
        totals[p["key"]] = [a + b for a, b in zip(totals.get(p["key"], [0] * len(p["values"])),
                                                  p["values"], strict=True)]  # fmt: skip
    ks = ks_in(lo, hi)
    window = {"from": lo // S, "to": hi // S}
    if by in ("category", "op"):
        key = "mpi_p2p" if by == "category" else "MPI_Send"
        sends = [2 * len(ks), sum(sent(k, 0) + sent(k, 1) for k in ks), 2 * sum(ks)]
        assert totals[key] == sends
        ops = api_client.get("/api/jobs/windows/ops", params=window).json()["ops"]
        assert sends == [ops[0]["calls"], ops[0]["bytes"], ops[0]["time_ns"]]
    if by == "category":
        assert totals["fs:POSIX"] == [2 * len(ks), 2 * 100 * sum(ks), 0]
    if by == "file":
        assert totals == {"POSIX:/tmp/out": [0, 2 * len(ks), 0, 2 * 100 * sum(ks), 0]}
    if by == "peer":
        cells = api_client.get("/api/jobs/windows/matrix", params=window).json()["cells"]
        assert totals == {str(c["dst"]): [c["bytes"], c["messages"]] for c in cells}


def test_an_empty_window_has_no_points(job, api_client):  # noqa: F811
    params = {"from": M0 // S + 2, "to": M0 // S + 8}
    assert api_client.get(BASE, params=params).json()["points"] == []


def test_the_step_is_chosen_from_the_window(job, api_client):  # noqa: F811
    whole = api_client.get(BASE).json()  # the whole job: 190 s -> 1 s steps
    assert (whole["from_ns"], whole["to_ns"], whole["step_ns"]) == (
        M0 - 10 * S,  # the first interval start, down to a whole step
        ENDS[-1] + 1,
        S,
    )
    day = api_client.get(BASE, params={"from": M0 // S, "to": M0 // S + 86400}).json()
    assert day["step_ns"] == 300 * S  # 288 steps of 5 minutes
    too_many = api_client.get(BASE, params={"from": 0, "to": M0 // S, "step": 1})
    assert too_many.status_code == 422
    assert "more than 100000 steps" in too_many.json()["detail"]


def test_series_and_tables_as_csv_and_parquet(job, api_client):  # noqa: F811
    params = {"by": "rank", "from": M0 // S, "to": M0 // S + 60, "step": 20}
    points = api_client.get(BASE, params=params).json()["points"]
    rows = [{"t_ns": p["t_ns"], "key": p["key"],
             **dict(zip(["mpi_calls", "mpi_time_ns", "bytes_sent", "io_bytes", "io_time_ns"],
                        p["values"], strict=True))} for p in points]  # fmt: skip
    as_csv = api_client.get(BASE, params={**params, "format": "csv"})
    assert as_csv.headers["content-type"] == "text/csv; charset=utf-8"
    read = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert read == [{k: str(v) for k, v in row.items()} for row in rows]
    as_parquet = api_client.get(BASE, params={**params, "format": "parquet"})
    assert as_parquet.headers["content-type"] == "application/vnd.apache.parquet"
    assert pq.read_table(io.BytesIO(as_parquet.content)).to_pylist() == rows

    ops = api_client.get("/api/jobs/windows/ops").json()["ops"]
    table = pq.read_table(io.BytesIO(
        api_client.get("/api/jobs/windows/ops", params={"format": "parquet"}).content))  # fmt: skip
    assert table.to_pylist() == ops
    matrix = api_client.get("/api/jobs/windows/matrix", params={"format": "csv"}).text
    assert matrix.splitlines() == ["src,dst,bytes,messages", "0,1,1710,18", "1,0,171,18"]


#: File names that CSV must quote (a comma, a double quote, line breaks) and one it must not.
ODD_PATHS = [b"/tmp/plain name", b"/tmp/a,b", b'/tmp/say "hi"', b"/tmp/two\nlines", b"/tmp/cr\rx"]


@pytest.mark.parametrize("by", ["file", "category", "rank"])
def test_csv_is_what_pythons_csv_writes_of_the_points(collector, api_client, by):
    """The series CSV (made in the database) is byte for byte what Python's csv module
    writes of the JSON answer's points: header, CRLF line ends, odd file names quoted."""
    frames = [
        wire.encode_frame(
            job_id="odd", world_rank=rank, world_size=2, seq=k, token="secret",
            interval_start_ns=M0 + k * S, interval_end_ns=M0 + (k + 1) * S,
            tables={
                "op": wire.records("op", [{"op_id": op_names().index("MPI_Send"), "calls": 1,
                                           "bytes": k + rank, "time_ns": 7 * k}]),
                "io": wire.records("io", [{"layer": 1, "writes": 1, "bytes_written": 10 * k + i,
                                           "path": path, "mount": b"/", "fstype": b"ext4"}
                                          for i, path in enumerate(ODD_PATHS)]),
            },
        )
        for k in range(3) for rank in (0, 1)
    ]  # fmt: skip
    assert [s for s, _ in exchange(collector.address, b"".join(frames), acks=6)] == [0] * 6
    params = {"by": by, "from": M0 // S, "to": M0 // S + 4, "step": 2}
    answer = api_client.get("/api/jobs/odd/series", params=params).json()
    assert len(answer["points"]) >= 4
    want = io.StringIO()
    writer = csv.writer(want, lineterminator="\r\n")
    writer.writerow(["t_ns", "key", *answer["metrics"]])
    writer.writerows([p["t_ns"], p["key"], *p["values"]] for p in answer["points"])
    got = api_client.get("/api/jobs/odd/series", params={**params, "format": "csv"})
    assert got.headers["content-disposition"] == f'attachment; filename="series-by-{by}.csv"'
    assert got.content.decode() == want.getvalue()
    if by == "file":
        assert '"POSIX:/tmp/say ""hi"""' in got.text and "POSIX:/tmp/plain name," in got.text
    empty = api_client.get(
        "/api/jobs/odd/series",
        params={**params, "from": M0 // S + 60, "to": M0 // S + 64, "format": "csv"},
    )
    assert empty.content.decode() == "t_ns,key," + ",".join(answer["metrics"]) + "\r\n"
