"""The jobs API over a real database filled through a real collector."""

from __future__ import annotations

import psycopg
import pytest

from server import paging
from stacklens import wire
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import T0, exchange, frame


def run_summary(run: int, start: int, end: int, ranks_seen: int, **fields) -> dict:
    """One item of a job's `runs` as the frames of tests.collector.test_ingest make it (no
    launch record: not launched by `stacklens run`)."""
    return {"run": run, "kind": "mpi", "label": None, "world_size": 2,
            "command": "./prog --size 8", "user": "alice", "status": "running",
            "started_ns": start, "last_seen_ns": end, "finished_ns": None,
            "ranks_seen": ranks_seen, "ranks_expected": None, "exit_code": None,
            "exit_signal": None, "forwarded_signal": None, "launch_output": None,
            **fields}  # fmt: skip


def test_jobs_and_matrix(collector, api_client):
    rows_0 = [{"peer": 1, "bytes_sent": 300, "msgs_sent": 3}]
    rows_1 = [{"peer": 0, "bytes_sent": 50, "msgs_sent": 1}]
    exchange(
        collector.address,
        frame(0, p2p_rows=rows_0) + frame(1, p2p_rows=rows_0) + frame(0, rank=1, p2p_rows=rows_1),
        acks=3,
    )
    exchange(collector.address, frame(0, job="job-B", p2p_rows=[]), acks=1)

    # Newest first: same start, so the later-registered job-B comes first.
    jobs = api_client.get(api_client.app.url_path_for("list_jobs")).json()
    assert jobs["page"] == {"total": 2, "limit": 100, "next_cursor": None}
    assert jobs["jobs"] == [
        {
            "job": "job-B",
            "world_size": 2,
            "command": "./prog --size 8",
            "user": "alice",
            "status": "running",
            "started_ns": T0,
            "last_seen_ns": T0 + 10**9,
            "ranks_seen": 1,
            "bytes_sent": 0,
            "messages_sent": 0,
            "runs": [run_summary(1, T0, T0 + 10**9, ranks_seen=1)],
        },
        {
            "job": "job-A",
            "world_size": 2,
            "command": "./prog --size 8",
            "user": "alice",
            "status": "running",
            "started_ns": T0,
            "last_seen_ns": T0 + 2 * 10**9,
            "ranks_seen": 2,
            "bytes_sent": 650,
            "messages_sent": 7,
            "runs": [run_summary(1, T0, T0 + 2 * 10**9, ranks_seen=2)],
        },
    ]
    matrix = api_client.get(api_client.app.url_path_for("job_matrix", job="job-A")).json()
    assert matrix == {
        "job": "job-A",
        "run": None,
        "world_size": 2,
        "cells": [
            {"src": 0, "dst": 1, "bytes": 600, "messages": 6},
            {"src": 1, "dst": 0, "bytes": 50, "messages": 1},
        ],
        "page": {"total": 2, "limit": 5000, "next_cursor": None},
        "block_ranks": 1,
        "blocks": [
            {"src": 0, "dst": 1, "bytes": 600, "messages": 6},
            {"src": 1, "dst": 0, "bytes": 50, "messages": 1},
        ],
    }


def counters_frame(seq: int, rank: int, *, ops=(), io=(), job: str = "job-C") -> bytes:
    """A frame of a two-rank job with only `op` records ((name, calls, bytes, time_ns)) and
    `io` records (dicts of the io table, path/mount/fstype as str)."""
    op_rows = [
        {"op_id": op_names().index(name), "calls": calls, "bytes": nbytes, "time_ns": t}
        for name, calls, nbytes, t in ops
    ]
    io_rows = [{**row, **{k: row[k].encode() for k in ("path", "mount", "fstype")}} for row in io]
    return wire.encode_frame(
        job_id=job,
        world_rank=rank,
        world_size=2,
        seq=seq,
        host=f"node{rank}",
        interval_start_ns=T0 + seq * 10**9,
        interval_end_ns=T0 + (seq + 1) * 10**9,
        token="secret",
        tables={"op": wire.records("op", op_rows), "io": wire.records("io", io_rows)},
    )


def send_committed(collector, frames: list[bytes]) -> None:
    """Send frames to the collector and check that each was committed."""
    acks = exchange(collector.address, b"".join(frames), acks=len(frames))
    assert [status for status, _ in acks] == [0] * len(frames)


def op_total(op: str, category: str, calls: int, nbytes: int, time_ns: int, ranks: int,
             received: bool = False):  # fmt: skip
    """One row of the expected `ops` list."""
    return {"op": op, "category": category, "received": received, "calls": calls,
            "bytes": nbytes, "time_ns": time_ns, "ranks": ranks}  # fmt: skip


