# tests/compare/test_sites_truth.py — the comparison's call sites for two real runs.
"""phases.c run twice under the hooks with the same command line: run a without the sleep,
run b with rank 1 sleeping SLOW_MS before its MPI_Barrier in every iteration and with the
MPI_Bcast switched on. The comparison names the barrier's line first, with the exact calls
of both runs and its time up by at least what the other ranks waited; the MPI_Allreduce
that did not change is below it; the MPI_Bcast is a site of run b only; each side's
figures are exactly those of its own run's call sites; the CSV file holds the same rows
(issue #28 point 2). In Chromium, run b's job page links to its comparison with run a
(the previous run of the same program), whose grid names the barrier's line first (issue
#28 point 1). `stacklens report --compare` writes the comparison as a report naming that
line first, as HTML and as PDF (issue #28 point 4)."""

from __future__ import annotations

import csv
import html
import io
import os
import re
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import expect

from server.app import create_app
from stacklens.constants import MPI_CATEGORIES
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, free_port, serving
from tests.hooks import jobs
from tests.test_cli import stacklens_cli

HERE = Path(__file__).resolve().parent
RANKS = 2
ITERATIONS = 10
SLOW_MS = 100
COMPILERS = {"openmpi": "mpicc", "mpich": "mpicc.mpich"}


def line_of(marker: str) -> int:
    """The line of phases.c holding `/* site:<marker> */`."""
    lines = (HERE / "phases.c").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if f"/* site:{marker} */" in text)


def run(collector, mpi: str, program: Path, job: str, **env: str) -> None:
    """Runs phases.c for ITERATIONS on RANKS ranks under the hooks as job `job`."""
    result = jobs.run_job(collector, mpi, [str(program), str(ITERATIONS)], job, ranks=RANKS,
                          interval_ms=50, timeout=120, **env)  # fmt: skip
    assert result.returncode == 0, result.stderr


def two_runs(collector, mpi: str, folder: Path) -> tuple[str, str]:
    """phases.c built for `mpi` and run twice, the same command line: (job a, job b)."""
    program = folder / "phases"
    subprocess.run([COMPILERS[mpi], "-g", "-O2", "-o", program, HERE / "phases.c"],
                   check=True)  # fmt: skip
    job_a, job_b = f"phases-a-{uuid.uuid4().hex[:8]}", f"phases-b-{uuid.uuid4().hex[:8]}"
    run(collector, mpi, program, job_a, PHASES_SLOW_MS="0")
    run(collector, mpi, program, job_b, PHASES_SLOW_MS=str(SLOW_MS), PHASES_BCAST="1")
    return job_a, job_b


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_the_slowed_line_is_named_first(collector, api_client, tmp_path, mpi: str) -> None:
    job_a, job_b = two_runs(collector, mpi, tmp_path)
    answer = api_client.get("/api/compare", params={"a": job_a, "b": job_b})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    sites = body["sites"]
    assert body["sites_total"] == len(sites)
    slow, steady, extra = (f"phases.c:{line_of(m)}" for m in ("slow", "steady", "extra"))
    first = sites[0]
    assert (first["label"], first["op"], first["present"]) == (slow, "MPI_Barrier", "both")
    assert (first["a_calls"], first["b_calls"]) == (ITERATIONS * RANKS, ITERATIONS * RANKS)
    assert (first["a_bytes"], first["b_bytes"]) == (0, 0)
    # rank 0 waits for rank 1's sleep at the barrier in every iteration of run b
    assert first["delta_ns"] == first["b_ns"] - first["a_ns"]
    assert first["delta_ns"] >= ITERATIONS * SLOW_MS * 10**6 // 2, first
    assert first["delta_pct"] == pytest.approx(100 * first["delta_ns"] / first["a_ns"])
    assert first["path"].startswith(f"main ({HERE / 'phases.c'}:{line_of('slow')})")
    by_label = {(s["label"], s["op"]): s for s in sites}
    same = by_label[(steady, "MPI_Allreduce")]
    assert (same["present"], same["a_calls"], same["b_calls"]) == (
        "both", ITERATIONS * RANKS, ITERATIONS * RANKS)  # fmt: skip
    assert (same["a_bytes"], same["b_bytes"]) == (ITERATIONS * RANKS * 8,) * 2
    assert abs(same["delta_ns"]) < first["delta_ns"]
    assert sites.index(same) > 0
    only_b = by_label[(extra, "MPI_Bcast")]
    assert (only_b["present"], only_b["a_ns"], only_b["a_calls"], only_b["b_calls"]) == (
        "b", 0, 0, ITERATIONS * RANKS)  # fmt: skip
    assert only_b["delta_ns"] == only_b["b_ns"] and only_b["delta_pct"] is None
    # each side's figures are its own run's call sites, exactly
    for side, job in (("a", job_a), ("b", job_b)):
        own = api_client.get(f"/api/jobs/{job}/callsites").json()["sites"]
        shown = {(s["label"], s["op"]): (s[f"{side}_ns"], s[f"{side}_calls"], s[f"{side}_bytes"])
                 for s in sites if s["present"] in ("both", side)}  # fmt: skip
        assert shown == {(s["label"], s["op"]): (s["time_ns"], s["calls"], s["bytes"])
                         for s in own}, side  # fmt: skip
        # its elapsed time is its run's on the job page, its parts per MPI operation the
        # page's operations per rank
        (own_run,) = api_client.get(f"/api/jobs/{job}/runs").json()["runs"]
        assert body[side]["elapsed_ns"] == own_run["finished_ns"] - own_run["started_ns"], side
        ops = api_client.get(f"/api/jobs/{job}/ops", params={"run": 1}).json()["ops"]
        assert {name: ns for name, ns in body[side]["parts"].items()
                if name.startswith("MPI_")} == {
            op["op"]: op["time_ns"] // RANKS for op in ops if op["category"] in MPI_CATEGORIES
        }, side  # fmt: skip
    # the same rows as a CSV file
    as_csv = api_client.get("/api/compare", params={"a": job_a, "b": job_b, "format": "csv"})
    assert as_csv.status_code == 200
    assert as_csv.headers["content-disposition"] == 'attachment; filename="compare-callsites.csv"'
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [(r["label"], r["op"], int(r["delta_ns"])) for r in rows] == [
        (s["label"], s["op"], s["delta_ns"]) for s in sites]  # fmt: skip


