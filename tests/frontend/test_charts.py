# tests/frontend/test_charts.py — a chart before its first answer.
"""Every chart of the pages shows "Loading…" until its first figure comes, never an empty
pair of axes from -1 to 6 (Plotly's default for a dcc.Graph without a figure, which read as
a chart of nothing while the job page loaded under load)."""

from __future__ import annotations

import re
from pathlib import Path

from presentation import cards
from presentation.components import chart

PAGES = Path(__file__).resolve().parents[2] / "frontend" / "pages"


def test_a_chart_says_loading_and_draws_no_axes():
    figure = chart("some-chart", 420).figure
    assert [a.text for a in figure.layout.annotations] == ["Loading…"]
    assert (figure.layout.xaxis.visible, figure.layout.yaxis.visible) == (False, False)
    assert figure.data == ()


def test_every_card_chart_and_page_chart_starts_loading():
    graphs = [p for card in cards.CARDS for p in card.parts if p.prop == "figure"]
    assert graphs, "the cards have charts"
    for part in graphs:
        shown = part.make(f"x-{part.name}").figure
        assert [a.text for a in shown.layout.annotations] == ["Loading…"], part.name
    # the pages make their charts with chart(); a dcc.Graph of their own has its figure
    for page in PAGES.glob("*.py"):
        for made in re.finditer(r"dcc\.Graph\((.*?)\n\s*\)", page.read_text(), re.S):
            assert "figure=" in made.group(1), f"{page.name}: a chart without a figure"
