"""The "Communicator families" job card (presentation/cards.py) over a real job: the hooks'
families program (mpi_pmpi_hooks/tests/families.c, 8 ranks under Open MPI, ranks 0-3 on
host hA and 4-7 on hB; its header comment gives the pattern) through the real collector.

Its render from the API's answer (the table's rows and the "where does each dimension's
traffic go" figure, exact but for the measured times), its section of the job report, and
the job page in Chromium showing the card with a titled figure, axis titles and a legend,
without console errors. The API's figures themselves are checked in
tests/hooks/test_families.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from presentation.cards import BY_KEY, part_id
from presentation.formatting import format_bytes as b
from stacklens.api_models import JobFamilies
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.conftest import chromium_page, free_port, serving
from tests.e2e.test_dashboard import _table_rows
from tests.hooks import jobs
from tests.hooks.test_families import line_of, run_on_hosts

NONE = "—"
#: The reach figure's traces: bytes by family label (the families with bytes there).
HOST = "inside a host"
UNPLACED = "between hosts not placed on the fabric"


def expected_rows() -> dict[str, list[str]]:
    """label -> the table's cells but the two times: communicators, ranks per group,
    members, calls, collective bytes, point-to-point bytes, in a host, crossing a leaf,
    crossing the spine, not placed (no fabric here: bytes between hosts are not placed;
    collectives as tests/hooks/test_families.py models them)."""
    node = f"split at families.c:{line_of('rank / 4, rank, &node')}, 2 groups of 4"
    cross = f"split at families.c:{line_of('rank % 4, -rank, &cross')}, 4 groups of 2"
    halves, whole = "0–3; 4–7", "0–7"
    return {
        "cart 2×4 dim 1 kept": ["2", "4", halves, "80", b(80 * 8192), b(0),
                                b(8 * 10 * 2 * 3 * 8192 // 4), NONE, NONE, NONE],
        "cart 2×4 dim 0 kept": ["4", "2", "0, 4; 1, 5; 2, 6; 3, 7", "40", b(40 * 512), b(0),
                                NONE, NONE, NONE, b(8 * 5 * 512)],
        "cart 2×4": ["1", "8", whole, "0", b(0), b(0), NONE, NONE, NONE, NONE],
        "pp": ["1", "8", whole, "56", b(0), b(56_000), b(24_000), NONE, NONE, b(4_000)],
        "world": ["1", "8", whole, "8", b(64), b(0), b(8 * 2 * 8), NONE, NONE, b(8 * 8)],
        node: ["2", "4", halves, "24", b(24 * 64), b(0), b(8 * 3 * 2 * 64), NONE, NONE, NONE],
        cross: ["4", "2", "0, 4; 1, 5; 2, 6; 3, 7", "16", b(16 * 256), b(0), NONE, NONE, NONE,
                b(4 * 2 * 256)],
    }  # fmt: skip


def without_times(row: list[str]) -> tuple[str, list[str]]:
    """A table row (label first) as (label, its cells but the collective and point-to-point
    times, which are measured)."""
    return row[0], [cell for i, cell in enumerate(row[1:], 1) if i not in (6, 8)]


@pytest.fixture
def families_job(collector, pg_url) -> Iterator[tuple[str, str]]:
    """The families program's job stored, and the whole server (API and pages) on HTTP:
    (base URL, job id)."""
    job = f"famcard-{uuid.uuid4().hex[:8]}"
    result = run_on_hosts(collector, "openmpi", [jobs.program("openmpi", "families")], job)
    assert result.returncode == 0, result.stderr
    engine = make_engine(pg_url)
    port = free_port()
    app = create_site(engine, api_base_url=f"http://127.0.0.1:{port}", refresh_ms=500)
    with serving(app, port=port):
        yield f"http://127.0.0.1:{port}", job
    engine.dispose()


def test_the_card_renders_the_api_answer(families_job):
    base, job = families_job
    answer = httpx.get(f"{base}/api/jobs/{job}/families", timeout=60)
    assert answer.status_code == 200, answer.text
    families = JobFamilies.model_validate(answer.json())
    shown = BY_KEY["families"].render(families)

    table = shown["table"].splitlines()
    assert table[0].startswith("7 communicator families, heaviest time first")
    assert table[2] == (
        "| Family | Communicators | Ranks per group | Members (world ranks) | Calls | "
        "Collective bytes | Collective time | Point-to-point bytes | Point-to-point time | "
        "In a host | Crossing a leaf | Crossing the spine | Not placed |"
    )
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in table[4:]]
    rows = dict(without_times(row) for row in cells)
    # the labels' Markdown escapes: the page shows the text as is
    rows = {label.replace("&#58;", ":"): row for label, row in rows.items()}
    assert rows == expected_rows()

    figure = shown["reach"]
    assert figure.layout.title.text.startswith("Where does each dimension's traffic go")
    assert figure.layout.xaxis.title.text == "communicator family"
    assert figure.layout.yaxis.title.text == "bytes"
    bars = {t.name: dict(zip(t.x, t.y, strict=True)) for t in figure.data}
    expected = expected_rows()
    node, cross = (label for label in expected if label.startswith("split"))
    assert {name: {k: v for k, v in bars[name].items() if v} for name in bars} == {
        HOST: {"cart 2×4 dim 1 kept": 8 * 10 * 2 * 3 * 8192 // 4, "pp": 24_000, "world": 128,
               node: 3072},
        UNPLACED: {"cart 2×4 dim 0 kept": 20_480, "pp": 4000, "world": 64, cross: 2048},
    }  # fmt: skip


def test_the_job_page_and_the_report_show_the_card(families_job, tmp_path):
    base, job = families_job
    expected = expected_rows()
    with chromium_page() as (page, errors):
        page.goto(f"{base}/jobs/{job}")
        table = page.locator(f"#{part_id('families', 'table')}")
        expect(table).to_contain_text("7 communicator families", timeout=60_000)
        expect(table.locator("tbody tr")).to_have_count(7)
        rows = dict(without_times(row) for row in _table_rows(page, part_id("families", "table")))
        assert rows == expected
        figure = page.locator(f"#{part_id('families', 'reach')}")
        expect(figure.locator(".gtitle")).to_contain_text("Where does each dimension's traffic go")
        expect(figure.locator(".g-xtitle")).to_have_text("communicator family")
        expect(figure.locator(".g-ytitle")).to_have_text("bytes")
        expect(figure.locator(".legend .traces")).to_have_count(2)
        assert errors == [], "\n".join(errors)

        answer = httpx.get(f"{base}/api/reports/jobs/{job}", params={"format": "html"},
                           timeout=120)  # fmt: skip
        assert answer.status_code == 200, answer.text
        report = tmp_path / "report.html"
        report.write_bytes(answer.content)
        page.goto(report.as_uri())
        section = page.locator("section#families")
        expect(section.locator("h2")).to_have_text("Communicator families")
        body = section.locator("table tbody tr")
        expect(body).to_have_count(7)
        texts = [[c.strip() for c in body.nth(i).locator("td").all_inner_texts()]
                 for i in range(7)]  # fmt: skip
        assert dict(without_times(row) for row in texts) == expected
        assert errors == [], "\n".join(errors)
