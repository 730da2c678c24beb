"""A report as a file: one Jinja2 template (autoescaping on: every job name, command, path
and host is text, never markup) renders both formats.

- HTML: self-contained, opens offline: plotly.js embedded once, each figure's JSON in a
  `<script type="application/json">` block (its `<`, `>`, `&` escaped, so no text in it
  can close the block) drawn interactively by a few lines of script.
- PDF: the same page with every figure as a static PNG drawn by plotly.js in one page of
  one headless Chromium kept for the process (`painter.PAINTER`: all of a report's
  figures in one call, plotly.js loaded once), laid out in pages by WeasyPrint, its
  tables in a fixed layout with column widths from their text's length
  (`column_widths`), a section's table cut to its first PDF_ROWS rows (`printed`).
  Why WeasyPrint: docs/reports.md.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import plotly.io as pio
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from presentation.report_model import Report, Table
from server.reports.painter import PAINTER

#: Width of the figures in the PDF (CSS px) and the pixel density of their images.
PDF_FIGURE_WIDTH = 1000
PDF_IMAGE_SCALE = 1.5
#: Rows of a section's table in the PDF at most (the HTML report lists up to
#: build.SECTION_ROWS): WeasyPrint's time goes mostly to laying out table rows (the
#: 1,024-rank hour's PDF: 4.1-4.6 s of its CPU with 50 rows a table, 2.6-2.8 s with 20).
PDF_ROWS = 20

Format = Literal["html", "pdf"]
MEDIA_TYPES = {"html": "text/html; charset=utf-8", "pdf": "application/pdf"}

_ENV = Environment(
    loader=PackageLoader("server.reports", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
#: A PDF table's column is as wide as its longest text, counted up to this many
#: characters (longer text wraps), and at least MIN_COLUMN.
WIDEST_CELL = 40
MIN_COLUMN = 4
#: Characters of a table's 9 pt text across the page (A4 less the margins), and the
#: characters' worth of a cell's padding.
PAGE_CHARS = 100
CELL_PADDING = 2


def column_widths(table: Table) -> list[float]:
    """The share (percent) of the page's width of each column of `table` in the PDF: in
    proportion to its longest cell or heading word, between MIN_COLUMN and WIDEST_CELL
    characters (a numeric column, never wrapped, its longest cell whole). When the columns
    do not fit the page side by side, each first gets its longest word (words are never
    broken; a word longer than WIDEST_CELL, a path, may be) and the rest of the page is
    shared in proportion to what each wants beyond it. With these the PDF's tables use a
    fixed layout: WeasyPrint's automatic one measures every cell's text first, seconds for
    a report's few thousand cells."""
    wants, words = [], []
    for i, heading in enumerate(table.headings):
        numeric = bool(table.numeric) and table.numeric[i]
        cells = [row[i] for row in table.rows if i < len(row)]
        longest = max((len(cell) for cell in cells), default=0)
        word = max((len(w) for text in [heading, *cells] for w in text.split()), default=0)
        word = max(max(longest, word) if numeric else min(word, WIDEST_CELL), MIN_COLUMN)
        wants.append(max(longest, word) if numeric else min(max(longest, word), WIDEST_CELL))
        words.append(word)
    padded: list[float] = [w + CELL_PADDING for w in wants]
    if sum(padded) <= PAGE_CHARS:
        chars = padded
    else:
        base = [w + CELL_PADDING for w in words]
        spare = max(PAGE_CHARS - sum(base), 0)
        extra = [want - word for want, word in zip(wants, words, strict=True)]
        chars = [b + spare * e / (sum(extra) or 1) for b, e in zip(base, extra, strict=True)]
    total = sum(chars) or 1
    return [100 * c / total for c in chars]


_ENV.globals["column_widths"] = column_widths


def figure_json(figure: Any) -> Markup:
    """A figure as JSON that is safe inside a <script> block: `<`, `>` and `&` as JSON
    escapes, so no string of it can end the block or open a comment."""
    text = pio.to_json(figure, validate=False, remove_uids=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)  # noqa: S704 — escaped above: no markup can remain


def printed(table: Table) -> Table:
    """A section's table as the PDF lists it: its first PDF_ROWS rows, and a note saying
    how many the HTML report lists."""
    if len(table.rows) <= PDF_ROWS:
        return table
    note = (f"The first {PDF_ROWS} of the {len(table.rows)} rows the HTML report lists."
            + (f" {table.note}" if table.note else ""))  # fmt: skip
    return replace(table, rows=table.rows[:PDF_ROWS], note=note)


