# tests/compare/test_sides_truth.py — message sizes, I/O per file and the late rank, compared.
"""phases.c run twice under the hooks with the same command line (issue #28 points 2, 5):
run a with rank 1 sleeping SLOW_MS before its MPI_Barrier, its pair MPI_Allreduce on one
double and rank 0 writing 4 KiB per iteration to one file; run b with rank 0 sleeping, the
pair MPI_Allreduce on SIZED_COUNT doubles and 64 KiB per iteration to the same file. The
comparison sets the message-size histograms side by side (MPI_Allreduce: its 8-byte bucket
2 x calls in run a, 1 x in run b, its 128 KiB bucket only in run b), the file with the
exact bytes and write calls of both runs, and each side's late rank (rank 1, then rank 0:
moved, said in the finding); each side's figures are exactly those of its own run's pages
(GET /api/jobs/{job}/sizes, /io, /profile); the comparison report's sections say the
same. In Chromium the Compare page shows them: the size figure (legend a, b), the file
table and the late rank table, no console error."""

from __future__ import annotations

import html
import re
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from presentation.formatting import format_bytes, format_size_bucket
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.compare.test_sites_truth import COMPILERS, HERE, ITERATIONS, RANKS, run
from tests.conftest import chromium_page, free_port, serving

#: Doubles per rank in run b's pair MPI_Allreduce (128 KiB); run a sends 1.
SIZED_COUNT = 1 << 14
#: Bytes rank 0 writes per iteration in runs a and b.
WRITES = (4096, 65536)
SLOW_MS = 100


def runs(collector, mpi: str, folder: Path) -> tuple[str, str, Path]:
    """phases.c built for `mpi` and run twice, the same command line: (job a, job b, the
    file written)."""
    program, out = folder / "phases", folder / "out.dat"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-o", program, HERE / "phases.c"],
                   check=True)  # fmt: skip
    job_a, job_b = f"sides-a-{uuid.uuid4().hex[:8]}", f"sides-b-{uuid.uuid4().hex[:8]}"
    for job, slow, count, size in ((job_a, 1, 1, WRITES[0]), (job_b, 0, SIZED_COUNT, WRITES[1])):
        run(collector, mpi, program, job, PHASES_SLOW_MS=str(SLOW_MS), PHASES_SLOW_RANK=str(slow),
            PHASES_COUNT=str(count), PHASES_OUT=str(out), PHASES_WRITE=str(size))  # fmt: skip
    return job_a, job_b, out