def test_the_job_page_links_to_the_comparison_with_the_previous_run(collector, pg_url,
                                                                    tmp_path) -> None:  # fmt: skip
    job_a, job_b = two_runs(collector, "openmpi", tmp_path)
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port), chromium_page() as (page, errors):
        history = httpx.get(f"http://127.0.0.1:{port}/api/compare/history",
                            params={"job": job_b}).json()  # fmt: skip
        me = history["runs"][0]["owner"]  # both runs' owner, as the API names it
        href = "/compare?" + urlencode({"b": job_b, "b_run": 1, "b_owner": me, "a": job_a,
                                        "a_run": 1, "a_owner": me})  # fmt: skip
        page.goto(f"http://127.0.0.1:{port}/jobs/{job_b}")
        link = page.locator("#jv-compare a")
        expect(link).to_have_text("Compare run 1 with the previous run of its program",
                                  timeout=20_000)  # fmt: skip
        assert link.get_attribute("href") == href
        expect(page.locator("#jv-compare")).to_contain_text(f": {job_a} run 1, started ")
        link.click()
        first = page.locator("#cmp-sites .ag-row[row-index='0']")
        expect(first.locator("[col-id=where]")).to_have_text(f"phases.c:{line_of('slow')}",
                                                             timeout=20_000)  # fmt: skip
        expect(first.locator("[col-id=op]")).to_have_text("MPI_Barrier")
        expect(first.locator("[col-id=a_calls]")).to_have_text(str(ITERATIONS * RANKS))
        expect(first.locator("[col-id=b_calls]")).to_have_text(str(ITERATIONS * RANKS))
        expect(page.locator("#cmp-sites-caption")).to_contain_text(
            "call sites of either run, the largest change of time first"
        )
        page.goto(f"http://127.0.0.1:{port}/jobs/{job_a}")
        expect(page.locator("#jv-compare")).to_have_text(
            "Run 1 is the first run of its program that you may read.", timeout=20_000
        )
        assert errors == []
    engine.dispose()


def test_stacklens_report_compare_writes_the_comparison(collector, pg_url, api_client,
                                                        tmp_path) -> None:  # fmt: skip
    job_a, job_b = two_runs(collector, "openmpi", tmp_path)
    engine = make_engine(pg_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    out = tmp_path / "compare.html"
    pdf_out = tmp_path / "compare.pdf"
    with serving(create_app(engine)) as port:
        done, as_pdf = (
            stacklens_cli("report", "--compare", job_a, f"{job_b}:1", "-o", str(path),
                          "--server", f"http://127.0.0.1:{port}", env=env)
            for path in (out, pdf_out)
        )  # fmt: skip
    engine.dispose()
    assert as_pdf.returncode == 0, as_pdf.stderr
    assert pdf_out.read_bytes().startswith(b"%PDF-")
    assert as_pdf.stdout == f"{pdf_out}: {pdf_out.stat().st_size:,} bytes (application/pdf)\n"
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}: {out.stat().st_size:,} bytes (text/html; charset=utf-8)\n"
    assert done.stderr.splitlines()[-1].startswith("[##############################] 3/3 written")
    text = html.unescape(out.read_text())
    slow = f"phases.c:{line_of('slow')}"
    assert f"Comparison: job {job_b} run 1 against job {job_a} run 1" in text
    assert f"Largest change at a call site: MPI_Barrier at {slow} +" in text
    assert f"calls {ITERATIONS * RANKS:,} → {ITERATIONS * RANKS:,})." in text
    # the call sites table: the slowed line's row first
    table = text[text.index('id="sites"') :]
    first_row = re.search(r"<tbody>\s*<tr>(.*?)</tr>", table, re.S)
    assert first_row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first_row.group(1), re.S)
    assert [c.strip() for c in cells[:3]] == [slow, "MPI_Barrier", "both"]
    assert [c.strip() for c in cells[7:9]] == [str(ITERATIONS * RANKS)] * 2
    pdf = api_client.get("/api/reports/compare", params={"a": job_a, "b": job_b, "format": "pdf"})
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF-")
    assert pdf.headers["content-disposition"] == (
        f'attachment; filename="stacklens-comparison-{job_b}-run1-vs-{job_a}-run1.pdf"'
    )
    missing = api_client.get("/api/reports/compare", params={"a": "nope", "b": job_b})
    assert (missing.status_code, missing.json()) == (404, {"detail": "unknown job 'nope'"})
