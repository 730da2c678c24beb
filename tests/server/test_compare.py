"""Run comparison over a real collector and database: three runs of one program whose
time per operation, file I/O and placement are known, side by side, against the median of
the history, the history itself, an owner's view, and the refusals."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from server.access.viewer import Access
from server.app import create_app
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from tests.access.data import token_for
from tests.collector.test_ingest import T0
from tests.collector.test_runs import send

S = 10**9
COMMAND = b"./solver -n 64"
OPS = {name: i for i, name in enumerate(op_names())}


def run_frames(job: str, start_ns: int, seconds: int, allreduce_s: int, *, hosts=("n0", "n1"),
               write_s: int = 0, user=b"bob", command=COMMAND,
               build: bytes = b"") -> list[bytes]:  # fmt: skip
    """Frames of a 2-rank run of `seconds` one-second intervals, ended by final frames:
    each rank spends `allreduce_s` in MPI_Allreduce (1 MiB per call, 1 call per second),
    1 s in MPI_Send (first interval), and `write_s` writing /scratch/out (last interval);
    its executable's build-id `build` (empty: none known)."""
    frames = []
    for rank in (0, 1):
        for seq in range(seconds):
            ops = [{"op_id": OPS["MPI_Allreduce"], "calls": 1, "bytes": 1 << 20,
                    "time_ns": allreduce_s * S // seconds}]  # fmt: skip
            tables = {}
            if seq == 0:
                ops.append({"op_id": OPS["MPI_Send"], "calls": 1, "bytes": 8, "time_ns": S})
                tables["rank_info"] = wire.records("rank_info", [{
                    "command": command, "user": user, "run_label": b"", "exe_build_id": build,
                }])  # fmt: skip
            if seq == seconds - 1 and write_s:
                tables["io"] = wire.records("io", [{
                    "layer": 1, "writes": 1, "bytes_written": 4096, "write_time_ns": write_s * S,
                    "path": b"/scratch/out", "mount": b"/", "fstype": b"ext4"}])  # fmt: skip
            tables["op"] = wire.records("op", ops)
            frames.append(wire.encode_frame(
                job_id=job, run_id=7, world_rank=rank, world_size=2, seq=seq,
                host=hosts[rank], pid=10 + rank, interval_start_ns=start_ns + seq * S,
                interval_end_ns=start_ns + (seq + 1) * S, token="secret",
                frame_type=2 if seq == seconds - 1 else 1, tables=tables,
            ))  # fmt: skip
    return frames


@pytest.fixture
def three_runs(collector):
    """cmp-a: 10 s, Allreduce 2 s; cmp-c: 12 s, Allreduce 3 s; cmp-b: 15 s, Allreduce 6 s,
    1 s of writes, on n0 and n2; all bob's, the same program; alice's run of it in between."""
    send(collector, run_frames("cmp-a", T0, 10, 2))
    send(collector, run_frames("cmp-c", T0 + 100 * S, 12, 3))
    send(collector, run_frames("cmp-alice", T0 + 150 * S, 30, 20, user=b"alice"))
    send(collector, run_frames("cmp-b", T0 + 200 * S, 15, 6, hosts=("n0", "n2"), write_s=1))
    send(collector, run_frames("cmp-other", T0 + 300 * S, 10, 2, command=b"./other"))


def test_one_run_against_another(three_runs, api_client):
    body = api_client.get("/api/compare", params={"a": "cmp-a", "b": "cmp-b"}).json()
    assert body["finding"] == (
        "+5.0 s elapsed per run (10.0 s → 15.0 s): MPI_Allreduce +4.0 s per rank (80%), "
        "file I/O on /scratch/out +1.0 s per rank (20%); placement moved from n1 to n2."
    )
    assert (body["a"]["job"], body["a"]["run"], body["a"]["elapsed_ns"]) == ("cmp-a", 1, 10 * S)
    assert body["a"]["parts"] == {"MPI_Allreduce": 2 * S, "MPI_Send": S, "computation": 7 * S}
    assert body["b"]["parts"] == {
        "MPI_Allreduce": 6 * S,
        "MPI_Send": S,
        "file I/O on /scratch/out": S,
        "computation": 7 * S,
    }
    assert body["b"]["hosts"] == ["n0", "n2"] and body["b"]["status"] == "finished"
    assert [(d["name"], d["kind"], d["delta_ns"], d["share"]) for d in body["differences"]] == [
        ("MPI_Allreduce", "op", 4 * S, 0.8),
        ("file I/O on /scratch/out", "file", S, 0.2),
    ]
    assert [(c["name"], c["a_ns"], c["b_ns"], c["delta_ns"], c["share"])
            for c in body["classes"]] == [
        ("collective", 2 * S, 6 * S, 4 * S, 0.8),
        ("file I/O", 0, S, S, 0.2),
        ("computation", 7 * S, 7 * S, 0, 0.0),
        ("point-to-point", S, S, 0, 0.0),
    ]  # fmt: skip
    allreduce = body["differences"][0]
    assert (allreduce["a_calls"], allreduce["b_calls"]) == (20, 30)
    assert (allreduce["a_bytes"], allreduce["b_bytes"]) == (20 << 20, 30 << 20)


def test_a_run_against_the_median_of_its_history(three_runs, api_client):
    body = api_client.get("/api/compare", params={"b": "cmp-b"}).json()
    assert body["a"]["job"] is None and body["a"]["runs"] == 3  # a, c and alice's (admin)
    assert body["a"]["elapsed_ns"] == 12 * S  # median of 10, 12 and 30 s
    assert body["a"]["parts"]["MPI_Allreduce"] == 3 * S
    limited = api_client.get("/api/compare", params={"b": "cmp-b", "last": 2}).json()
    assert limited["a"]["runs"] == 2 and limited["a"]["elapsed_ns"] == 21 * S  # c and alice's
    assert limited["finding"].startswith("-6.0 s elapsed per run (21.0 s → 15.0 s): ")


def test_the_history_lists_the_same_program_newest_first(three_runs, api_client):
    body = api_client.get("/api/compare/history", params={"job": "cmp-b"}).json()
    assert (body["command"], body["world_size"]) == (COMMAND.decode(), 2)
    assert [(r["job"], r["owner"], r["elapsed_ns"]) for r in body["runs"]] == [
        ("cmp-b", "bob", 15 * S),
        ("cmp-alice", "alice", 30 * S),
        ("cmp-c", "bob", 12 * S),
        ("cmp-a", "bob", 10 * S),
    ]
    b = body["runs"][0]
    assert b["mpi_share"] == pytest.approx(7 / 15) and b["io_share"] == pytest.approx(1 / 15)


def test_a_user_compares_only_with_their_own_runs(three_runs, pg_url):
    engine = make_engine(pg_url)
    try:
        app = create_app(engine, access=Access(mode="oidc"))
        with TestClient(app, base_url="http://127.0.0.1") as client:
            bob = {"Authorization": f"Bearer {token_for(engine, 'bob')}"}
            history = client.get("/api/compare/history", params={"job": "cmp-b"}, headers=bob)
            assert [r["job"] for r in history.json()["runs"]] == ["cmp-b", "cmp-c", "cmp-a"]
            median = client.get("/api/compare", params={"b": "cmp-b"}, headers=bob).json()
            assert median["a"]["runs"] == 2 and median["a"]["elapsed_ns"] == 11 * S
            theirs = client.get("/api/compare", params={"a": "cmp-alice", "b": "cmp-b"},
                                headers=bob)  # fmt: skip
            assert theirs.status_code == 404
            assert theirs.json() == {"detail": "unknown job 'cmp-alice'"}
    finally:
        engine.dispose()


def test_refusals(three_runs, api_client):
    def get(**params):
        return api_client.get("/api/compare", params=params)

    assert get(a="cmp-a").status_code == 422
    assert get(b="nope").json() == {"detail": "unknown job 'nope'"}
    assert get(b="cmp-b", b_run=2).json() == {"detail": "job 'cmp-b' has no run 2"}
    assert get(b="cmp-b", b_run=2**31).status_code == 422
    first = get(b="cmp-other")
    assert first.status_code == 404 and "no earlier run of the same program" in first.text


#: Two builds of one program's executable (hex build-ids).
BUILD_1, BUILD_2 = "a1" * 20, "b2" * 20


def test_a_rebuilt_executable_starts_a_new_segment_of_the_history(collector, api_client):
    """bld-1 and bld-2 of one build, bld-3 and bld-4 of the rebuilt executable (the same
    command line and world size): the history lists every build, says which runs are of the
    run's build and where the rebuild is; the median of the history takes the run's build
    alone; a comparison across the rebuild says so."""
    command = b"./rebuilt -n 4"
    for i, (seconds, build) in enumerate(((10, BUILD_1), (11, BUILD_1), (14, BUILD_2),
                                          (16, BUILD_2)), 1):  # fmt: skip
        send(collector, run_frames(f"bld-{i}", T0 + i * 100 * S, seconds, 2, command=command,
                                   build=build.encode()))  # fmt: skip
    body = api_client.get("/api/compare/history", params={"job": "bld-4"}).json()
    assert body["build_id"] == BUILD_2
    assert [(r["job"], r["build_id"], r["same_build"], r["rebuilt"]) for r in body["runs"]] == [
        ("bld-4", BUILD_2, True, False),
        ("bld-3", BUILD_2, True, True),
        ("bld-2", BUILD_1, False, False),
        ("bld-1", BUILD_1, False, False),
    ]
    # the run before the last one listed still tells whether that one was rebuilt
    last_one = api_client.get("/api/compare/history", params={"job": "bld-3", "last": 1}).json()
    assert [(r["job"], r["rebuilt"]) for r in last_one["runs"]] == [
        ("bld-3", True), ("bld-2", False)]  # fmt: skip
    median = api_client.get("/api/compare", params={"b": "bld-4"}).json()
    assert (median["a"]["runs"], median["a"]["elapsed_ns"], median["a"]["build_id"]) == (
        1, 14 * S, BUILD_2)  # fmt: skip
    first = api_client.get("/api/compare", params={"b": "bld-3"})
    assert first.status_code == 404
    assert first.json() == {
        "detail": "run 1 of job 'bld-3' has no earlier run of the same "
        "program (command line, world size and build) to compare with"
    }
    across = api_client.get("/api/compare", params={"a": "bld-2", "b": "bld-3"}).json()
    assert (across["a"]["build_id"], across["b"]["build_id"]) == (BUILD_1, BUILD_2)
    assert across["finding"] == (
        "+3.0 s elapsed per run (11.0 s → 14.0 s): computation +3.0 s per rank (100%); the "
        f"executable was rebuilt (build-id {BUILD_1[:12]} → {BUILD_2[:12]})."
    )


def test_the_comparison_as_files(three_runs, api_client):
    """JSON holds every table (families and each side's fabric context too); each table is
    a CSV file of its own: the parts that differ, the families, one context row per side."""
    params = {"a": "cmp-a", "b": "cmp-b"}
    body = api_client.get("/api/compare", params=params).json()
    assert [(f["label"], f["a_ns"], f["b_ns"], f["a_calls"], f["b_calls"])
            for f in body["families"]] == [("world", 2 * S, 2 * S, 2, 2)]  # fmt: skip
    assert body["a"]["context"]["hosts"] == body["b"]["context"]["hosts"] == 2

    def rows(table: str) -> tuple[str, list[dict[str, str]]]:
        answer = api_client.get("/api/compare", params={**params, "format": "csv",
                                                        "table": table})  # fmt: skip
        assert answer.status_code == 200, answer.text
        return (answer.headers["content-disposition"],
                list(csv.DictReader(io.StringIO(answer.text))))  # fmt: skip

    name, parts = rows("differences")
    assert name == 'attachment; filename="compare-differences.csv"'
    assert [(r["name"], r["kind"], r["a_ns"], r["b_ns"], r["share"], r["b_calls"])
            for r in parts] == [
        ("MPI_Allreduce", "op", str(2 * S), str(6 * S), "0.8", "30"),
        ("file I/O on /scratch/out", "file", "0", str(S), "0.2", ""),
    ]  # fmt: skip
    name, families = rows("families")
    assert name == 'attachment; filename="compare-families.csv"'
    assert [(r["label"], r["present"], r["a_ns"], r["b_ns"], r["delta_ns"], r["delta_pct"],
             r["a_calls"], r["b_calls"]) for r in families] == [
        ("world", "both", str(2 * S), str(2 * S), "0", "0.0", "2", "2")]  # fmt: skip
    name, files = rows("files")
    assert name == 'attachment; filename="compare-files.csv"'
    assert [(r["label"], r["present"], r["a_ns"], r["b_ns"], r["a_calls"], r["b_calls"],
             r["a_bytes"], r["b_bytes"]) for r in files] == [
        ("/scratch/out", "b", "0", str(2 * S), "0", "2", "0", "8192")]  # fmt: skip
    assert body["files"][0]["label"] == "/scratch/out" and body["sizes"] == []
    name, sizes = rows("sizes")
    assert name == 'attachment; filename="compare-sizes.csv"' and sizes == []
    name, context = rows("context")
    assert name == 'attachment; filename="compare-context.csv"'
    assert [{k: r[k] for k in ("side", "job", "run", "elapsed_ns", "host_names", "hosts",
                               "placed_hosts",
                               "leaves", "links", "link_bytes", "xmit_wait", "other_job_bytes",
                               "incidents")} for r in context] == [
        {"side": side, "job": job, "run": "1", "elapsed_ns": str(seconds * S),
         "host_names": hosts, "hosts": "2", "placed_hosts": "0", "leaves": "[]", "links": "0",
         "link_bytes": "", "xmit_wait": "", "other_job_bytes": "0.0", "incidents": "[]"}
        for side, job, seconds, hosts in (("a", "cmp-a", 10, '["n0","n1"]'),
                                          ("b", "cmp-b", 15, '["n0","n2"]'))
    ]  # fmt: skip
    header = api_client.get(
        "/api/compare", params={**params, "format": "csv", "table": "context"}
    ).text.split("\r\n")[0]
    assert header.split(",")[:11] == ["side", "job", "owner", "run", "runs", "build_id",
                                      "started_ns", "elapsed_ns", "host_names", "late_rank",
                                      "late_host"]  # fmt: skip
    unknown = api_client.get("/api/compare", params={**params, "format": "csv", "table": "x"})
    assert unknown.status_code == 422
