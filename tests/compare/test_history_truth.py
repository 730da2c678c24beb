# tests/compare/test_history_truth.py — a program's history across a rebuild (issue #28 point 1).
"""phases.c built and run twice, then rebuilt (other optimisation flags: another build-id,
the same path and command line) and run once more, under the real hooks (Open MPI). Each
run records its executable's build-id exactly as the ELF file has it; the third run's
history lists the two before it as of another build and itself as rebuilt; its median
comparison has no earlier run of its build. In Chromium, the third run's job page lists
its two predecessors with their elapsed time and shares of MPI and file I/O, each linked to
the Compare page against it, names the program by its executable's path and arguments,
says that the executable was rebuilt, and draws the trend
with a line per build and this run marked (legend, axis titles); the link opens a
comparison whose finding names the rebuild; no console error."""

from __future__ import annotations

import os
import subprocess
import uuid
from urllib.parse import urlencode

from playwright.sync_api import expect

from presentation.formatting import format_duration_ns, format_utc_ns
from stacklens.db import make_engine
from stacklens.symbols import file_build_id
from stacklens_cli.site import create_site
from tests.compare.test_sites_truth import COMPILERS, HERE, ITERATIONS, RANKS, run
from tests.conftest import chromium_page, free_port, serving


def test_a_rebuild_starts_a_new_segment_of_the_history(collector, api_client, pg_url,
                                                       tmp_path) -> None:  # fmt: skip
    program = tmp_path / "phases"
    tag = uuid.uuid4().hex[:8]
    jobs = [f"hist-{tag}-{i}" for i in (1, 2, 3)]
    builds: list[str | None] = []
    for job, flags in zip(jobs, ("-O2", "-O2", "-O0"), strict=True):
        if not builds or flags != "-O2":
            subprocess.run([COMPILERS["openmpi"], "-g", flags, "-o", program,
                            HERE / "phases.c"], check=True)  # fmt: skip
        builds.append(file_build_id(program))
        run(collector, "openmpi", program, job, PHASES_SLOW_MS="0")
    old, new = builds[0], builds[2]
    assert old is not None and new is not None and old != new and builds[1] == old
    history = api_client.get("/api/compare/history", params={"job": jobs[2]}).json()
    assert history["build_id"] == new
    assert [(r["job"], r["build_id"], r["same_build"], r["rebuilt"]) for r in history["runs"]] == [
        (jobs[2], new, True, True),
        (jobs[1], old, False, False),
        (jobs[0], old, False, False),
    ]
    median = api_client.get("/api/compare", params={"b": jobs[2]})
    assert median.status_code == 404
    assert "executable, arguments, world size and build" in median.text
    # the job page: predecessors, trend, links
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port), chromium_page() as (page, errors):
        page.goto(f"http://127.0.0.1:{port}/jobs/{jobs[2]}")
        rows = page.locator("#jv-history tbody tr")
        expect(rows).to_have_count(2, timeout=30_000)
        # the program named by its executable's path and arguments
        expect(page.locator("#jv-history p")).to_have_text(
            f"Program: {os.path.realpath(program)} {ITERATIONS} ({RANKS} ranks)")  # fmt: skip
        cells = rows.evaluate_all("rows => rows.map(r => [...r.cells].map(c => c.innerText))")
        assert cells == [
            [f"{r['job']} run 1", r["owner"], format_utc_ns(r["started_ns"]),
             format_duration_ns(r["elapsed_ns"]), f"{r['mpi_share']:.0%}",
             f"{r['io_share']:.0%}", f"{old[:12]} · another build", "finished"]
            for r in history["runs"][1:]
        ]  # fmt: skip
        links = page.locator("#jv-history tbody a")
        owner = history["runs"][0]["owner"]
        assert [links.nth(i).get_attribute("href") for i in range(2)] == [
            "/compare?"
            + urlencode(
                {"b": jobs[2], "b_run": 1, "b_owner": owner, "a": job, "a_run": 1, "a_owner": owner}
            )  # fmt: skip
            for job in (jobs[1], jobs[0])
        ]
        expect(page.locator("#jv-compare")).to_contain_text(
            "Its executable was rebuilt since.")  # fmt: skip
        trend = page.locator("#jv-history-trend")
        expect(trend.locator(".gtitle")).to_have_text("Elapsed time of the program's runs")
        assert trend.locator(".legendtext").evaluate_all("ts => ts.map(t => t.textContent)") == [
            f"build {old[:12]}", f"build {new[:12]}", "this run"]  # fmt: skip
        assert trend.locator(".xtitle").text_content() == "run start (UTC)"
        assert trend.locator(".ytitle").text_content() == "elapsed seconds"
        links.first.click()
        expect(page.locator("#cmp-finding")).to_contain_text(
            f"the executable was rebuilt (build-id {old[:12]} → {new[:12]})", timeout=30_000
        )
        assert errors == []
    engine.dispose()
