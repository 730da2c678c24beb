"""Reports (#16): a real MPI job's PDF says its totals and findings (pdftotext) on non-blank
pages (pdftoppm); a job with hostile names and every kind of record, on the small known
fabric, opens offline in Chromium with every figure drawn, no console error, its names
verbatim and nothing run; its PDF says the same names verbatim; the fabric window's report
names the busy link, its PortXmitWait and errors; another user's job cannot be exported
(404 as for an unknown job) and is never named in a window report; a job's report joins
the busy link of an incident naming it to its own slowdown and names the job with most
bytes on the link; a batch script's shell counts as a process, not a rank; the PDF's
tables get widths from their text and 50 rows at most."""

from __future__ import annotations

import html
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from sqlalchemy import select
from sqlalchemy.orm import Session

from presentation.report_model import Table
from server.access.viewer import Access
from server.app import create_app
from server.fabric import repository as fabric
from server.incidents import repository as incidents
from server.reports.render import CELL_PADDING, PAGE_CHARS, column_widths, printed
from stacklens.db import make_engine
from stacklens.schema import Job
from tests.access.data import ALICE_JOB, BOB_JOB, BOB_NAMES, send_two_users_jobs, token_for
from tests.collector.test_ingest import T0
from tests.collector.test_runs import mpi_frame, process_frame, send
from tests.conftest import chromium_page, serving
from tests.hooks.test_openmpi import run_under_hooks
from tests.hooks.test_slow_rank_job import ALLREDUCE_LINE
from tests.reports.data import (
    HOSTILE_COMMAND,
    HOSTILE_JOB,
    HOSTILE_PATH,
    HOSTILE_USER,
    send_hostile_job,
)
from tests.server.fabric_data import write_small_fabric
from tests.test_cli import stacklens_cli

S = 10**9


def pdf_text(body: bytes, tmp_path: Path) -> str:
    """pdftotext of a PDF (layout kept, so table rows stay on one line)."""
    path = tmp_path / "report.pdf"
    path.write_bytes(body)
    done = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                          text=True, check=True, timeout=60)  # fmt: skip
    return done.stdout


def flat(text: str) -> str:
    """The words of a text, one space apart (a title may wrap)."""
    return " ".join(text.split())


def blank_pages(body: bytes, tmp_path: Path) -> tuple[int, list[int]]:
    """(pages, the numbers of those without a mark): pdftoppm at 30 dpi, a page is blank
    when fewer than 0.5 % of its pixels are not white."""
    (tmp_path / "report.pdf").write_bytes(body)
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(tmp_path / "report.pdf"),
                    str(tmp_path / "page")], check=True, timeout=120)  # fmt: skip
    pages = sorted(tmp_path.glob("page-*.png"))
    blank = []
    for i, page in enumerate(pages, 1):
        grey = Image.open(page).convert("L")
        marked = sum(grey.histogram()[:245])
        if marked < grey.width * grey.height * 0.005:
            blank.append(i)
    return len(pages), blank


