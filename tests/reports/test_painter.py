# tests/reports/test_painter.py — the PDF figures' painter: one Chromium page with
# plotly.js, every figure of a call drawn at its size, a dead browser replaced.
"""The painter (server/reports/painter.py) in the real Chromium: a call's figures come
back in order as PNG data URLs of exactly width x height x scale pixels, the page is
reloaded after RELOAD_EVERY calls and still draws, and a browser that was closed under
it is started again by the next call."""

from __future__ import annotations

import base64
import io

import plotly.graph_objects as go
from PIL import Image

from server.reports import painter


def _size(url: str) -> tuple[int, int]:
    head, data = url.split(",", 1)
    assert head == "data:image/png;base64"
    return Image.open(io.BytesIO(base64.b64decode(data))).size


def _spec(fig: go.Figure, width: int, height: int) -> dict:
    return {"figure": fig.to_dict(), "format": "png", "width": width, "height": height,
            "scale": 1.5}  # fmt: skip


def test_the_painter_draws_each_figure_at_its_size_and_survives_reload_and_a_dead_browser(
    monkeypatch,
):
    monkeypatch.setattr(painter, "RELOAD_EVERY", 2)
    own = painter.Painter()  # not the process's: this test closes its browser
    try:
        bars = go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name="bars"))
        lines = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], name="line"))
        for _ in range(3):  # the third call is after the page's reload
            urls = own.paint([_spec(bars, 400, 300), _spec(lines, 600, 200)])
            assert [_size(u) for u in urls] == [(600, 450), (900, 300)]
        assert own.paint([]) == []
        own.stop()  # the browser gone: the next call starts another
        assert [_size(u) for u in own.paint([_spec(bars, 200, 100)])] == [(300, 150)]
    finally:
        own.stop()