def bucket_of(rows: list[dict], op: str, size: int, side: str) -> int:
    """The messages of `op` of `size` bytes on `side` (a or b) in the comparison's sizes."""
    return sum(r[f"{side}_messages"] for r in rows
               if r["op"] == op and r["lower_bytes"] <= size < r["upper_bytes"])  # fmt: skip


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_sizes_files_and_the_late_rank_side_by_side(collector, api_client, pg_url, tmp_path,
                                                     mpi: str) -> None:  # fmt: skip
    job_a, job_b, out = runs(collector, mpi, tmp_path)
    params = {"a": job_a, "b": job_b}
    answer = api_client.get("/api/compare", params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    calls = ITERATIONS * RANKS
    # message sizes: the pair allreduce moved from the 8-byte bucket to the 128 KiB one
    sizes = body["sizes"]
    assert bucket_of(sizes, "MPI_Allreduce", 8, "a") == 2 * calls
    assert bucket_of(sizes, "MPI_Allreduce", 8, "b") == calls
    assert bucket_of(sizes, "MPI_Allreduce", 8 * SIZED_COUNT, "a") == 0
    assert bucket_of(sizes, "MPI_Allreduce", 8 * SIZED_COUNT, "b") == calls
    assert all(r["delta"] == r["b_messages"] - r["a_messages"] for r in sizes)
    # the file: exact bytes and write calls of both runs
    (row,) = [f for f in body["files"] if f["label"] == str(out)]
    assert (row["present"], row["a_bytes"], row["b_bytes"], row["a_calls"], row["b_calls"]) == (
        "both",
        ITERATIONS * WRITES[0],
        ITERATIONS * WRITES[1],
        ITERATIONS,
        ITERATIONS,
    )
    assert row["delta_ns"] == row["b_ns"] - row["a_ns"]
    # the late rank: rank 1 in run a, rank 0 in run b, each waited for at the barrier
    late_a, late_b = body["a"]["late"], body["b"]["late"]
    assert (late_a["rank"], late_a["op"], late_a["ranks"]) == (1, "MPI_Barrier", [0])
    assert (late_b["rank"], late_b["op"], late_b["ranks"]) == (0, "MPI_Barrier", [1])
    assert body["late_moved"] is True
    host = body["b"]["hosts"][0]
    assert f"; the late rank moved from rank 1 ({host}) to rank 0 ({host})" in body["finding"]
    # each side's figures are exactly its own run's pages'
    for side, job in (("a", job_a), ("b", job_b)):
        own_sizes = api_client.get(f"/api/jobs/{job}/sizes").json()["ops"]
        assert {(r["op"], r["bucket"]): r[f"{side}_messages"] for r in sizes
                if r[f"{side}_messages"]} == {
            (op["op"], b["bucket"]): b["count"] for op in own_sizes for b in op["buckets"]
        }, side  # fmt: skip
        files: dict[str, list[int]] = {}
        for f in api_client.get(f"/api/jobs/{job}/io").json()["files"]:
            got = files.setdefault(f["path"], [0, 0, 0])
            got[0] += f["read_time_ns"] + f["write_time_ns"] + f["meta_time_ns"]
            got[1] += f["reads"] + f["writes"]
            got[2] += f["bytes_read"] + f["bytes_written"]
        assert {
            f["label"]: [f[f"{side}_ns"], f[f"{side}_calls"], f[f"{side}_bytes"]]
            for f in body["files"]
            if f["present"] in ("both", side)
        } == files, side
        profile = api_client.get(f"/api/jobs/{job}/profile", params={"run": 1}).json()
        named = next(o for o in profile["outliers"] if o["role"] == "late")
        assert {k: v for k, v in body[side]["late"].items() if k != "host"} == {
            k: named[k] for k in ("rank", "op", "site", "excess_ns", "share", "ranks", "text")
        }, side  # fmt: skip
    # the report: its sizes, files and late-rank sections with the same figures
    report = api_client.get("/api/reports/compare", params=params)
    assert report.status_code == 200, report.text
    text = html.unescape(report.text)

    def table_rows(anchor: str) -> list[list[str]]:
        section = text[text.index(f'id="{anchor}"') :]
        body_html = re.search(r"<tbody>(.*?)</tbody>", section, re.S)
        assert body_html is not None, anchor
        return [[c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
                for row in re.findall(r"<tr>(.*?)</tr>", body_html.group(1), re.S)]  # fmt: skip

    top = sizes[0]
    assert table_rows("sizes")[0] == [
        top["op"], format_size_bucket(top["lower_bytes"], top["upper_bytes"]),
        f"{top['a_messages']:,}", f"{top['b_messages']:,}", f"{top['delta']:+,}"]  # fmt: skip
    (written,) = [r for r in table_rows("files") if r[0] == str(out)]
    assert written[1] == "both" and written[5:] == [
        f"{ITERATIONS:,}", f"{ITERATIONS:,}", f"{ITERATIONS * WRITES[0]:,}",
        f"{ITERATIONS * WRITES[1]:,}"]  # fmt: skip
    assert table_rows("late") == [
        [f"a: job {job_a} run 1", "rank 1", host, late_a["text"]],
        [f"b: job {job_b} run 1", "rank 0", host, late_b["text"]],
    ]
    assert [r[0] for r in table_rows("parts")] == [c["name"] for c in body["classes"]]
    assert "Messages per size (summed over the ranks)" in text
    assert "The late rank moved." in text
    if mpi != "openmpi":
        return
    # the Compare page shows them
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port), chromium_page() as (page, errors):
        page.goto(f"http://127.0.0.1:{port}/compare?{urlencode(params)}")
        expect(page.locator("#cmp-finding")).to_contain_text(
            "the late rank moved from rank 1", timeout=30_000)  # fmt: skip
        late = page.locator("#cmp-late tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.innerText))")  # fmt: skip
        assert [r[:3] for r in late] == [[f"a: {job_a} run 1", "rank 1", host],
                                         [f"b: {job_b} run 1", "rank 0", host]]  # fmt: skip
        expect(page.locator("#cmp-late-moved")).to_have_text(
            "The late rank moved: rank 1 in run a, rank 0 in run b.")  # fmt: skip
        file_rows = page.locator("#cmp-files tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.innerText))")  # fmt: skip
        shown = next(r for r in file_rows if r[0] == str(out))
        assert shown[1] == "both"
        assert shown[-4:] == [str(ITERATIONS), str(ITERATIONS),
                              format_bytes(ITERATIONS * WRITES[0]),
                              format_bytes(ITERATIONS * WRITES[1])]  # fmt: skip
        figure = page.locator("#cmp-sizes-fig")
        expect(figure.locator(".gtitle")).to_have_text(
            "Messages per size (summed over the ranks)")  # fmt: skip
        assert figure.locator(".legendtext").evaluate_all("ts => ts.map(t => t.textContent)") == [
            f"a: {job_a} run 1", f"b: {job_b} run 1"]  # fmt: skip
        assert errors == []
    engine.dispose()