def test_the_pdf_of_a_real_job_says_its_totals_and_findings(
    collector, api_client, examples_built, tmp_path
):
    job = f"report-{uuid.uuid4().hex[:8]}"
    # 4 ranks meet 30 times in MPI_Allreduce (one double each); rank 2 computes 150 ms
    # instead of 20 ms in iterations 10..19: the others wait for it inside the collective
    program = [str(examples_built / "slow_rank"), "30", "20", "2", "10", "20", "150"]
    result = run_under_hooks(collector, program, job, ranks=4)
    assert result.returncode == 0, result.stderr

    answer = api_client.get(f"/api/reports/jobs/{job}", params={"format": "pdf"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/pdf"
    assert (
        answer.headers["content-disposition"] == f'attachment; filename="stacklens-job-{job}.pdf"'
    )
    text = pdf_text(answer.content, tmp_path)
    lines = text.splitlines()
    assert f"Job {job} — all 1 run(s)" in text
    assert any(line.split()[:2] == ["Command", str(examples_built / "slow_rank")] for line in lines)
    assert "Status" in text and "finished" in text
    assert "run 1: mpi, 4 ranks, finished" in text
    # totals: 4 ranks x 30 calls of MPI_Allreduce of 8 bytes
    # (the bytes-by-category row: its label, the same as the page's, then its figures)
    (collective,) = [
        ln for ln in lines if ln.split()[:1] == ["collective"] and ln.split()[1].isdigit()
    ]
    sent, received, calls = (
        collective.split()[1:3],
        collective.split()[3:-3],
        collective.split()[-3],
    )
    assert (sent, received, calls) == (["960", "B"], ["0B"], "120"), collective
    (allreduce,) = [ln for ln in lines if ln.split()[:2] == ["MPI_Allreduce", "collective"]]
    assert allreduce.split()[1:5] == ["collective", "120", "960", "B"], allreduce
    # findings: rank 2 computed far longer, first: it arrived last at every MPI_Allreduce,
    # the others waited for it
    said = flat(text)
    assert f"Rank 2 arrives last at MPI_Allreduce in slow_rank.c:{ALLREDUCE_LINE}: " in said
    assert "more computing than the median rank" in said and "ranks 0, 1, 3 wait for it." in said
    assert "MPI_Allreduce on communicator" in said and "rank 2 arrives last (the least" in said
    for place in ("inside MPI", "file I/O", "outside MPI and I/O", "start-up"):
        assert any(line.strip().startswith(place) for line in lines), place
    pages, blank = blank_pages(answer.content, tmp_path)
    assert pages >= 5 and blank == []


@pytest.fixture
def hostile(collector, pg_url, api_client):
    """The hostile job on the small fabric, through the real collector and fabric store."""
    send_hostile_job(collector)
    write_small_fabric(pg_url)
    return api_client


def test_a_hostile_job_opens_offline_with_every_figure_and_runs_nothing(hostile, tmp_path):
    answer = hostile.get(f"/api/reports/jobs/{HOSTILE_JOB}", params={"format": "html"})
    assert answer.status_code == 200, answer.text
    body = answer.text
    for raw in (HOSTILE_JOB, HOSTILE_COMMAND, "</script><b>x</b>", HOSTILE_USER):
        assert raw not in body, raw  # written as text, never as markup
    assert body.count("Plotly.newPlot") == 1 and body.count("plotly.js v") == 1
    path = tmp_path / "report.html"
    path.write_bytes(answer.content)
    with chromium_page() as (page, errors):
        requested: list[str] = []

        def offline(route):
            requested.append(route.request.url)
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                route.abort()

        page.route("**/*", offline)
        page.goto(path.as_uri())
        figures = page.locator("div.plot")
        count = figures.count()
        assert count == 10  # the communicator families card: its reach figure
        page.wait_for_function(
            "n => document.querySelectorAll('div.plot .main-svg').length >= n", arg=count,
            timeout=60_000)  # fmt: skip
        for i in range(count):
            assert figures.nth(i).locator(".main-svg").count() >= 1, i
        assert page.locator("h1").inner_text() == f"Job {HOSTILE_JOB} — all 1 run(s)"
        facts = page.locator("table.facts").inner_text()
        assert HOSTILE_COMMAND in facts and HOSTILE_USER in facts
        assert HOSTILE_PATH in page.locator("#io").inner_text()
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert errors == []
        assert [u for u in requested if not u.startswith("file://")] == []

    pdf = hostile.get(f"/api/reports/jobs/{HOSTILE_JOB}", params={"format": "pdf"})
    assert pdf.status_code == 200
    text = pdf_text(pdf.content, tmp_path)
    assert f"Job {HOSTILE_JOB}" in text and HOSTILE_USER in text
    assert "**bold** [a](javascript:alert(1))" in text


def test_the_job_report_names_its_links_load_wait_and_errors(hostile, tmp_path):
    pdf = hostile.get(f"/api/reports/jobs/{HOSTILE_JOB}", params={"format": "pdf"})
    text = pdf_text(pdf.content, tmp_path)
    # leaf1[1] sent 100 M words (0.4 GB) to host1 in the second sweep's 1 s: 10 % of 4 GB/s,
    # waited 77 ticks; host1's PortRcvErrors was reset there, so its errors are unknown
    assert "Link host1[1] → leaf1[1]: 77 PortXmitWait ticks" in text
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("host1[1] → leaf1[1]"))
    assert row.split()[3:] == ["host", "10", "%", "10", "%", "77", "?"], row
    # no forwarding tables in this fabric: the job's 24 KiB of point-to-point and its 384 B
    # of (modelled) collective traffic are on no link, its file I/O is local (no servers)
    assert "On no link: local_io: 600 B, no_route: 24.38 KiB." in flat(text)


def test_the_window_report_of_the_fabric(hostile, tmp_path):
    params = {"from": T0 // S, "to": T0 // S + 3, "format": "pdf"}
    pdf = hostile.get("/api/reports/window", params=params)
    assert pdf.status_code == 200, pdf.text
    text = pdf_text(pdf.content, tmp_path)
    assert "Fabric window 2023-11-14 22:13:20 UTC – 2023-11-14 22:13:23 UTC" in flat(text)
    # spine1 -> leaf1: 500 M words in 1 s = 2 GB/s of 4 GB/s
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("spine1[1] → leaf1[3]"))
    assert row.split()[3:] == ["switch", "link", "50", "%", "50", "%", "0", "0"], row
    assert f"Job {HOSTILE_JOB} ({HOSTILE_USER}, 2 ranks, running) ran on 2 hosts" in flat(text)
    # host2's link went down at T0 + 3 s: a window over it, on host2, says so
    on_host2 = {**params, "to": T0 // S + 4, "hosts": "host2"}
    text = flat(pdf_text(hostile.get("/api/reports/window", params=on_host2).content, tmp_path))
    assert "Scope hosts host2" in text and "Links in scope 1 (1 host links)" in text
    assert "link down: host2[1] - leaf1[2] from 2023-11-14 22:13:23 UTC, still open." in text
    refused = hostile.get("/api/reports/window", params={**params, "color": "red"})
    assert refused.status_code == 422


def test_another_users_job_cannot_be_exported(collector, pg_url):
    send_two_users_jobs(collector)
    engine = make_engine(pg_url)
    app = create_app(engine, access=Access(mode="oidc"))
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            alice = {"Authorization": f"Bearer {token_for(engine, 'alice')}"}
            mine = client.get(f"/api/reports/jobs/{ALICE_JOB}", headers=alice)
            assert mine.status_code == 200 and ALICE_JOB in mine.text
            for fmt in ("html", "pdf"):
                for progress in ("false", "true"):
                    params = {"format": fmt, "progress": progress}
                    theirs = client.get(f"/api/reports/jobs/{BOB_JOB}", params=params,
                                        headers=alice)  # fmt: skip
                    unknown = client.get("/api/reports/jobs/nobody", params=params, headers=alice)
                    assert theirs.status_code == unknown.status_code == 404
                    assert theirs.json()["detail"] == f"unknown job {BOB_JOB!r}"
            window = client.get("/api/reports/window", headers=alice,
                                params={"from": T0 // S, "to": T0 // S + 10})  # fmt: skip
            assert window.status_code == 200
            assert ALICE_JOB in window.text and "1 of other users (not named)" in window.text
            shown = re.sub(r"<script>.*?</script>", "", window.text, count=1, flags=re.S)
            assert "plotly" not in shown and [n for n in BOB_NAMES if n in shown] == []
            nobody = client.get(f"/api/reports/jobs/{ALICE_JOB}")
            assert nobody.status_code == 401
    finally:
        engine.dispose()


def _incident(pg_url: str, aggressor: str | None = None, victim: str = HOSTILE_JOB) -> int:
    """An incident (server/incidents/repository.py `save`) on the small fabric's spine1 -
    leaf1 link: congestion 1.5x its threshold, the job `victim` its victim, its time per
    byte 4x its baseline; the job `aggressor`, if given, its aggressor with 5,000 bytes on
    the link."""
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session, session.begin():
            link = next(lk for lk in fabric.links(session) if lk["a"]["name"] == "spine1")
            job = session.scalars(select(Job.id).where(Job.job_key == victim)).one()
            steps = [{"t_ns": T0 + k * S, "time_ns": 4_000 * (k + 1), "bytes": 1000,
                      "per_byte_ns": 4.0 * (k + 1), "baseline_per_byte_ns": 4.0}
                     for k in range(3)]  # fmt: skip
            row = {
                "key": "congestion:report", "kind": "congestion", "severity": "major",
                "title": "Congestion on spine1[1] – leaf1[3]", "start_ns": T0 + S,
                "end_ns": T0 + 2 * S, "detected_ns": T0 + 2 * S, "updated_ns": T0 + 2 * S,
                "link_ids": [link["id"]], "signals": ["congestion", "mpi_slowdown"],
                "links": [{"id": link["id"], "a": link["a"], "b": link["b"],
                           "capacity_bytes_per_s": 4_000_000_000, "signals": ["congestion"],
                           "peak": 1.5, "evidence": [
                               {"t_ns": T0 + S, "utilisation": 0.5, "xmit_wait_per_s": 10.0},
                               {"t_ns": T0 + 2 * S, "utilisation": 0.9,
                                "xmit_wait_per_s": 5_000_000.0}]}],
                "members": [{"role": "victim"}],
            }  # fmt: skip
            named = [
                {
                    "rank": 1,
                    "role": "late",
                    "op": "MPI_Sendrecv",
                    "text": "rank 1 arrives last at MPI_Sendrecv: 1.00 s more computing than "
                    "the median rank (50% of the elapsed time); rank 0 waits for it",
                }
            ]
            evidence = {
                "mpi_slowdown": {
                    "peak_factor": 4.0,
                    "series": steps,
                    "waits_in": "p2p",
                    "waiting_ns": {"p2p": 36_000},
                    "ranks": named,
                }
            }
            member = {
                "slot": 0,
                "job_id": job,
                "role": "victim",
                "signals": ["mpi_slowdown"],
                "ranks": [1],
                "files": [],
                "link_bytes": 800,
                "evidence": evidence,
            }
            if aggressor is None:
                return incidents.save(session, row, [member])
            other = session.scalars(select(Job.id).where(Job.job_key == aggressor)).one()
            row["members"] = [{"role": "aggressor"}, {"role": "victim"}]
            first = {"slot": 0, "job_id": other, "role": "aggressor", "signals": [], "ranks": [],
                     "files": [], "link_bytes": 5000, "evidence": {}}  # fmt: skip
            return incidents.save(session, row, [first, {**member, "slot": 1}])
    finally:
        engine.dispose()


def test_the_incident_report(hostile, pg_url, tmp_path):
    incident = _incident(pg_url)
    pdf = hostile.get(f"/api/reports/incidents/{incident}", params={"format": "pdf"})
    assert pdf.status_code == 200, pdf.text
    text = flat(pdf_text(pdf.content, tmp_path))
    assert f"Incident {incident}: Congestion on spine1[1] – leaf1[3]" in text
    assert "Kind and severity congestion, major" in text
    assert (
        "Link spine1[1] → leaf1[3]: congestion, 1.5× its threshold at worst; utilisation up to "
        "90 %, PortXmitWait up to 5,000,000 ticks/s."
    ) in text
    assert (f"Job {HOSTILE_JOB} ({HOSTILE_USER}) was the victim: mpi_slowdown; ranks most "
            "affected: 1; 800 B on these links (routed).") in text  # fmt: skip
    assert (
        f"Job {HOSTILE_JOB}: mpi slowdown, time per byte up to 4.0× its own baseline, "
        "most of it in blocking point-to-point."
    ) in text
    assert (
        f"Job {HOSTILE_JOB}: rank 1 arrives last at MPI_Sendrecv: 1.00 s more computing "
        "than the median rank (50% of the elapsed time); rank 0 waits for it."
    ) in text
    assert hostile.get(f"/api/reports/incidents/{incident + 1}").status_code == 404
    html = hostile.get(f"/api/reports/incidents/{incident}")
    assert html.status_code == 200 and html.text.count('class="figure plot"') == 3


def test_the_job_report_joins_a_busy_link_to_its_slowdown_and_names_who_loaded_it(
    hostile, collector, pg_url, tmp_path
):
    send_two_users_jobs(collector)
    incident = _incident(pg_url, aggressor=BOB_JOB)
    expected = (
        f"Link spine1[1] → leaf1[3] was at up to 90 % of its capacity for 1.00 s (incident "
        f"{incident}, from 2023-11-14 22:13:21 UTC) while this job's time blocked in MPI "
        "calls per byte rose to 4.0× its own baseline, most of it in blocking point-to-point; "
        f"the job with most bytes on it was job {BOB_JOB} (4.88 KiB, routed)."
    )
    pdf = hostile.get(f"/api/reports/jobs/{HOSTILE_JOB}", params={"format": "pdf"})
    assert pdf.status_code == 200, pdf.text
    assert expected in flat(pdf_text(pdf.content, tmp_path))
    # the aggressor's own report: it had the most bytes, and no slowdown of its own
    theirs = hostile.get(f"/api/reports/jobs/{BOB_JOB}", params={"format": "pdf"})
    assert (
        f"Link spine1[1] → leaf1[3] was at up to 90 % of its capacity for 1.00 s (incident "
        f"{incident}, from 2023-11-14 22:13:21 UTC) while this job had the most bytes on it "
        "(4.88 KiB, routed)."
    ) in flat(pdf_text(theirs.content, tmp_path))


def test_a_job_report_names_no_other_users_job_from_an_incident(collector, pg_url):
    send_two_users_jobs(collector)
    write_small_fabric(pg_url)
    incident = _incident(pg_url, aggressor=BOB_JOB, victim=ALICE_JOB)
    engine = make_engine(pg_url)
    app = create_app(engine, access=Access(mode="oidc"))
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            alice = {"Authorization": f"Bearer {token_for(engine, 'alice')}"}
            mine = client.get(f"/api/reports/jobs/{ALICE_JOB}", headers=alice)
            assert mine.status_code == 200, mine.text
            shown = re.sub(r"<script>.*?</script>", "", mine.text, count=1, flags=re.S)
            assert (
                f"Link spine1[1] → leaf1[3] was at up to 90 % of its capacity for 1.00 s "
                f"(incident {incident}, from 2023-11-14 22:13:21 UTC) while this job's time "
                "blocked in MPI calls per byte rose to 4.0× its own baseline, most of it in "
                "blocking point-to-point; the job with most bytes on it was another job (not "
                "yours)."
            ) in html.unescape(shown)
            assert [n for n in BOB_NAMES if n in shown] == []
    finally:
        engine.dispose()


def test_a_scripts_shell_is_a_process_in_the_job_report(collector, api_client):
    """job-S, a batch script's: its shell (a process without MPI, run 1) and the `mpirun
    -np 2` it started (run 2). The report's Ranks fact counts the shell apart, not as a
    third rank of a world of 2; its ranks table names it a process."""
    send(collector, [process_frame(500, 9, 0, 40, job="job-S")])
    send(collector, [mpi_frame(1, 0, rank, 1000, job="job-S") for rank in (0, 1)])

    def report(**params) -> tuple[dict[str, str], str]:
        answer = api_client.get("/api/reports/jobs/job-S", params={"format": "html", **params})
        assert answer.status_code == 200, answer.text
        rows = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", answer.text)
        return {label: html.unescape(value) for label, value in rows}, answer.text

    facts, body = report()
    assert facts["Ranks"] == "2 (2 reported), 1 process"
    assert facts["Runs"] == "run 1: processes, 1 process, running; run 2: mpi, 2 ranks, running"
    assert "2 ranks and 1 process." in body and ">process 0<" in body
    assert report(run=2)[0]["Ranks"] == "2 (2 reported)"  # the MPI run: as ever
    assert report(run=1)[0]["Ranks"] == "none, 1 process"  # the shell's run


def test_the_pdf_tables_widths_and_rows():
    rows = [["a" * 50, "55 %", "0"], ["b", "5 %", "1,234"]]
    table = Table(["link", "mean util.", "errors"], rows, [False, True, True])
    # link: 50 characters, counted as WIDEST_CELL (40); mean util.: its word "util." (5);
    # errors: the word (6) over its longest cell (5); each with 2 of padding
    assert [round(w, 2) for w in column_widths(table)] == [73.68, 12.28, 14.04]
    # Too wide for the page side by side: every column gets its longest word first (no
    # word is broken: "measured", "command", "finished"), the rest of the page goes to
    # the columns that want more than their word
    wide = Table(["job", "user", "command", "status", "measured bytes"],
                 [["j" * 40, "root", "./ring_allreduce 40 262144 100 " * 2, "finished", "123"]],
                 [False, False, False, False, True])  # fmt: skip
    shares = column_widths(wide)
    chars = [share * PAGE_CHARS / 100 - CELL_PADDING for share in shares]
    assert [round(c, 2) for c in chars] == [40.0, 4.0, 30.0, 8.0, 8.0]
    assert sum(shares) == pytest.approx(100)
    assert printed(table) is table
    long = Table(["n"], [[str(i)] for i in range(120)], [True], "Sorted.")
    cut = printed(long)
    assert cut.rows == long.rows[:20]
    assert cut.note == "The first 20 of the 120 rows the HTML report lists. Sorted."


def test_stacklens_report_writes_the_file_with_a_progress_bar(hostile, pg_url, tmp_path):
    incident = _incident(pg_url)
    engine = make_engine(pg_url)
    app = create_app(engine)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    try:
        with serving(app) as port:
            base = ["--server", f"http://127.0.0.1:{port}"]
            out = tmp_path / "job.html"
            done = stacklens_cli("report", "--job", HOSTILE_JOB, "-o", str(out), *base, env=env)
            assert done.returncode == 0, done.stderr
            assert (
                done.stdout == f"{out}: {out.stat().st_size:,} bytes (text/html; charset=utf-8)\n"
            )
            bars = done.stderr.splitlines()  # each "\r" redraw (read as text: a new line)
            assert bars[1].startswith("[------------------------------] 0/7 job and runs")
            assert any(b.startswith("[#########################-----] 6/7 rendering html")
                       for b in bars)  # fmt: skip
            assert bars[-1].startswith("[##############################] 7/7 written")
            assert f"Job {HOSTILE_JOB.replace('<', '&lt;').replace('>', '&gt;')}" in out.read_text()
            pdf = tmp_path / "incident.pdf"
            done = stacklens_cli("report", "--incident", str(incident), "-o", str(pdf), *base,
                                 env=env)  # fmt: skip
            assert done.returncode == 0 and pdf.read_bytes().startswith(b"%PDF-"), done.stderr
            window = tmp_path / "window.pdf"
            done = stacklens_cli("report", "--from", str(T0 // S), "--to", str(T0 // S + 3),
                                 "--hosts", "host1", "-o", str(window), *base, env=env)  # fmt: skip
            assert done.returncode == 0 and window.read_bytes().startswith(b"%PDF-"), done.stderr
            missing = stacklens_cli("report", "--job", "nope", "-o", str(out), *base, env=env)
            assert missing.returncode == 1
            assert missing.stderr.endswith("404 unknown job 'nope'\n"), missing.stderr
            for bad, why in (
                (["--job", "x", "-o", "x.txt"],
                 "-o x.txt: the file name must end in .html or .pdf"),
                (["-o", "x.pdf"],
                 "say what to report: --job J, --incident I, --compare A B, or --from T --to T"),
                (["--compare", "x", "y", "--run", "2", "-o", "x.pdf"],
                 "--compare takes no --from/--to, hosts, --run or --owner: JOB[:RUN] names "
                 "each run, --a-from/--a-to and --b-from/--b-to a window of either"),
                (["--job", "x", "--b-from", "0", "-o", "x.pdf"],
                 "--a-from, --a-to, --b-from and --b-to go with --compare: a window of run a "
                 "or run b"),
                (["--incident", "1", "--from", "0", "-o", "x.pdf"],
                 "--incident takes no window or hosts: the incident has its own"),
            ):  # fmt: skip
                refused = stacklens_cli("report", *bad, *base, env=env)
                assert (refused.returncode, refused.stderr) == (2, f"stacklens: {why}\n")
    finally:
        engine.dispose()