def test_job_ops_are_summed_over_ranks_and_intervals(collector, api_client):
    frames = [
        counters_frame(
            0,
            0,
            ops=[
                ("MPI_Init", 1, 0, 50),
                ("MPI_Send", 3, 300, 1000),
                ("MPI_Waitall", 1, 0, 5000),
                ("MPI_Allreduce", 2, 80, 2000),
            ],
        ),
        counters_frame(
            1,
            0,
            ops=[
                ("MPI_Send", 2, 200, 500),
                ("MPI_Allreduce", 1, 40, 1500),
                ("MPI_Barrier", 0, 0, 0),  # no calls: not listed
            ],
        ),
        counters_frame(
            0,
            1,
            ops=[
                ("MPI_Init", 1, 0, 50),
                ("MPI_Recv", 5, 500, 9000),
                ("MPI_Allreduce", 3, 120, 700),
            ],
        ),
        counters_frame(
            1, 1, ops=[("MPI_File_write_at_all", 1, 1000, 3000), ("MPI_Put", 4, 64, 100)]
        ),
        counters_frame(0, 0, ops=[("MPI_Send", 7, 7, 7)], job="job-other"),
    ]
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_ops", job="job-C")).json()
    assert body["job"] == "job-C"
    # Heaviest time first; MPI_Init and MPI_Put tie at 100 ns and come by name.
    assert body["ops"] == [
        op_total("MPI_Recv", "mpi_p2p", 5, 500, 9000, 1, received=True),
        op_total("MPI_Waitall", "mpi_completion", 1, 0, 5000, 1),
        op_total("MPI_Allreduce", "mpi_coll", 6, 240, 4200, 2),
        op_total("MPI_File_write_at_all", "io", 1, 1000, 3000, 1),
        op_total("MPI_Send", "mpi_p2p", 5, 500, 1500, 1),
        op_total("MPI_Init", "mpi_startup", 2, 0, 100, 2),
        op_total("MPI_Put", "mpi_rma", 4, 64, 100, 1),
    ]
    # Every category, in a fixed order, zeros included; a message's bytes are sent once
    # (500 by MPI_Send) and received apart (500 by MPI_Recv), never added up to 1000;
    # start-up (MPI_Init) is not communication.
    assert body["categories"] == [
        category("mpi_p2p", 10, 500, 500, 10500),
        category("mpi_completion", 1, 0, 0, 5000),
        category("mpi_coll", 6, 240, 0, 4200),
        category("mpi_rma", 4, 64, 0, 100),
        category("io", 1, 1000, 0, 3000),
        category("mpi_startup", 2, 0, 0, 100, communication=False),
        category("other", 0, 0, 0, 0),
    ]


def category(name: str, calls: int, sent: int, received: int, time_ns: int,
             communication: bool = True) -> dict:  # fmt: skip
    """One row of the expected `categories` list."""
    return {"category": name, "calls": calls, "bytes_sent": sent, "bytes_received": received,
            "time_ns": time_ns, "communication": communication}  # fmt: skip


def io_row(layer: int, path: str, mount: str = "/scratch", fstype: str = "lustre", **counters):
    """One io record (counters not given are zero; w = writes + bytes_written + write_time_ns,
    r = reads + bytes_read + read_time_ns, meta = meta_time_ns)."""
    for short, names in (("w", ("writes", "bytes_written", "write_time_ns")),
                         ("r", ("reads", "bytes_read", "read_time_ns"))):  # fmt: skip
        if short in counters:
            counters.update(zip(names, counters.pop(short), strict=True))
    if "meta" in counters:
        counters["meta_time_ns"] = counters.pop("meta")
    return {"layer": layer, "path": path, "mount": mount, "fstype": fstype, **counters}


