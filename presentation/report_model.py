"""What a report holds, as plain data (no database, no rendering): the first page (facts,
time over ranks, bytes by category, links, findings), then sections of figures and tables, and
the evidence table. server.reports.build fills it; server.reports.render turns it into HTML
or PDF with one template."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import plotly.graph_objects as go

#: How a figure's values were obtained (the project's provenance words).
Basis = Literal["measured", "routed", "modelled", "topological", "derived"]

#: A progress callback: (steps done, steps in all, what is being done).
Progress = Callable[[int, int, str], None]


def no_progress(_done: int, _total: int, _what: str) -> None:
    """A progress callback that says nothing."""


@dataclass
class Table:
    """A table: `headings`, then `rows` of cells already formatted as text; `numeric[i]`
    right-aligns column i; `note` is said under it (e.g. what was left out)."""

    headings: list[str]
    rows: list[list[str]]
    numeric: list[bool] = field(default_factory=list)
    note: str = ""


@dataclass
class Figure:
    """A figure (a pure Plotly figure), its height in pixels, and what it shows."""

    figure: go.Figure
    caption: str
    height: int = 420


@dataclass
class Section:
    """One titled part after the first page."""

    title: str
    anchor: str
    intro: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass
class Report:
    """A whole report: `kind` (job, window or incident), the title, the first page's parts,
    the sections, the evidence table, and the file name it is offered under (without
    extension)."""

    kind: Literal["job", "window", "incident", "comparison"]
    title: str
    facts: list[tuple[str, str]]
    findings: list[str]
    summary: list[tuple[str, Table]]
    sections: list[Section]
    evidence: Table
    filename: str
    generated: str
