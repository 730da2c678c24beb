# presentation/cards.py — the job card registry: one declaration per card of a job.
"""Every card about one job, declared once: its key (the field of `JobDetails` in
GET /api/overview, and the job endpoint GET /api/jobs/{job}/{key} that answers it alone),
its title, its API model, its layout (the parts: graph, Markdown, grid, text), how the
model fills the parts (render), and what a report shows of it (tables and figures).

The Jobs page and the job page lay the cards out from `CARDS` and fill them with one
callback per card (frontend/cards.py); the job report makes a section of each
(server/reports/build.py). Adding a card: docs/architecture.md, "Adding a job card".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dash import html
from pydantic import BaseModel

from presentation import card_reports, components, figures
from presentation.report_model import Section
from stacklens.api_models import (
    JobCallsites,
    JobCollectives,
    JobFamilies,
    JobIo,
    JobOps,
    JobRanks,
    JobRma,
    JobRuns,
    JobSizes,
    Matrix,
)


@dataclass(frozen=True)
class Part:
    """One element of a card: its `name` (its DOM id is `part_id(card key, name)`), the
    component made for an id, and the property of it that the card's render sets."""

    name: str
    make: Callable[[str], Any]
    prop: str


def graph(name: str, height_px: int) -> Part:
    """A Plotly figure of `height_px` pixels."""
    return Part(name, lambda i: components.chart(i, height_px), "figure")


def markdown(name: str, extra_class: str = "") -> Part:
    """A Markdown table (components.markdown_table)."""
    return Part(name, lambda i: components.markdown_table(i, extra_class), "children")


def text(name: str, kind: str = "hint") -> Part:
    """A paragraph: a caption ("hint") or a summary line ("summary")."""
    return Part(name, lambda i: html.P(id=i, className=kind), "children")


def grid(name: str, columns: list[dict[str, Any]], height_px: int = 420) -> Part:
    """A grid of rows (components.grid) with these columns."""
    return Part(name, lambda i: components.grid(i, columns, height_px), "rowData")


@dataclass(frozen=True)
class Card:
    """A card about one job: see the module's doc."""

    key: str
    title: str
    model: type[BaseModel]
    parts: tuple[Part, ...]
    render: Callable[[Any], dict[str, Any]]
    report: Callable[[Any], card_reports.ReportPart]

    def report_section(self, answer: Any) -> Section:
        """The job report's section of this card over the API's `answer`."""
        intro, shown, tables = self.report(answer)
        return Section(self.title, self.key, intro, shown, tables)


def card_id(key: str) -> str:
    """The DOM id of a card's section (the same on every page)."""
    return f"card-{key}"


def part_id(key: str, part: str) -> str:
    """The DOM id of a part of a card (the same on every page)."""
    return f"card-{key}-{part}"


def error_id(key: str) -> str:
    """The DOM id of a card's error line (empty while its data came)."""
    return f"card-{key}-error"


def layout(card: Card) -> html.Section:
    """A card's section: its title, its error line and its parts, each with its id."""
    return html.Section(
        id=card_id(card.key),
        className="card",
        children=[
            html.H2(card.title),
            html.Div(id=error_id(card.key), className="card-error", role="alert"),
            *(part.make(part_id(card.key, part.name)) for part in card.parts),
        ],
    )


def _runs_table(runs: JobRuns) -> str:
    """The runs as a Markdown table, or a sentence when none was seen."""
    if not runs.runs:
        return "No run of this job in this window."
    n = len(runs.runs)
    rows = [[components.md_text(cell) for cell in row] for row in card_reports.run_rows(runs)]
    caption = f"{n} run{'s' * (n != 1)} (launches), by ordinal; ?run=<ordinal> shows one."
    table = components.table_markdown(caption, card_reports.RUN_HEADINGS, "llrllll", rows)
    outputs = [f"**Run {run}: the launcher's last lines**\n\n" + _code_block(lines)
               for run, lines in card_reports.launch_outputs(runs)]  # fmt: skip
    return "\n\n".join([table, *outputs])


def _code_block(lines: list[str]) -> str:
    """Lines as a Markdown code block whose fence no backtick run in them can close."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + "text", *lines, fence])


#: The cards of a job, in the order the pages and the report show them.
CARDS: tuple[Card, ...] = (
    Card("matrix", "Point-to-point traffic", Matrix,
         (graph("heatmap", 520), text("caption"), grid("pairs", components.PAIR_COLUMNS)),
         lambda m: {"heatmap": figures.matrix_heatmap(m), "caption": components.pair_caption(m),
                    "pairs": components.pair_rows(m)},
         card_reports.matrix_report),
    Card("ops", "MPI operations", JobOps,
         (text("summary", "summary"), markdown("table")),
         lambda o: {"summary": components.ops_summary(o),
                    "table": components.ops_table_markdown(o)},
         card_reports.ops_report),
    Card("collectives", "Collectives", JobCollectives,
         (markdown("communicators"), markdown("table")),
         lambda c: {"communicators": components.communicators_table_markdown(c),
                    "table": components.collectives_table_markdown(c)},
         card_reports.collectives_report),
    Card("sizes", "Message sizes", JobSizes,
         (graph("histogram", 360), markdown("table")),
         lambda s: {"histogram": figures.size_histogram(s),
                    "table": components.sizes_table_markdown(s)},
         card_reports.sizes_report),
    Card("rma", "One-sided (RMA)", JobRma,
         (text("caption"), grid("pairs", components.RMA_COLUMNS, 300)),
         lambda r: {"caption": components.rma_caption(r), "pairs": components.rma_rows(r)},
         card_reports.rma_report),
    Card("callsites", "Call sites", JobCallsites,
         (text("caption"), grid("sites", components.CALLSITE_COLUMNS)),
         lambda c: {"caption": components.callsite_caption(c),
                    "sites": components.callsite_rows(c)},
         card_reports.callsites_report),
    Card("families", "Communicator families", JobFamilies,
         (markdown("table"), graph("reach", 420)),
         lambda f: {"table": components.families_table_markdown(f),
                    "reach": figures.family_reach(f)},
         card_reports.families_report),
    Card("io", "File-system I/O", JobIo,
         (text("caption"), grid("files", components.FILE_COLUMNS)),
         lambda i: {"caption": components.file_caption(i), "files": components.file_rows(i)},
         card_reports.io_report),
    Card("ranks", "Ranks", JobRanks,
         (text("summary", "summary"), markdown("table", "ranks-table")),
         lambda r: {"summary": components.ranks_summary(r),
                    "table": components.ranks_table_markdown(r)},
         card_reports.ranks_report),
    Card("runs", "Runs", JobRuns,
         (markdown("table"),),
         lambda r: {"table": _runs_table(r)},
         card_reports.runs_report),
)  # fmt: skip

#: The cards by key.
BY_KEY = {card.key: card for card in CARDS}
