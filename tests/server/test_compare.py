"""Run comparison over a real collector and database: three runs of one program whose
time per operation, file I/O and placement are known, side by side, against the median of
the history, the history itself, an owner's view, and the refusals."""

from __future__ import annotations

import csv
import html
import io
import os
import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from presentation.formatting import format_duration_ns
from server.access.viewer import Access
from server.app import create_app
from server.incidents import repository as incidents
from stacklens import wire
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from stacklens.schema import Job
from tests.access.data import token_for
from tests.collector.test_ingest import T0
from tests.collector.test_runs import send
from tests.conftest import serving
from tests.test_cli import stacklens_cli

S = 10**9
COMMAND = b"./solver -n 64"
EXE = b"/opt/solver/bin/solver"
OPS = {name: i for i, name in enumerate(op_names())}


def run_frames(job: str, start_ns: int, seconds: int, allreduce_s: int, *, hosts=("n0", "n1"),
               write_s: int = 0, user=b"bob", command=COMMAND, exe: bytes = EXE,
               build: bytes = b"", token: str = "secret") -> list[bytes]:  # fmt: skip
    """Frames of a run of `seconds` one-second intervals, a rank per host of `hosts` (its
    world size: 2 by default), ended by final frames:
    each rank spends `allreduce_s` in MPI_Allreduce (1 MiB per call, 1 call per second),
    1 s in MPI_Send (first interval), and `write_s` writing /scratch/out (last interval);
    its executable's path `exe` and build-id `build` (empty: none known); the ingest
    `token` (empty for a collector that proves its senders)."""
    frames = []
    for rank in range(len(hosts)):
        for seq in range(seconds):
            ops = [{"op_id": OPS["MPI_Allreduce"], "calls": 1, "bytes": 1 << 20,
                    "time_ns": allreduce_s * S // seconds}]  # fmt: skip
            tables = {}
            if seq == 0:
                ops.append({"op_id": OPS["MPI_Send"], "calls": 1, "bytes": 8, "time_ns": S})
                tables["rank_info"] = wire.records("rank_info", [{
                    "command": command, "user": user, "run_label": b"", "exe_build_id": build,
                    "exe_path": exe,
                }])  # fmt: skip
            if seq == seconds - 1 and write_s:
                tables["io"] = wire.records("io", [{
                    "layer": 1, "writes": 1, "bytes_written": 4096, "write_time_ns": write_s * S,
                    "path": b"/scratch/out", "mount": b"/", "fstype": b"ext4"}])  # fmt: skip
            tables["op"] = wire.records("op", ops)
            frames.append(wire.encode_frame(
                job_id=job, run_id=7, world_rank=rank, world_size=len(hosts), seq=seq,
                host=hosts[rank], pid=10 + rank, interval_start_ns=start_ns + seq * S,
                interval_end_ns=start_ns + (seq + 1) * S, token=token,
                frame_type=2 if seq == seconds - 1 else 1, tables=tables,
            ))  # fmt: skip
    return frames


@pytest.fixture
def three_runs(collector):
    """cmp-a: 10 s, Allreduce 2 s; cmp-c: 12 s, Allreduce 3 s; cmp-b: 15 s, Allreduce 6 s,
    1 s of writes, on n0 and n2; all bob's, the same program; alice's run of it in between;
    the same command line on 4 ranks (cmp-wide, another program: another world size) and
    another command line (cmp-other). cmp-c says no executable path (sent before the hooks
    reported it): its command line makes it a run of the program."""
    send(collector, run_frames("cmp-a", T0, 10, 2))
    send(collector, run_frames("cmp-c", T0 + 100 * S, 12, 3, exe=b""))
    send(collector, run_frames("cmp-wide", T0 + 120 * S, 10, 2, hosts=("n0", "n1", "n2", "n3")))
    send(collector, run_frames("cmp-alice", T0 + 150 * S, 30, 20, user=b"alice"))
    send(collector, run_frames("cmp-b", T0 + 200 * S, 15, 6, hosts=("n0", "n2"), write_s=1))
    send(collector, run_frames("cmp-other", T0 + 300 * S, 10, 2, command=b"./other",
                               exe=b"/opt/solver/bin/other"))  # fmt: skip


def test_one_run_against_another(three_runs, api_client):
    body = api_client.get("/api/compare", params={"a": "cmp-a", "b": "cmp-b"}).json()
    assert body["finding"] == (
        "+5.0 s elapsed per run (10.0 s → 15.0 s): MPI_Allreduce +4.0 s per rank (80%), "
        "file I/O on /scratch/out +1.0 s per rank (20%); placement moved from n1 to n2."
    )
    assert (body["a"]["job"], body["a"]["run"], body["a"]["elapsed_ns"]) == ("cmp-a", 1, 10 * S)
    assert body["a"]["exe_path"] == body["b"]["exe_path"] == EXE.decode()
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
    assert limited["finding"].startswith("−6.0 s elapsed per run (21.0 s → 15.0 s): ")
    # the report of the same comparison: the median side named, the same finding
    report = api_client.get("/api/reports/compare", params={"b": "cmp-b", "last": 2})
    assert report.status_code == 200, report.text
    text = html.unescape(report.text)
    assert "Comparison: job cmp-b run 1 against median of 2 earlier runs" in text
    assert limited["finding"] in text
    assert "Executable of run b</th><td>/opt/solver/bin/solver</td>" in text.replace("\n", "")


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
        "program (executable, arguments, world size and build) to compare with"
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
    assert header.split(",")[:13] == ["side", "job", "owner", "run", "runs", "build_id",
                                      "started_ns", "window_from_ns", "window_to_ns",
                                      "elapsed_ns", "host_names", "late_rank",
                                      "late_host"]  # fmt: skip
    unknown = api_client.get("/api/compare", params={**params, "format": "csv", "table": "x"})
    assert unknown.status_code == 422


def test_a_window_of_each_run(three_runs, api_client):
    """Run a's intervals that end in [0.5 s, 5.5 s) (its first five) against run b's that
    end from 10.5 s on (its last five, with the writes): each side's parts are those
    intervals', its elapsed time the part of its life inside the window, its figures those
    of its own job page read over that window; the report names both windows."""
    windows = {"a_from": "1700000000.5", "a_to": "1700000005.5", "b_from": "1700000210.5"}
    params = {"a": "cmp-a", "b": "cmp-b", **windows}
    answer = api_client.get("/api/compare", params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    a, b = body["a"], body["b"]
    assert (a["from_ns"], a["to_ns"], a["elapsed_ns"]) == (T0 + S // 2, T0 + 11 * S // 2, 5 * S)
    assert (b["from_ns"], b["to_ns"], b["elapsed_ns"]) == (T0 + 421 * S // 2, None, 9 * S // 2)
    assert a["parts"] == {"MPI_Allreduce": S, "MPI_Send": S, "computation": 3 * S}
    assert b["parts"] == {"MPI_Allreduce": 2 * S, "file I/O on /scratch/out": S,
                          "computation": 3 * S // 2}  # fmt: skip
    assert body["finding"] == (
        "−500 ms elapsed per run (5.0 s → 4.5 s): computation −1.5 s per rank (300%), "
        "MPI_Send −1.0 s per rank (200%); placement moved from n1 to n2."
    )
    # each side's operations are its job page's over the same window
    for side, job, window in (("a", "cmp-a", {"from": windows["a_from"], "to": windows["a_to"]}),
                              ("b", "cmp-b", {"from": windows["b_from"]})):  # fmt: skip
        ops = api_client.get(f"/api/jobs/{job}/ops", params={"run": 1, **window}).json()["ops"]
        page = {op["op"]: op["time_ns"] // 2 for op in ops if op["category"] != "mpi_startup"}
        assert {k: v for k, v in body[side]["parts"].items() if k.startswith("MPI_")} == page
    report = api_client.get("/api/reports/compare", params=params)
    assert report.status_code == 200, report.text
    assert "job cmp-a run 1, 2023-11-14 22:13:20.5–22:13:25.5 UTC" in report.text
    assert "job cmp-b run 1, from 2023-11-14 22:16:50.5 UTC" in report.text
    # refusals: a window of no run a, an empty window, an unreadable bound
    for wrong, detail in (
        ({"b": "cmp-b", "a_from": "1700000000"},
         "a_from and a_to are a window of run a: name run a (?a=<job>), the history's median "
         "has none"),
        ({"b": "cmp-b", "b_from": "1700000210", "b_to": "1700000205"},
         "the window is empty or inverted: b_to <= b_from"),
        ({"b": "cmp-b", "a": "cmp-a", "a_to": "soon"},
         "a_to='soon': neither RFC 3339 nor epoch seconds"),
    ):  # fmt: skip
        for path in ("/api/compare", "/api/reports/compare"):
            refused = api_client.get(path, params=wrong)
            assert (refused.status_code, refused.json()) == (422, {"detail": detail}), path


def _rows(page: str) -> list[list[str]]:
    """Every table row of an HTML report, its cells' text (tags dropped, unescaped)."""
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
         for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
    ]  # fmt: skip


def test_stacklens_report_compare_takes_a_window_per_side(three_runs, api_client, pg_url,
                                                           tmp_path):  # fmt: skip
    """`stacklens report --compare A B` with --a-from/--a-to/--b-from against a served app
    writes the report of the comparison GET /api/compare answers for the same windows:
    its finding, each side's window and elapsed time, the parts and classes a beside b,
    figure for figure; the whole runs' report differs; the PDF is written too."""
    windows = {"a_from": "1700000000.5", "a_to": "1700000005.5", "b_from": "1700000210.5"}
    answer = api_client.get("/api/compare", params={"a": "cmp-a", "b": "cmp-b", "b_run": 1,
                                                    **windows})  # fmt: skip
    assert answer.status_code == 200, answer.text
    body = answer.json()
    flags = [arg for name, value in windows.items()
             for arg in (f"--{name.replace('_', '-')}", value)]  # fmt: skip
    assert flags == ["--a-from", "1700000000.5", "--a-to", "1700000005.5",
                     "--b-from", "1700000210.5"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    out, pdf, whole = tmp_path / "window.html", tmp_path / "window.pdf", tmp_path / "whole.html"
    engine = make_engine(pg_url)
    with serving(create_app(engine)) as port:
        server = ["--server", f"http://127.0.0.1:{port}"]
        done = [stacklens_cli("report", "--compare", "cmp-a", "cmp-b:1", *flags, "-o",
                              str(path), *server, env=env) for path in (out, pdf)]  # fmt: skip
        plain = stacklens_cli("report", "--compare", "cmp-a", "cmp-b:1", "-o", str(whole),
                              *server, env=env)  # fmt: skip
    engine.dispose()
    for result in (*done, plain):
        assert result.returncode == 0, result.stderr
    assert pdf.read_bytes().startswith(b"%PDF-")
    page = out.read_text()
    text = html.unescape(page)
    assert body["finding"] in text
    assert ("Comparison: job cmp-b run 1, from 2023-11-14 22:16:50.5 UTC against job cmp-a "
            "run 1, 2023-11-14 22:13:20.5–22:13:25.5 UTC") in text  # fmt: skip
    rows = _rows(page)
    for letter in ("a", "b"):
        side = body[letter]
        fact = next(r for r in rows if r and r[0] == f"Run {letter}")
        assert f", {format_duration_ns(side['elapsed_ns'])} elapsed, on " in fact[1]
        assert fact[1].endswith(", ".join(side["hosts"]))

    def signed(ns: int) -> str:
        return ("+" if ns >= 0 else "−") + format_duration_ns(abs(ns))

    for kind in ("differences", "classes"):
        for d in body[kind]:
            share = "—" if d["share"] is None else f"{d['share']:.0%}"
            assert [d["name"], format_duration_ns(d["a_ns"]), format_duration_ns(d["b_ns"]),
                    signed(d["delta_ns"]), share] in rows, (kind, d)  # fmt: skip
    # the numbers themselves, as test_a_window_of_each_run reads them
    assert ["MPI_Send", "1.00 s", "0 ns", "−1.00 s", "200%"] in rows
    assert ["computation", "3.00 s", "1.50 s", "−1.50 s", "300%"] in rows
    assert body["finding"] not in html.unescape(whole.read_text())


def test_the_incidents_during_each_run(three_runs, api_client, pg_url):
    """An incident with run b's job among its members during run b is in b's context and
    named at the end of the finding; one of another job on no link of b's, at the same
    time, is not; run a had none."""
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session, session.begin():
            jobs = dict(session.execute(select(Job.job_key, Job.id)).tuples().all())
            ids = []
            for key, job in (("mine", "cmp-b"), ("theirs", "cmp-other")):
                row = {"key": f"mpi_slowdown:{key}", "kind": "mpi_slowdown", "severity": "minor",
                       "title": f"MPI slowdown of job {job}", "start_ns": T0 + 205 * S,
                       "end_ns": T0 + 208 * S, "detected_ns": T0 + 206 * S,
                       "updated_ns": T0 + 208 * S, "link_ids": [], "signals": ["mpi_slowdown"],
                       "links": [], "members": [{"role": "victim"}]}  # fmt: skip
                member = {"slot": 0, "job_id": jobs[job], "role": "victim",
                          "signals": ["mpi_slowdown"], "ranks": [1], "files": [],
                          "link_bytes": None, "evidence": {}}  # fmt: skip
                ids.append(incidents.save(session, row, [member]))
    finally:
        engine.dispose()
    body = api_client.get("/api/compare", params={"a": "cmp-a", "b": "cmp-b"}).json()
    assert body["a"]["context"]["incidents"] == []
    assert body["b"]["context"]["incidents"] == [
        {"id": ids[0], "kind": "mpi_slowdown", "severity": "minor", "start_ns": T0 + 205 * S,
         "end_ns": T0 + 208 * S, "summary": "MPI slowdown of job cmp-b"}]  # fmt: skip
    assert body["finding"].endswith(
        "; placement moved from n1 to n2; 1 incident (mpi_slowdown) during run b, 0 during run a."
    )