def test_job_io_is_summed_per_layer_and_path(collector, api_client):
    a, shared = "/scratch/a.dat", "/scratch/shared.out"
    frames = [
        counters_frame(
            0,
            0,
            io=[
                io_row(1, a, opens=1, w=(3, 12288, 300), meta=50),
                io_row(1, shared, opens=1, w=(1, 2000, 20)),
                io_row(2, "/tmp/log.txt", "/tmp", "tmpfs", opens=1, w=(5, 500, 0)),
                io_row(1, "/local/x", "/local", "xfs", w=(1, 10, 0)),
            ],
        ),
        counters_frame(
            1,
            0,
            io=[
                io_row(1, a, r=(1, 12288, 100), meta=20),
                io_row(3, shared, opens=1, w=(1, 1000, 70), meta=10),
            ],
        ),
        counters_frame(0, 1, io=[io_row(1, a, opens=1, r=(2, 4096, 40)),
                                 # before MPI_Init: start-up, apart from the program's
                                 io_row(1, a, phase=1, opens=1, r=(1, 100, 5))]),
        counters_frame(
            1,
            1,
            io=[
                io_row(3, shared, opens=1, w=(1, 1000, 80), meta=5),
                io_row(1, "/local/x", "/", "ext4", w=(1, 10, 0)),
            ],
        ),
        counters_frame(0, 0, io=[io_row(1, a, w=(1, 1, 1))], job="job-other"),
    ]  # fmt: skip
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_io", job="job-C")).json()
    assert body["job"] == "job-C"

    def row(layer, path, mount, fstype, ranks, *counters):
        names = ("opens", "reads", "writes", "bytes_read", "bytes_written",
                 "read_time_ns", "write_time_ns", "meta_time_ns")  # fmt: skip
        fields = {"layer": layer, "path": path, "mount": mount, "fstype": fstype, "ranks": ranks}
        return {**fields, **dict(zip(names, counters, strict=True))}

    # Most bytes (read + written) first; the two 2000-byte rows by layer (POSIX first).
    assert body["files"] == [
        row("POSIX", a, "/scratch", "lustre", 2, 2, 3, 3, 16384, 12288, 140, 300, 70),
        row("POSIX", shared, "/scratch", "lustre", 1, 1, 0, 1, 0, 2000, 0, 20, 0),
        row("MPI-IO", shared, "/scratch", "lustre", 2, 2, 0, 2, 0, 2000, 0, 150, 15),
        row("stdio", "/tmp/log.txt", "/tmp", "tmpfs", 1, 1, 0, 5, 0, 500, 0, 0, 0),
        # A node-local path on two hosts: both mounts and types are named.
        row("POSIX", "/local/x", "/, /local", "ext4, xfs", 2, 0, 0, 2, 0, 20, 0, 0, 0),
    ]
    assert body["page"] == {"total": 5, "limit": 1000, "next_cursor": None}
    assert body["startup"] == {"files": 1, "bytes_read": 100, "bytes_written": 0}
    url = api_client.app.url_path_for("job_io", job="job-C")
    startup = api_client.get(url, params={"phase": "startup"}).json()
    assert startup["files"] == [row("POSIX", a, "/scratch", "lustre", 1, 1, 1, 0, 100, 0, 5, 0, 0)]
    # Pages of two: the same rows, in the same order, each once; the last page says so.
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        part = api_client.get(url, params=params).json()
        assert part["page"]["total"] == 5 and len(part["files"]) <= 2
        seen += part["files"]
        if (cursor := part["page"]["next_cursor"]) is None:
            break
    assert seen == body["files"]


def test_jobs_without_io_or_ops_have_empty_lists(collector, api_client):
    exchange(collector.address, frame(0, job="job-quiet", p2p_rows=[]), acks=1)
    # frame() always carries one op record (MPI_Isend, 5 calls); here it is the only op.
    ops = api_client.get(api_client.app.url_path_for("job_ops", job="job-quiet")).json()
    assert ops["ops"] == [op_total("MPI_Isend", "mpi_p2p", 5, 640, 999, 1)]
    assert [c["calls"] for c in ops["categories"]] == [5, 0, 0, 0, 0, 0, 0]
    assert api_client.get(api_client.app.url_path_for("job_io", job="job-quiet")).json() == {
        "job": "job-quiet",
        "run": None,
        "files": [],
        "startup": {"files": 0, "bytes_read": 0, "bytes_written": 0},
        "page": {"total": 0, "limit": 1000, "next_cursor": None},
    }
    exchange(collector.address, counters_frame(0, 0, job="job-silent"), acks=1)
    ops = api_client.get(api_client.app.url_path_for("job_ops", job="job-silent")).json()
    assert ops["ops"] == [] and {c["time_ns"] for c in ops["categories"]} == {0}


NO_ROOT = 0xFFFFFFFF  # the wire's "no root" (stored and served as -1)
WORLD, HALF, OVERFLOW = 0x1234, 0xBEEF, 0xFFFFFFFF  # communicator ids


