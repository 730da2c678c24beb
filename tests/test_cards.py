"""The job card registry (presentation/cards.py): every card is declared once and shows on
the Jobs page, on the job page and in the job report.

The registry is checked against the API contract (each card is a section of JobDetails
with its model, and a job route of its own answering that model); then a real collector
fills the real database with one job, and Chromium shows each registered card's visible
text on both pages and in the report's HTML, with no console error.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from presentation.cards import CARDS, card_id, error_id, part_id
from server.app import create_app
from stacklens.api_models import JobDetails
from tests.e2e.test_jobs_page import browser_page, dashboard, job_frame, seed  # noqa: F401

JOB = "cards"
IO = [{"layer": 1, "opens": 1, "writes": 2, "bytes_written": 4096, "path": b"/scratch/out",
       "mount": b"/scratch", "fstype": b"lustre"}]  # fmt: skip

#: What each card shows of the seeded job (two ranks sending 100 bytes to each other; rank
#: 0 wrote 4 KiB to one file): a part of the card and a text it holds.
SHOWN = {
    "matrix": ("caption", "2 rank pairs with traffic; sort and filter in the grid."),
    "ops": ("summary", "No MPI operations recorded for this job."),
    "collectives": ("communicators", "No collective calls recorded for this job."),
    "sizes": ("table", "No message sizes recorded for this job."),
    "rma": ("caption", "No one-sided (RMA) calls in this job."),
    "callsites": ("caption", "No call sites: the job's ranks recorded none in this window"),
    "families": ("table", "1 communicator family, heaviest time first"),
    "io": ("caption", "1 file (per I/O layer), most bytes first."),
    "ranks": ("summary", "2 of 2 ranks reported"),
    "runs": ("table", "1 run (launches), by ordinal"),
}


def test_every_card_is_a_section_of_the_job_details_with_its_model():
    sections = {name for name in JobDetails.model_fields if name not in ("job", "errors")}
    assert [card.key for card in CARDS] == list(SHOWN)
    assert {card.key for card in CARDS} == sections
    for card in CARDS:
        assert JobDetails.model_fields[card.key].annotation == card.model | None, card.key


def test_every_card_has_a_job_route_answering_its_model():
    paths = create_app(None).openapi()["paths"]
    for card in CARDS:
        answer = paths[f"/api/jobs/{{job}}/{card.key}"]["get"]["responses"]["200"]
        schema = answer["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{card.model.__name__}"}, card.key


@pytest.fixture
def seeded(collector, dashboard) -> str:  # noqa: F811
    """The dashboard's base URL, its database holding the job JOB of alice (two ranks)."""
    base, _ = dashboard
    seed(collector, [job_frame(JOB, 0, rank=0, ranks=2, io=IO), job_frame(JOB, 0, rank=1, ranks=2)])
    return base


def _expect_every_card(page) -> None:
    """Each registered card on the page: its title, no error, what it shows of JOB."""
    for card in CARDS:
        section = page.locator(f"#{card_id(card.key)}")
        expect(section.locator("h2")).to_have_text(card.title)
        part, text = SHOWN[card.key]
        expect(page.locator(f"#{part_id(card.key, part)}")).to_contain_text(text, timeout=30_000)
        expect(page.locator(f"#{error_id(card.key)}")).to_be_empty()


def test_every_card_shows_on_the_jobs_page_and_the_job_page(seeded, browser_page):  # noqa: F811
    page, errors = browser_page
    page.goto(f"{seeded}/jobs")
    expect(page.locator("#shown-job")).to_contain_text(f"Job {JOB}", timeout=30_000)
    _expect_every_card(page)
    page.goto(f"{seeded}/jobs/{JOB}?owner=alice")
    expect(page.locator("#jv-title")).to_contain_text(f"Job {JOB} of alice", timeout=60_000)
    _expect_every_card(page)
    assert errors == [], "\n".join(errors)


def test_every_card_has_a_section_in_the_job_report(seeded, browser_page, tmp_path):  # noqa: F811
    answer = httpx.get(f"{seeded}/api/reports/jobs/{JOB}", params={"format": "html"}, timeout=120)
    assert answer.status_code == 200, answer.text
    report = tmp_path / "report.html"
    report.write_bytes(answer.content)
    page, errors = browser_page
    page.goto(report.as_uri())
    for card in CARDS:
        expect(page.locator(f"section#{card.key} > h2")).to_have_text(card.title)
    # The runs card's table: the job's one run, with its two ranks.
    expect(page.locator("section#runs table")).to_contain_text("2 / 2")
    assert errors == [], "\n".join(errors)
