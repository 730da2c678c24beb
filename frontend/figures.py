# frontend/figures.py — pure Plotly figure builders: API data in, go.Figure out, no I/O.
"""Figures of the stacklens UI."""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.colors import sequential

from frontend.api import Matrix, MatrixCell
from frontend.formatting import format_bytes, format_bytes_short

# Cell labels: full ("1.50 MiB") up to this many ranks, short ("1.5M") up to the next, none
# beyond (hover still shows exact values).
MAX_FULL_LABEL_RANKS = 6
MAX_LABELLED_RANKS = 16

_FONT = "Inter, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
_COLORBAR_TICKS = 5


def dense_matrix(
    world_size: int, cells: Iterable[MatrixCell]
) -> tuple[list[list[int]], list[list[int]]]:
    """(bytes, messages) as dense [src][dst] lists covering every rank, zeros where no traffic.

    The size is `world_size`, grown if a cell names a higher rank so that no traffic is hidden.
    """
    cells = list(cells)
    n = max([world_size] + [max(c.src, c.dst) + 1 for c in cells])
    nbytes = [[0] * n for _ in range(n)]
    messages = [[0] * n for _ in range(n)]
    for c in cells:
        nbytes[c.src][c.dst] += c.bytes
        messages[c.src][c.dst] += c.messages
    return nbytes, messages


def matrix_heatmap(matrix: Matrix) -> go.Figure:
    """Rank x rank heatmap of point-to-point bytes: x = destination, y = source (0 at top)."""
    nbytes, messages = dense_matrix(matrix.world_size, matrix.cells)
    n = len(nbytes)
    if n == 0:
        return _empty_figure("No ranks have reported yet.")
    ranks = list(range(n))
    zmax = max(max(row) for row in nbytes) or 1
    labelled = n <= MAX_LABELLED_RANKS
    label = format_bytes if n <= MAX_FULL_LABEL_RANKS else format_bytes_short
    tickvals = sorted({round(zmax * i / (_COLORBAR_TICKS - 1)) for i in range(_COLORBAR_TICKS)})
    heatmap = go.Heatmap(
        z=nbytes,
        x=ranks,
        y=ranks,
        customdata=messages,
        text=[[label(v) for v in row] for row in nbytes] if labelled else None,
        texttemplate="%{text}" if labelled else None,
        textfont={"size": 11 if n <= 10 else 9},
        hovertemplate=(
            "source rank %{y} → destination rank %{x}<br>"
            "%{z:,} bytes<br>%{customdata:,} messages<extra></extra>"
        ),
        colorscale=sequential.Blues,
        zmin=0,
        zmax=zmax,
        xgap=1 if n <= 64 else 0,
        ygap=1 if n <= 64 else 0,
        colorbar={
            "title": {"text": "bytes sent", "side": "right"},
            "tickvals": tickvals,
            "ticktext": [format_bytes(v) for v in tickvals],
            "thickness": 14,
            "outlinewidth": 0,
        },
    )
    axis = {
        "showgrid": False,
        "zeroline": False,
        "ticks": "",
        **({"tickmode": "linear", "tick0": 0, "dtick": 1} if labelled else {}),
    }
    fig = go.Figure(heatmap)
    fig.update_layout(
        xaxis={
            **axis,
            "title": {"text": "destination rank"},
            "range": [-0.5, n - 0.5],
            "constrain": "domain",
        },
        yaxis={
            **axis,
            "title": {"text": "source rank"},
            "range": [n - 0.5, -0.5],  # rank 0 at the top, like a printed matrix
            "scaleanchor": "x",
            "constrain": "domain",
        },
        **_base_layout(),
        uirevision=matrix.job,  # keep the user's zoom across live refreshes of the same job
    )
    return fig


def _empty_figure(message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[
            {
                "text": message,
                "showarrow": False,
                "font": {"size": 14, "color": "#5b6675"},
                "xref": "paper",
                "yref": "paper",
            }
        ],
        **_base_layout(),
    )
    return fig


def _base_layout() -> dict:
    return {
        "margin": {"l": 60, "r": 20, "t": 20, "b": 55},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",  # = the card: cell gaps and padding read as white
        "font": {"family": _FONT, "size": 12, "color": "#1f2a37"},
        "hoverlabel": {"font": {"family": _FONT}},
    }