def job_d_frame(
    seq: int,
    rank: int,
    *,
    job: str = "job-D",
    host: str = "",
    pid: int = 0,
    frame_type=wire.FrameType.INTERVAL,
    coll=(),
    hist=(),
    rma=(),
    health=None,
) -> bytes:
    """A frame of a four-rank job with `coll` records ((op, comm_id, comm_size, root, calls,
    bytes, time_ns)), `hist` records ((op, bucket, count)), `rma` records ((target, op,
    calls, bytes)) and, if given, one `health` record ((keys, frames dropped, spooled))."""

    def op(name):
        return op_names().index(name)

    names = ("comm_id", "comm_size", "root", "calls", "bytes", "time_ns")
    tables = {
        "coll": wire.records(
            "coll", [{"op_id": op(r[0]), **dict(zip(names, r[1:], strict=True))} for r in coll]
        ),
        "hist": wire.records(
            "hist", [{"op_id": op(o), "bucket": b, "count": c} for o, b, c in hist]
        ),
        "rma": wire.records(
            "rma", [{"target": t, "op_id": op(o), "calls": c, "bytes": b} for t, o, c, b in rma]
        ),
    }
    if health is not None:
        keys = ("keys_dropped", "frames_dropped", "frames_spooled")
        tables["health"] = wire.records("health", [dict(zip(keys, health, strict=True))])
    return wire.encode_frame(
        job_id=job, world_rank=rank, world_size=4, seq=seq, host=host or f"node{rank}",
        pid=pid, interval_start_ns=T0 + seq * 10**9, interval_end_ns=T0 + (seq + 1) * 10**9,
        token="secret", frame_type=frame_type, tables=tables,
    )  # fmt: skip


def test_job_collectives_per_communicator_op_and_root(collector, api_client):
    frames = [
        job_d_frame(0, 0, coll=[("MPI_Allreduce", WORLD, 4, NO_ROOT, 2, 80, 1000),
                                ("MPI_Bcast", WORLD, 4, 1, 1, 1000, 300)]),
        job_d_frame(1, 0, coll=[("MPI_Allreduce", WORLD, 4, NO_ROOT, 1, 40, 500),
                                ("MPI_Allreduce", HALF, 2, NO_ROOT, 1, 8, 50)]),
        job_d_frame(0, 1, coll=[("MPI_Allreduce", WORLD, 4, NO_ROOT, 3, 120, 3000),
                                ("MPI_Bcast", WORLD, 4, 1, 1, 1000, 100),
                                ("MPI_Bcast", WORLD, 4, 0, 1, 1000, 4000)]),
        job_d_frame(0, 2, coll=[("MPI_Allreduce", HALF, 2, NO_ROOT, 1, 8, 70),
                                ("MPI_Bcast", WORLD, 4, 1, 1, 1000, 200),
                                ("MPI_Reduce", OVERFLOW, 3, 2, 5, 50, 10)]),
        # A record without calls: no row, and rank 3 does not count as taking part.
        job_d_frame(0, 3, coll=[("MPI_Barrier", WORLD, 4, NO_ROOT, 0, 0, 0)]),
        job_d_frame(0, 0, job="job-other", coll=[("MPI_Allreduce", WORLD, 4, NO_ROOT, 9, 9, 9)]),
    ]  # fmt: skip
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_collectives", job="job-D")).json()
    fields = ("op", "comm_id", "comm_size", "root", "ranks", "calls", "bytes", "time_ns")
    assert body["job"] == "job-D"
    # Heaviest time first.
    assert body["collectives"] == [
        dict(zip(fields, row, strict=True))
        for row in [
            ("MPI_Allreduce", WORLD, 4, -1, 2, 6, 240, 4500),
            ("MPI_Bcast", WORLD, 4, 0, 1, 1, 1000, 4000),
            ("MPI_Bcast", WORLD, 4, 1, 3, 3, 3000, 600),
            ("MPI_Allreduce", HALF, 2, -1, 2, 2, 16, 120),
            ("MPI_Reduce", OVERFLOW, 3, 2, 1, 5, 50, 10),
        ]
    ]
    fields = ("comm_id", "comm_size", "overflow", "ranks", "ops", "calls", "bytes", "time_ns")
    assert body["communicators"] == [
        dict(zip(fields, row, strict=True))
        for row in [
            (WORLD, 4, False, 3, 3, 10, 4240, 9100),
            (HALF, 2, False, 2, 1, 2, 16, 120),
            (OVERFLOW, 3, True, 1, 1, 5, 50, 10),
        ]
    ]