def _views(report: Report, images: list[str] | None) -> list[dict[str, Any]]:
    """The sections as the template reads them: each figure with its index, height and
    either its JSON (HTML) or its image's URL (PDF); the tables (PDF: `printed`)."""
    views, index = [], 0
    for section in report.sections:
        figs = []
        for fig in section.figures:
            view: dict[str, Any] = {"index": index, "caption": fig.caption, "height": fig.height}
            if images is None:
                view["json"] = figure_json(fig.figure)
            else:
                view["png"] = images[index]
            figs.append(view)
            index += 1
        tables = section.tables if images is None else [printed(t) for t in section.tables]
        views.append({"section": section, "figures": figs, "tables": tables})
    return views


def html(report: Report) -> bytes:
    """The report as one self-contained, interactive HTML file."""
    page = _ENV.get_template("report.html.j2").render(
        report=report,
        mode="html",
        sections=_views(report, None),
        plotly_js=Markup(get_plotlyjs()),  # noqa: S704 — plotly's own bundle
    )
    return page.encode()


def prepare(fmt: Format) -> None:
    """Start in the background what rendering `fmt` needs that is not running yet (for a
    PDF, the painter's browser: seconds), so that it starts while the report is built."""
    if fmt == "pdf":
        PAINTER.start()


def static(figure: Any) -> dict[str, Any]:
    """A figure as a plain dict without what only a pointer can show (the traces'
    `customdata` and hover templates: a 1,024-rank heat map's hover texts are megabytes
    that a PNG never shows)."""
    plain: dict[str, Any] = figure.to_dict()
    for trace in plain.get("data", []):
        for key in ("customdata", "hovertemplate", "hovertext"):
            trace.pop(key, None)
    return plain


def images(report: Report) -> list[str]:
    """Every figure of the report as a PNG data URL, in order (the painter: one call)."""
    figs = [fig for section in report.sections for fig in section.figures]
    return PAINTER.paint(
        [
            {"figure": static(fig.figure), "format": "png", "width": PDF_FIGURE_WIDTH,
             "height": fig.height, "scale": PDF_IMAGE_SCALE}
            for fig in figs
        ]
    )  # fmt: skip


#: How the PDF's figures are drawn (a benchmark swaps in another way to compare).
Images = Callable[[Report], list[str]]


#: How the PDF's page names its i-th figure (`_figures` fetches it).
FIGURE_URL = "figure:"


def _figures(urls: list[str]) -> Any:
    """WeasyPrint's fetcher of a PDF's resources: `figure:<i>` is the i-th of `urls` (data
    URLs); nothing else is fetched (no file, no network). The page names its figures so
    rather than by their data URLs: its HTML parser reads every character of a megabyte
    of base64 text otherwise."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse  # type: ignore[import-untyped]

    class Figures(URLFetcher):  # type: ignore[misc]
        def fetch(self, url: str, headers: Any = None) -> Any:
            kind, _, data = urls[int(url.removeprefix(FIGURE_URL))].partition(";base64,")
            return URLFetcherResponse(url, base64.b64decode(data),
                                      {"Content-Type": kind.removeprefix("data:")})  # fmt: skip

    return Figures(allowed_protocols=[FIGURE_URL.rstrip(":")])


def pdf(report: Report, draw: Images | None = None) -> bytes:
    """The report as a PDF: static figures (`draw`, default `images`: data URLs), pages
    laid out by WeasyPrint."""
    from weasyprint import HTML  # type: ignore[import-untyped]

    urls = (draw or images)(report)
    page = _ENV.get_template("report.html.j2").render(
        report=report,
        mode="pdf",
        sections=_views(report, [f"{FIGURE_URL}{i}" for i in range(len(urls))]),
        plotly_js="",
    )
    body: bytes = HTML(string=page, url_fetcher=_figures(urls)).write_pdf()
    return body


def render(report: Report, fmt: Format) -> bytes:
    """The report in `fmt`."""
    return html(report) if fmt == "html" else pdf(report)


def disposition(report: Report, fmt: Format) -> str:
    """The Content-Disposition of the report's file (its name is plain ASCII)."""
    return f'attachment; filename="{report.filename}.{fmt}"'
