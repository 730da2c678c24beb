"""CSV files never carry a formula (issue #24 finding 5): a job whose host names, file paths
and mount points are spreadsheet formulas, ingested through the real collector, comes out
of the real HTTP exports with every such text cell behind a single quote (OWASP's rule),
RFC 4180 quoted where it must be, numbers (a negative root included) left as numbers; the
Parquet files keep the raw values; the SQL twin of the rule (the series CSV made in the
database) writes exactly what the Python one does."""

from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
import pytest
from sqlalchemy import literal, select

from server import export
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import exchange
from tests.collector.test_rollups import M0

S = 10**9

#: Text a spreadsheet would run as a formula, and text that only looks like a number.
HOSTILE = ["=1+2", "=cmd|' /C calc'!A0", '=HYPERLINK("http://x")', "\tfoo", "@SUM(1)", "-2+3",
           "+9", "\rbar", "plain"]  # fmt: skip

#: Each rank's host: formulas too (a host holds no control character: ingest refuses it).
HOSTS = ["=1+2", "@SUM(1)"]


@pytest.fixture
def hostile(collector):
    """Job `hostile`: two ranks on formula-named hosts; each wrote to every HOSTILE path
    (bytes_written 10 + its place) on the mount `@SUM(1)`, ran one MPI_Allreduce (no
    root: -1) and says its command is a formula."""
    op = op_names().index
    frames = []
    for rank, host in enumerate(HOSTS):
        tables = {
            "rank_info": [{"command": b"=cmd|' /C calc'!A0", "user": b"alice"}],
            "coll": [{"op_id": op("MPI_Allreduce"), "comm_id": 0, "comm_size": 2,
                      "root": 0xFFFFFFFF, "calls": 1, "bytes": 8, "time_ns": 5}],
            "io": [{"layer": 1, "writes": 1, "bytes_written": 10 + i, "path": path.encode(),
                    "mount": b"@SUM(1)", "fstype": b"ext4"} for i, path in enumerate(HOSTILE)],
        }  # fmt: skip
        frames.append(wire.encode_frame(
            job_id="hostile", world_rank=rank, world_size=2, seq=0, token="secret", host=host,
            pid=100 + rank, interval_start_ns=M0, interval_end_ns=M0 + S,
            tables={name: wire.records(name, rows) for name, rows in tables.items()},
        ))  # fmt: skip
    assert exchange(collector.address, b"".join(frames), acks=2) == [(0, 0), (0, 0)]
    return collector


def test_the_io_csv_neutralises_formula_paths_and_mounts(hostile, api_client):
    got = api_client.get("/api/jobs/hostile/io", params={"format": "csv"})
    assert got.headers["content-type"] == "text/csv; charset=utf-8"
    assert got.headers["content-disposition"] == 'attachment; filename="io.csv"'
    row = "POSIX,{},'@SUM(1),ext4,2,0,0,2,0,{},0,0,0\r\n"
    assert got.content == (
        b"layer,path,mount,fstype,ranks,opens,reads,writes,bytes_read,bytes_written,"
        b"read_time_ns,write_time_ns,meta_time_ns\r\n"
        + row.format("plain", 36).encode()
        + row.format('"\'\rbar"', 34).encode()
        + row.format("'+9", 32).encode()
        + row.format("'-2+3", 30).encode()
        + row.format("'@SUM(1)", 28).encode()
        + row.format("'\tfoo", 26).encode()
        + row.format('"\'=HYPERLINK(""http://x"")"', 24).encode()
        + row.format("'=cmd|' /C calc'!A0", 22).encode()
        + row.format("'=1+2", 20).encode()
    )


def test_the_ranks_csv_neutralises_formula_hosts(hostile, api_client):
    got = api_client.get("/api/jobs/hostile/ranks", params={"format": "csv"}).content
    row = f"{{}},{{}},{{}},{M0},{M0 + S},False,False,False,False,,running,0,0,0,1,mpi\r\n"
    assert got == (
        b"rank,host,pid,first_seen_ns,last_seen_ns,finished,killed,aborted,unfinalized,"
        b"abort_code,status,keys_dropped,frames_dropped,frames_spooled,run,kind\r\n"
        + row.format(0, "'=1+2", 100).encode()
        + row.format(1, "'@SUM(1)", 101).encode()
    )


def test_a_negative_number_stays_a_number(hostile, api_client):
    got = api_client.get("/api/jobs/hostile/collectives", params={"format": "csv"}).content
    head = b"op,comm_id,comm_size,root,ranks,calls,bytes,time_ns\r\n"
    assert got == head + b"MPI_Allreduce,0,2,-1,2,2,16,10\r\n"


def test_parquet_keeps_the_raw_values(hostile, api_client):
    io_file = api_client.get("/api/jobs/hostile/io", params={"format": "parquet"}).content
    table = pq.read_table(io.BytesIO(io_file)).to_pydict()
    assert table["path"] == list(reversed(HOSTILE))
    assert table["mount"] == ["@SUM(1)"] * len(HOSTILE)
    ranks_file = api_client.get("/api/jobs/hostile/ranks", params={"format": "parquet"}).content
    assert pq.read_table(io.BytesIO(ranks_file)).to_pydict()["host"] == HOSTS
    coll_file = api_client.get("/api/jobs/hostile/collectives", params={"format": "parquet"})
    assert pq.read_table(io.BytesIO(coll_file.content)).to_pydict()["root"] == [-1]


def test_the_sql_rule_writes_what_the_python_rule_does(pg_url):
    """csv_field_sql (the series CSV's key, made in the database) is, for every hostile
    text, the field Python's csv writer makes of csv_text of it."""
    engine = make_engine(pg_url)
    try:
        with engine.connect() as conn:
            got = [conn.execute(select(export.csv_field_sql(literal(v)))).scalar_one()
                   for v in HOSTILE]  # fmt: skip
    finally:
        engine.dispose()
    assert got == ["'=1+2", "'=cmd|' /C calc'!A0", "\"'=HYPERLINK(\"\"http://x\"\")\"",
                   "'\tfoo", "'@SUM(1)", "'-2+3", "'+9", "\"'\rbar\"", "plain"]  # fmt: skip
    for value, field in zip(HOSTILE, got, strict=True):
        written = io.StringIO()
        csv.writer(written, lineterminator="\r\n").writerow([export.csv_text(value), 1])
        assert written.getvalue() == f"{field},1\r\n"