def test_job_sizes_are_histograms_per_op(collector, api_client):
    frames = [
        job_d_frame(0, 0, hist=[("MPI_Isend", 9, 2), ("MPI_Isend", 8, 1), ("MPI_Barrier", 0, 1)]),
        job_d_frame(1, 0, hist=[("MPI_Isend", 9, 1), ("MPI_Bcast", 10, 1)]),
        job_d_frame(0, 1, hist=[("MPI_Isend", 9, 3), ("MPI_Barrier", 0, 1), ("MPI_Bcast", 10, 1),
                                ("MPI_Put", 5, 0), ("MPI_Send", 64, 1)]),
        job_d_frame(0, 0, job="job-other", hist=[("MPI_Isend", 9, 100)]),
    ]  # fmt: skip
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_sizes", job="job-D")).json()

    def bucket(b, lower, upper, count):
        return {"bucket": b, "lower_bytes": lower, "upper_bytes": upper, "count": count}

    # Most messages first, ties by name; buckets smallest first; no empty bucket or op.
    assert body == {
        "job": "job-D",
        "run": None,
        "ops": [
            {"op": "MPI_Isend", "category": "mpi_p2p", "messages": 7,
             "buckets": [bucket(8, 128, 256, 1), bucket(9, 256, 512, 6)]},
            {"op": "MPI_Barrier", "category": "mpi_coll", "messages": 2,
             "buckets": [bucket(0, 0, 1, 2)]},  # empty messages: [0, 1)
            {"op": "MPI_Bcast", "category": "mpi_coll", "messages": 2,
             "buckets": [bucket(10, 512, 1024, 2)]},
            {"op": "MPI_Send", "category": "mpi_p2p", "messages": 1,
             "buckets": [bucket(64, 2**63, 2**64, 1)]},  # the last bucket
        ],
    }  # fmt: skip


def test_job_rma_per_origin_and_target(collector, api_client):
    frames = [
        job_d_frame(0, 0, rma=[(1, "MPI_Put", 1, 16), (2, "MPI_Get", 1, 8)]),
        job_d_frame(1, 0, rma=[(1, "MPI_Put", 2, 32), (1, "MPI_Accumulate", 1, 40)]),
        job_d_frame(0, 3, rma=[(0, "MPI_Put", 1, 16), (2, "MPI_Get", 0, 0)]),
        job_d_frame(0, 1, job="job-other", rma=[(0, "MPI_Put", 5, 5)]),
    ]
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_rma", job="job-D")).json()

    def op(name, calls, nbytes):
        return {"op": name, "calls": calls, "bytes": nbytes}

    assert body == {
        "job": "job-D",
        "run": None,
        "world_size": 4,
        # Most bytes first.
        "ops": [op("MPI_Put", 4, 64), op("MPI_Accumulate", 1, 40), op("MPI_Get", 1, 8)],
        # By origin, then target; each pair's ops by name; no pair without calls.
        "cells": [
            {"origin": 0, "target": 1, "calls": 4, "bytes": 88,
             "ops": [op("MPI_Accumulate", 1, 40), op("MPI_Put", 3, 48)]},
            {"origin": 0, "target": 2, "calls": 1, "bytes": 8, "ops": [op("MPI_Get", 1, 8)]},
            {"origin": 3, "target": 0, "calls": 1, "bytes": 16, "ops": [op("MPI_Put", 1, 16)]},
        ],
        "page": {"total": 3, "limit": 5000, "next_cursor": None},
    }  # fmt: skip
    url = api_client.app.url_path_for("job_rma", job="job-D")
    first = api_client.get(url, params={"limit": 2}).json()
    assert first["cells"] == body["cells"][:2] and first["ops"] == body["ops"]
    cursor = first["page"]["next_cursor"]
    rest = api_client.get(url, params={"limit": 2, "cursor": cursor}).json()
    assert rest["cells"] == body["cells"][2:] and rest["page"]["next_cursor"] is None


def test_job_ranks_hosts_status_and_health(collector, api_client):
    final, killed = wire.FrameType.FINAL, wire.FrameType.KILLED
    frames = [
        job_d_frame(0, 0, host="cn01", pid=100, health=(2, 0, 1)),
        job_d_frame(1, 0, host="cn01", pid=100, frame_type=final, health=(3, 0, 0)),
        job_d_frame(0, 1, host="cn02", pid=200),
        job_d_frame(1, 1, host="cn02", pid=200, frame_type=killed, health=(0, 4, 0)),
        job_d_frame(0, 3, host="cn02", pid=300),
        job_d_frame(0, 2, host="cn09", pid=900, job="job-other", health=(7, 7, 7)),
    ]  # fmt: skip
    send_committed(collector, frames)

    body = api_client.get(api_client.app.url_path_for("job_ranks", job="job-D")).json()
    fields = ("run", "rank", "host", "pid", "first_seen_ns", "last_seen_ns", "finished",
              "killed", "aborted", "abort_code", "status", "keys_dropped", "frames_dropped",
              "frames_spooled", "unfinalized")  # fmt: skip
    end = T0 + 2 * 10**9
    # By world rank; rank 2 never reported; health counters summed over the frames; the job
    # was killed, so rank 3, which sent no final frame, is lost (not running).
    assert body == {
        "job": "job-D",
        "run": None,
        "world_size": 4,
        "ranks": [
            {**dict(zip(fields, row, strict=True)), "kind": "mpi"}
            for row in [
                (1, 0, "cn01", 100, T0, end, True, False, False, None, "finished", 5, 0, 1, False),
                (1, 1, "cn02", 200, T0, end, True, True, False, None, "killed", 0, 4, 0, False),
                (
                    1,
                    3,
                    "cn02",
                    300,
                    T0,
                    T0 + 10**9,
                    False,
                    False,
                    False,
                    None,
                    "lost",
                    0,
                    0,
                    0,
                    False,
                ),
            ]
        ],
        "page": {"total": 3, "limit": 1000, "next_cursor": None},
        "ranks_reported": 3,
        "processes_reported": 0,
        "hosts": [{"host": "cn02", "ranks": 2}, {"host": "cn01", "ranks": 1}],
        "health": {"ranks_folded": 1, "keys_dropped": 5, "ranks_lost": 1, "frames_dropped": 4},
    }
    url = api_client.app.url_path_for("job_ranks", job="job-D")
    first = api_client.get(url, params={"limit": 1}).json()
    assert first["ranks"] == body["ranks"][:1] and first["hosts"] == body["hosts"]
    second = api_client.get(url, params={"limit": 1, "cursor": first["page"]["next_cursor"]})
    assert second.json()["ranks"] == body["ranks"][1:2]


def test_job_without_collectives_sizes_or_rma_has_empty_lists(collector, api_client):
    send_committed(collector, [job_d_frame(0, 0, job="job-quiet")])
    get = api_client.get
    assert get(api_client.app.url_path_for("job_collectives", job="job-quiet")).json() == {
        "job": "job-quiet",
        "run": None,
        "communicators": [],
        "collectives": [],
    }
    assert get(api_client.app.url_path_for("job_sizes", job="job-quiet")).json() == {
        "job": "job-quiet",
        "run": None,
        "ops": [],
    }
    assert get(api_client.app.url_path_for("job_rma", job="job-quiet")).json() == {
        "job": "job-quiet",
        "run": None,
        "world_size": 4,
        "ops": [],
        "cells": [],
        "page": {"total": 0, "limit": 5000, "next_cursor": None},
    }
    ranks = get(api_client.app.url_path_for("job_ranks", job="job-quiet")).json()["ranks"]
    assert [(r["rank"], r["status"], r["keys_dropped"]) for r in ranks] == [(0, "running", 0)]


@pytest.mark.parametrize(
    "route",
    ["job_matrix", "job_ops", "job_io", "job_collectives", "job_sizes", "job_rma", "job_ranks"],
)
def test_unknown_job_is_404(api_client, route):
    response = api_client.get(api_client.app.url_path_for(route, job="no/such job"))
    assert response.status_code == 404
    assert response.json() == {"detail": "unknown job 'no/such job'"}


def test_openapi_docs_are_served(api_client):
    assert api_client.get("/docs").status_code == 200
    paths = api_client.get("/openapi.json").json()["paths"]
    assert {
        "/api/jobs",
        "/api/jobs/{job}/matrix",
        "/api/jobs/{job}/ops",
        "/api/jobs/{job}/io",
        "/api/jobs/{job}/collectives",
        "/api/jobs/{job}/sizes",
        "/api/jobs/{job}/rma",
        "/api/jobs/{job}/ranks",
    } <= set(paths)


def test_job_totals_and_matrix_are_exact_while_minutes_are_rolled_up(collector, api_client, pg_url):
    """The job list and the matrix read rolled-up minutes from p2p_minutes and the minutes
    still dirty from the raw deltas: exact before, between and after rollup passes."""
    from tests.collector.test_rollups import M0, frame, roll_up

    def totals():
        (job,) = api_client.get(api_client.app.url_path_for("list_jobs")).json()["jobs"]
        matrix = api_client.get(api_client.app.url_path_for("job_matrix", job="roll")).json()
        return job["bytes_sent"], job["messages_sent"], matrix["cells"]

    minute_1 = b"".join(frame(seq, M0 + seq * 20 * 10**9 + 1, bytes_sent=100) for seq in range(3))
    exchange(collector.address, minute_1 + frame(0, M0 + 5 * 10**9, rank=1), acks=4)
    expected = (400, 8, [
        {"src": 0, "dst": 1, "bytes": 300, "messages": 6},
        {"src": 1, "dst": 0, "bytes": 100, "messages": 2},
    ])  # fmt: skip
    assert totals() == expected  # nothing rolled up yet: all raw
    roll_up(collector)
    assert totals() == expected  # all from the rollups
    # A late frame re-dirties the first minute, a new one opens the next: both raw again.
    late, later = frame(9, M0 + 30 * 10**9, bytes_sent=5000), frame(3, M0 + 61 * 10**9)
    exchange(collector.address, late + later, acks=2)
    expected = (5500, 12, [
        {"src": 0, "dst": 1, "bytes": 5400, "messages": 10},
        {"src": 1, "dst": 0, "bytes": 100, "messages": 2},
    ])  # fmt: skip
    assert totals() == expected
    roll_up(collector)
    assert totals() == expected
    # Clean minutes really come from the rollups (a tampered rollup row shows).
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE p2p_minutes SET bytes_sent = bytes_sent + 1 WHERE world_rank = 1")
    assert totals()[0] == 5501


def test_overview_lists_a_page_of_jobs_and_details_one(collector, api_client):
    for job in ("old", "mid", "new"):  # same start times: registered later = newer
        exchange(collector.address, frame(0, job=job) + frame(1, job=job), acks=2)
    url = api_client.app.url_path_for("overview")
    page = api_client.get(url, params={"limit": 2}).json()
    assert [j["job"] for j in page["jobs"]["jobs"]] == ["new", "mid"]
    assert page["jobs"]["page"]["total"] == 3
    assert page["shown"]["job"] == "new"
    assert (
        page["shown"]["matrix"]
        == api_client.get(api_client.app.url_path_for("job_matrix", job="new")).json()
    )
    older = api_client.get(url, params={"limit": 2, "job": "old"}).json()
    assert [j["job"] for j in older["jobs"]["jobs"]] == ["new", "mid"]
    assert older["shown"]["job"] == "old"
    searched = api_client.get(url, params={"q": "OL"}).json()
    assert [j["job"] for j in searched["jobs"]["jobs"]] == ["old"]
    assert searched["shown"]["job"] == "old"
    # An unknown job is not replaced by another: the page says it is unknown.
    assert api_client.get(url, params={"job": "no-such-job"}).json()["shown"] is None
    assert api_client.get(url, params={"limit": 0}).status_code == 422


def test_overview_without_jobs(pg_url, api_client):
    page = api_client.get(api_client.app.url_path_for("overview")).json()
    assert page == {
        "jobs": {"jobs": [], "page": {"total": 0, "limit": 100, "next_cursor": None}},
        "shown": None,
    }


def listed_frame(job: str, start_s: int, user: str, command: str, final: bool = False) -> bytes:
    """The only frame of a one-rank job started `start_s` seconds after T0."""
    info = [{"command": command.encode(), "user": user.encode()}]
    return wire.encode_frame(
        job_id=job,
        world_rank=0,
        world_size=1,
        seq=0,
        interval_start_ns=T0 + start_s * 10**9,
        interval_end_ns=T0 + (start_s + 1) * 10**9,
        token="secret",
        frame_type=wire.FrameType.FINAL if final else wire.FrameType.INTERVAL,
        tables={"rank_info": wire.records("rank_info", info)},
    )


def test_job_list_searches_filters_and_pages(collector, api_client):
    users = ("alice", "bob", "carol")
    frames = [
        listed_frame(f"job-{i:02d}", i, users[i % 3], f"./solver_{i} --x=50%", final=i % 2 == 0)
        for i in range(12)
    ]
    send_committed(collector, frames)
    url = api_client.app.url_path_for("list_jobs")

    def jobs(**params) -> tuple[list[str], dict]:
        body = api_client.get(url, params=params).json()
        return [j["job"] for j in body["jobs"]], body["page"]

    newest_first = [f"job-{i:02d}" for i in reversed(range(12))]
    assert jobs() == (newest_first, {"total": 12, "limit": 100, "next_cursor": None})
    # Search: the job id, the user or the command, any case; % and _ are plain characters.
    assert jobs(q="JOB-07")[0] == ["job-07"]
    assert jobs(q="solver_1")[0] == ["job-11", "job-10", "job-01"]
    assert jobs(q="CAROL")[0] == ["job-11", "job-08", "job-05", "job-02"]
    assert jobs(q="50%")[1]["total"] == 12 and jobs(q="5_%")[1]["total"] == 0
    # Filters, also together with a search.
    assert jobs(status="finished")[0] == [f"job-{i:02d}" for i in (10, 8, 6, 4, 2, 0)]
    assert jobs(user="bob", status="running")[0] == ["job-07", "job-01"]
    assert jobs(started_from=T0 + 3 * 10**9, started_to=T0 + 6 * 10**9)[0] == [
        "job-05", "job-04", "job-03"
    ]  # fmt: skip
    assert jobs(q="solver", user="alice", started_to=T0 + 4 * 10**9)[0] == ["job-03", "job-00"]
    # Pages of five: every job once, in order; jobs that arrive meanwhile (newer, so before
    # the cursor) neither repeat nor hide one; the total counts them.
    first, page = jobs(limit=5)
    assert first == newest_first[:5] and page["total"] == 12
    send_committed(collector, [listed_frame("job-late", 99, "dave", "./late")])
    second, page = jobs(limit=5, cursor=page["next_cursor"])
    third, last = jobs(limit=5, cursor=page["next_cursor"])
    assert first + second + third == newest_first
    assert page["total"] == last["total"] == 13 and last["next_cursor"] is None
    # A cursor is this list's, or a clear refusal.
    matrix_cursor = paging.encode("matrix", (0, 1))
    for bad in ("nonsense", matrix_cursor, paging.encode("job", ("a", 1))):
        response = api_client.get(url, params={"cursor": bad})
        assert response.status_code == 404, bad
        assert response.json() == {
            "detail": "no such page: the cursor is not a next_cursor of this job list"
        }
    for malformed in ("", "x" * 3000, "a+b/c="):  # not a cursor's form at all
        assert api_client.get(url, params={"cursor": malformed}).status_code == 422
    assert api_client.get(url, params={"limit": 1001}).status_code == 422
    assert api_client.get(url, params={"status": "sleeping"}).status_code == 422


def test_matrix_blocks_are_sized_by_the_ranks_seen_not_the_world(collector, api_client):
    """A 100,000-rank world where ranks 0 and 999 talk: 8 ranks per block side (1,000
    ranks seen fit in 125 of the at most 128 blocks), two blocks."""
    frames = [
        wire.encode_frame(
            job_id="wide", world_rank=rank, world_size=100_000, seq=0,
            interval_start_ns=T0, interval_end_ns=T0 + 10**9, token="secret",
            tables={"p2p": wire.records("p2p", [{"peer": peer, "bytes_sent": n, "msgs_sent": 1}])},
        )
        for rank, peer, n in ((0, 999, 70), (999, 0, 30), (5, 6, 1))
    ]  # fmt: skip
    send_committed(collector, frames)
    url = api_client.app.url_path_for("job_matrix", job="wide")
    body = api_client.get(url).json()
    assert body["world_size"] == 100_000 and body["block_ranks"] == 8
    assert body["blocks"] == [
        {"src": 0, "dst": 0, "bytes": 1, "messages": 1},
        {"src": 0, "dst": 124, "bytes": 70, "messages": 1},
        {"src": 124, "dst": 0, "bytes": 30, "messages": 1},
    ]
    first = api_client.get(url, params={"limit": 2}).json()
    assert [(c["src"], c["dst"]) for c in first["cells"]] == [(0, 999), (5, 6)]
    assert first["page"]["total"] == 3 and first["blocks"] == body["blocks"]
    rest = api_client.get(url, params={"limit": 2, "cursor": first["page"]["next_cursor"]})
    assert [(c["src"], c["dst"]) for c in rest.json()["cells"]] == [(999, 0)]


def test_list_parameters_that_no_job_can_match_are_refused(collector, api_client):
    send_committed(collector, [listed_frame("job-x", 0, "alice", "./x")])
    url = api_client.app.url_path_for("list_jobs")
    for query in ("q=a%00b", "user=a%01"):  # control characters
        assert api_client.get(f"{url}?{query}").status_code == 422, query
    assert api_client.get(url, params={"started_to": 2**63}).status_code == 422
    io = api_client.app.url_path_for("job_io", job="job-x")
    for key in ((2**64, 1, "/a"), (1, 1, "/a\x00")):
        cursor = paging.encode("program file", key)
        assert api_client.get(io, params={"cursor": cursor}).status_code == 404, key
    ok = paging.encode("program file", (1, 1, "/a"))
    assert api_client.get(io, params={"cursor": ok}).json()["files"] == []
