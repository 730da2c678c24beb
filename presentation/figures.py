# presentation/figures.py — pure Plotly figure builders: API data in, go.Figure out, no I/O.
"""Figures of the stacklens UI."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
from plotly.colors import sequential
from plotly.subplots import make_subplots

from presentation.formatting import (
    format_bytes,
    format_bytes_short,
    format_bytes_tick,
    format_duration_ns,
    format_size_bucket,
    format_utc_ns,
    format_utc_window_ns,
)
from stacklens.api_models import (
    ComparedRun,
    Comparison,
    FabricEvent,
    FabricSeries,
    HistoryRun,
    IncidentDetails,
    JobFamilies,
    JobSizes,
    Matrix,
    MatrixCell,
    Outlier,
    RunHistory,
    Series,
    SlowRanks,
)
from stacklens.constants import CATEGORY_LABELS, ERROR_COUNTERS, bucket_bounds

# Cell labels: full ("1.50 MiB") up to this many rows of cells, short ("1.5M") up to the
# next, none beyond (hover still shows exact values).
MAX_FULL_LABEL_RANKS = 6
MAX_LABELLED_RANKS = 16

# The heat map's cells per side at most, whatever the data says: blocks beyond it are summed
# into coarser ones (the server already sends at most 128 per side).
MAX_HEATMAP_SIDE = 128

# Message-size histogram: one bar trace per op, for the ops with the most messages.
MAX_SIZE_TRACES = 6

_FONT = "Inter, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
_COLORBAR_TICKS = 5


def dense_blocks(
    cells: Iterable[MatrixCell], max_side: int = MAX_HEATMAP_SIDE
) -> tuple[int, list[list[int]], list[list[int]]]:
    """(cells merged per side, bytes, messages): the sparse `cells` ([src][dst] indexes) as
    dense lists just large enough for the highest index present, zeros where no traffic,
    merging `k` x `k` neighbours when that side would exceed `max_side` (k = 1 otherwise).
    The size follows the data, never a claimed world size."""
    cells = list(cells)
    n = max((max(c.src, c.dst) + 1 for c in cells), default=0)
    merge = max(1, -(-n // max_side))
    side = -(-n // merge)
    nbytes = [[0] * side for _ in range(side)]
    messages = [[0] * side for _ in range(side)]
    for c in cells:
        nbytes[c.src // merge][c.dst // merge] += c.bytes
        messages[c.src // merge][c.dst // merge] += c.messages
    return merge, nbytes, messages


def matrix_heatmap(matrix: Matrix) -> go.Figure:
    """Rank x rank heatmap of point-to-point bytes: x = destination, y = source (0 at top),
    drawn from the matrix's blocks (one cell per pair up to 128 ranks, else per block of
    ranks), as far as the highest rank that sent or received."""
    merge, nbytes, messages = dense_blocks(matrix.blocks)
    n = len(nbytes)
    if n == 0:
        return message_figure("No point-to-point traffic recorded yet.")
    side = matrix.block_ranks * merge  # ranks per cell side
    if side == 1:
        names = [str(i) for i in range(n)]
        what = "rank"
    else:
        names = [f"{i * side}–{(i + 1) * side - 1}" for i in range(n)]
        what = "ranks"
    ranks = list(range(n))
    zmax = max(max(row) for row in nbytes) or 1
    labelled = n <= MAX_LABELLED_RANKS
    label = format_bytes if n <= MAX_FULL_LABEL_RANKS else format_bytes_short
    tickvals = sorted({round(zmax * i / (_COLORBAR_TICKS - 1)) for i in range(_COLORBAR_TICKS)})
    heatmap = go.Heatmap(
        z=nbytes,
        x=ranks,
        y=ranks,
        customdata=[[[messages[i][j], names[i], names[j]] for j in ranks] for i in ranks],
        text=[[label(v) for v in row] for row in nbytes] if labelled else None,
        texttemplate="%{text}" if labelled else None,
        textfont={"size": 11 if n <= 10 else 9},
        hovertemplate=(
            f"source {what} %{{customdata[1]}} → destination {what} %{{customdata[2]}}<br>"
            "%{z:,} bytes<br>%{customdata[0]:,} messages<extra></extra>"
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
    ticks = {"tickmode": "array", "tickvals": ranks, "ticktext": names} if labelled else {}
    axis = {"showgrid": False, "zeroline": False, "ticks": "", **ticks}
    fig = go.Figure(heatmap)
    fig.update_layout(
        xaxis={
            **axis,
            "title": {"text": f"destination {what}"},
            "range": [-0.5, n - 0.5],
            "constrain": "domain",
        },
        yaxis={
            **axis,
            "title": {"text": f"source {what}"},
            "range": [n - 0.5, -0.5],  # rank 0 at the top, like a printed matrix
            "scaleanchor": "x",
            "constrain": "domain",
        },
        **_base_layout(),
        uirevision=matrix.job,  # keep the user's zoom across live refreshes of the same job
    )
    return _titled(fig, "Point-to-point bytes, source → destination", legend=False)


def size_histogram(sizes: JobSizes) -> go.Figure:
    """Messages per log2 size bucket, one bar trace per op for the `MAX_SIZE_TRACES` ops with
    the most messages (the API sends them in that order). The x axis lists every bucket from
    the smallest to the largest one used, so gaps read as gaps; hover shows exact counts."""
    ops = [o for o in sizes.ops if o.buckets][:MAX_SIZE_TRACES]
    if not ops:
        return message_figure("No message sizes recorded.")
    used = [b for o in ops for b in o.buckets]
    first, last = min(b.bucket for b in used), max(b.bucket for b in used)
    labels = {b: format_size_bucket(*bucket_bounds(b)) for b in range(first, last + 1)}
    fig = go.Figure(
        [
            go.Bar(
                name=o.op,
                x=[labels[b.bucket] for b in o.buckets],
                y=[b.count for b in o.buckets],
                hovertemplate=f"{o.op}<br>%{{x}}<br>%{{y:,}} messages<extra></extra>",
            )
            for o in ops
        ]
    )
    fig.update_layout(
        barmode="group",
        xaxis={
            "title": {"text": "message size"},
            "type": "category",
            "categoryorder": "array",
            "categoryarray": list(labels.values()),
        },
        yaxis={"title": {"text": "messages"}, "rangemode": "tozero", "gridcolor": "#e5e9f0"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        **{**_base_layout(), "margin": {"l": 60, "r": 20, "t": 40, "b": 80}},
        uirevision=sizes.job,
    )
    _titled(fig, "Messages by size, per operation")
    fig.update_layout(margin={"t": 76})  # the title above the legend
    return fig


#: Where a family's bytes go, in the figure's stacking order: (API reach, legend name, colour).
REACHES = (
    ("host", "inside a host", "#12b76a"),
    ("leaf", "crossing a leaf switch", "#2e90fa"),
    ("spine", "crossing the spine", "#f79009"),
    ("unplaced", "between hosts not placed on the fabric", "#98a2b3"),
)
#: Families the reach figure shows at most (the API's first: heaviest time).
MAX_REACH_FAMILIES = 24


def family_reach(families: JobFamilies) -> go.Figure:
    """ "Where does each dimension's traffic go": per family with bytes placed (at most
    `MAX_REACH_FAMILIES`, heaviest time first, as the API lists them), a stacked bar of its
    bytes inside a host, crossing one leaf switch, crossing the spine and between hosts the
    fabric does not place; hover splits each into routed (point-to-point) and modelled
    (collectives) bytes. A reach no family has is left out of the legend."""
    shown = [f for f in families.families if f.reach][:MAX_REACH_FAMILIES]
    if not shown:
        return message_figure("No family traffic placed in this window.")
    labels = [f.label for f in shown]
    traces = []
    for reach, name, colour in REACHES:
        parts = [{r.provenance: r.bytes for r in f.reach if r.reach == reach} for f in shown]
        if not any(parts):
            continue
        hover = [", ".join(f"{p} {format_bytes(n)}" for p, n in sorted(part.items())) or "none"
                 for part in parts]  # fmt: skip
        traces.append(go.Bar(
            name=name, x=labels, y=[sum(part.values()) for part in parts], marker_color=colour,
            customdata=hover,
            hovertemplate=f"%{{x}}<br>{name}: %{{y:,}} bytes (%{{customdata}})<extra></extra>",
        ))  # fmt: skip
    fig = go.Figure(traces)
    fig.update_layout(
        barmode="stack",
        xaxis={"title": {"text": "communicator family"}, "type": "category", "automargin": True},
        yaxis={
            "title": {"text": "bytes"},
            "rangemode": "tozero",
            "gridcolor": "#e5e9f0",
            **bytes_axis(max(map(sum, zip(*(t.y for t in traces), strict=True)), default=0)),
        },
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        **_base_layout(),
        uirevision=families.job,
    )
    _titled(fig, "Where does each dimension's traffic go: bytes per family by reach")
    fig.update_layout(margin={"t": 76})  # the title above the legend
    return fig


def loading_figure() -> go.Figure:
    """What a chart shows until its first answer comes: "Loading…", no axes (an empty
    Plotly figure would draw axes from -1 to 6)."""
    return message_figure("Loading…")


def message_figure(message: str) -> go.Figure:
    """A chart area that says `message` and draws no axes."""
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


def _titled(fig: go.Figure, title: str, legend: bool = True) -> go.Figure:
    """`fig` with its title above the plot (left) and, for trace figures, its legend always
    shown (Plotly hides it for a single trace); a heat map's legend is its colour bar."""
    margin = {**_base_layout()["margin"], **(fig.layout.margin.to_plotly_json() or {}), "t": 48}
    fig.update_layout(title={"text": title, "x": 0, "xanchor": "left", "y": 0.98,
                             "yanchor": "top", "font": {"size": 13}}, margin=margin)  # fmt: skip
    if legend:
        fig.update_layout(showlegend=True)
    return fig


def _base_layout() -> dict:
    return {
        "margin": {"l": 60, "r": 20, "t": 20, "b": 55},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#ffffff",  # = the card: cell gaps and padding read as white
        "font": {"family": _FONT, "size": 12, "color": "#1f2a37"},
        "hoverlabel": {"font": {"family": _FONT}},
    }


def timeline(series: Series) -> go.Figure:
    """Time (top) and bytes (bottom) per step, a stacked bar trace per MPI traffic category
    (named by its label) and file-system layer (`by=category` series); x = the step's start
    (UTC)."""
    if not series.points:
        return message_figure("Nothing in this window.")
    metric = {name: i for i, name in enumerate(series.metrics)}
    keys = sorted({p.key for p in series.points}, key=lambda k: (k.startswith("fs:"), k))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for key in keys:
        points = [p for p in series.points if p.key == key]
        x = [_utc(p.t_ns) for p in points]
        for row, name, scale in ((1, "time_ns", 1e-9), (2, "bytes", 1)):
            fig.add_trace(
                go.Bar(x=x, y=[p.values[metric[name]] * scale for p in points],
                       name=CATEGORY_LABELS.get(key, key), legendgroup=key,
                       showlegend=row == 1, offsetgroup=0),
                row=row, col=1,
            )  # fmt: skip
    fig.update_layout(barmode="stack", bargap=0, **_base_layout())
    fig.update_yaxes(title_text="time inside (s)", row=1, col=1)
    per_step: dict[int, int] = {}
    for p in series.points:
        per_step[p.t_ns] = per_step.get(p.t_ns, 0) + p.values[metric["bytes"]]
    fig.update_yaxes(title_text="bytes", row=2, col=1, **bytes_axis(max(per_step.values())))
    fig.update_xaxes(title_text="step start (UTC)", row=2, col=1)
    return _titled(fig, "Time inside and bytes per step, by traffic category and I/O layer")


#: Named ranks the heat map marks at most (late ones first, as the profile lists them).
MAX_MARKED_RANKS = 16


def rank_heatmap(profile: SlowRanks) -> go.Figure:
    """Rank x time heat map of the share of each step a rank spent inside MPI (start-up and
    shutdown apart); the hover says where the rest went (computation, file I/O). The
    profile's late and waiting ranks are marked at the end of their row ("late", "waits")
    and their hover starts with the profile's sentence, so the map names the culprit as the
    outlier lines do (a late rank's row is the pale one: it spends the least time inside)."""
    if not profile.shares:
        return message_figure("Nothing in this window.")
    steps = sorted({s.t_ns for s in profile.shares})
    ranks = sorted({s.rank for s in profile.shares})
    column = {t: i for i, t in enumerate(steps)}
    row = {r: i for i, r in enumerate(ranks)}
    z: list[list[float | None]] = [[None] * len(steps) for _ in ranks]
    hover = [[""] * len(steps) for _ in ranks]
    named: dict[int, Outlier] = {}
    for o in profile.outliers:
        if o.rank in row and len(named) < MAX_MARKED_RANKS:
            named.setdefault(o.rank, o)
    for s in profile.shares:
        mpi = sum(s.mpi_ns.values())
        z[row[s.rank]][column[s.t_ns]] = mpi / s.elapsed_ns if s.elapsed_ns else None
        why = f"{named[s.rank].text}<br>" if s.rank in named else ""
        hover[row[s.rank]][column[s.t_ns]] = why + (
            f"MPI {mpi / 1e9:.3f} s, computation {s.compute_ns / 1e9:.3f} s, "
            f"file I/O {s.io_ns / 1e9:.3f} s, start-up {s.startup_ns / 1e9:.3f} s, "
            f"shutdown {s.shutdown_ns / 1e9:.3f} s of {s.elapsed_ns / 1e9:.3f} s"
        )
    heatmap = go.Heatmap(
        z=z, x=[_utc(t) for t in steps], y=ranks, zmin=0, zmax=1, colorscale="YlOrRd",
        customdata=hover, hovertemplate="rank %{y} at %{x}<br>%{customdata}<extra></extra>",
        colorbar={"title": {"text": "share in MPI"}, "tickformat": ".0%", "x": 1.08},
    )  # fmt: skip
    fig = go.Figure(heatmap)
    fig.update_layout(**{**_base_layout(), "margin": {"l": 60, "r": 70, "t": 20, "b": 55}})
    for rank, o in named.items():
        late = o.role == "late"
        fig.add_annotation(x=1.0, xref="paper", xanchor="left", y=rank, yref="y",
                           text="◀ late" if late else "◀ waits", showarrow=False,
                           font={"color": "#9b1c1c" if late else "#7c2d12", "size": 11},
                           name=f"rank {rank} {o.role}")  # fmt: skip
    fig.update_yaxes(title_text="rank", autorange="reversed", dtick=1 if len(ranks) <= 32 else None)
    fig.update_xaxes(title_text="step start (UTC)")
    return _titled(fig, "Share of each step a rank spent inside MPI", legend=False)


def _utc(t_ns: int) -> datetime:
    """A ns timestamp as a UTC datetime (Plotly draws it as a date axis)."""
    return datetime.fromtimestamp(t_ns / 1e9, UTC)


#: Ticks a bytes axis aims at (between 3 and 6 of them, 0 included).
_BYTE_TICKS = 5


def bytes_axis(top: float, per_s: bool = False) -> dict[str, Any]:
    """Ticks of an axis of bytes (or bytes per second) from 0 to `top`, in binary units
    ("512 MiB", "1.5 GiB/s"): Plotly's own would write 2e9 bytes "2B" (B for billion) and
    1e7 "10M" (decimal). Steps of 1, 2 or 5 times a power of ten of the largest binary unit
    below `top`; an axis without data (top 0) keeps Plotly's ticks."""
    if top <= 0:
        return {}
    unit = 1024 ** min(int(math.log(top, 1024)), 6) if top >= 1024 else 1
    raw = top / unit / _BYTE_TICKS
    step = min(m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 5, 10)
               if m * 10 ** math.floor(math.log10(raw)) >= raw)  # fmt: skip
    values = [i * step * unit for i in range(int(top / unit / step + 1e-9) + 2)]
    suffix = "/s" if per_s else ""
    return {"tickmode": "array", "tickvals": values,
            "ticktext": [format_bytes_tick(v) + suffix for v in values]}  # fmt: skip


#: Steps a right axis beside a left one of 0-100 % may have: each a round share of the left
#: one (50, 25 or 20 %), so that both tick at the same grid lines.
_SHARED_STEPS = (2, 4, 5)


def aligned_ticks(top: float) -> list[float]:
    """Ticks of a right axis from 0 to `top` or just above, on the grid lines of a left axis
    of 0-100 % (Plotly's own ticks of such an axis sit at the left one's heights, with
    uneven values: 0.62M, 3.03M, 5.43M): 2, 4 or 5 steps (_SHARED_STEPS) of 1, 2 or 5 times
    a power of ten, the lowest last tick that reaches `top` (of two, the more steps). An
    axis without data (top 0) goes from 0 to 1."""
    top = top if top > 0 else 1.0
    power = 10.0 ** math.floor(math.log10(top / max(_SHARED_STEPS)))
    steps = [m * power * f for f in (1, 10) for m in (1, 2, 5)]
    n, step = min(((n, step) for step in steps for n in _SHARED_STEPS
                   if n * step >= top * (1 - 1e-9)),
                  key=lambda c: (c[0] * c[1], -c[0]))  # fmt: skip
    return [float(f"{i * step:.12g}") for i in range(n + 1)]


def incident_evidence(incident: IncidentDetails) -> go.Figure:
    """An incident's evidence over time: per link its utilisation (0-100 %, left axis) and
    PortXmitWait rate (ticks/s, right axis, its ticks on the left one's grid lines:
    aligned_ticks); per visible job its time per byte over its baseline (factor). Both
    panels share the time axis over the series' span: the incident's window, as the API
    sends it (the job's steps during the incident, like the links' sweeps). A panel with
    nothing to draw is left out (an MPI slowdown with no link: the jobs' alone)."""

    def when(ns: int) -> datetime:
        return datetime.fromtimestamp(ns / 1e9, UTC)

    links = []
    for link in incident.links:
        name = f"{link.a.label() if link.a else '?'} – {link.b.label() if link.b else '?'}"
        points = [p for p in link.evidence if "utilisation" in p]
        if points:
            links.append((name, points))
    jobs = []
    for member in incident.members:
        for kind, evidence in member.evidence.items():
            points = [p for p in evidence.get("series", []) if p.get("per_byte_ns") is not None]
            base = evidence.get("baseline_per_byte_ns") or None
            if points and base is not None:
                jobs.append((f"{member.label} {kind}", points, base))
    if not links and not jobs:
        return message_figure("No evidence series stored for this incident.")
    job_row = 2 if links else 1
    specs = ([[{"secondary_y": True}]] if links else []) + ([[{}]] if jobs else [])
    fig = make_subplots(rows=len(specs), cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        specs=specs)  # fmt: skip
    for name, points in links:
        xs = [when(p["t_ns"]) for p in points]
        fig.add_trace(go.Scatter(x=xs, y=[p["utilisation"] for p in points], mode="lines+markers",
                                 name=f"{name} utilisation"), row=1, col=1)  # fmt: skip
        fig.add_trace(go.Scatter(x=xs, y=[p["xmit_wait_per_s"] for p in points],
                                 mode="lines+markers", line={"dash": "dot"},
                                 name=f"{name} xmit-wait/s"),
                      row=1, col=1, secondary_y=True)  # fmt: skip
    for name, points, base in jobs:
        fig.add_trace(go.Scatter(x=[when(p["t_ns"]) for p in points],
                                 y=[p["per_byte_ns"] / base for p in points],
                                 mode="lines+markers", name=name),
                      row=job_row, col=1)  # fmt: skip
    # the legend above the plots, as the other figures' (below, it covered the time axis'
    # title)
    fig.update_layout(height=490 if links and jobs else 320,
                      margin={"l": 60, "r": 60, "t": 48, "b": 55}, font={"family": _FONT},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
                      plot_bgcolor="white")  # fmt: skip
    if links:
        # both axes over the same share of their ticks (beyond 100 % if a utilisation is)
        points = [p for _, link_points in links for p in link_points]
        over = max([1.0, *(p["utilisation"] for p in points if p.get("utilisation") is not None)])
        waits = aligned_ticks(max((p["xmit_wait_per_s"] for p in points
                                   if p.get("xmit_wait_per_s") is not None),
                                  default=0.0))  # fmt: skip
        steps = len(waits) - 1
        fig.update_yaxes(title_text="link utilisation", tickformat=".0%", range=[0, over],
                         tickmode="array", tickvals=[i / steps for i in range(steps + 1)],
                         row=1, col=1, secondary_y=False)  # fmt: skip
        fig.update_yaxes(title_text="PortXmitWait (ticks/s)", range=[0, waits[-1] * over],
                         tickmode="array", tickvals=waits, row=1, col=1,
                         secondary_y=True)  # fmt: skip
    if jobs:
        fig.update_yaxes(title_text="time per byte / baseline", row=job_row, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=len(specs), col=1)
    title = ("the links (top) and the jobs' time per byte (bottom)" if links and jobs
             else "the links" if links else "the jobs' time per byte")  # fmt: skip
    _titled(fig, f"Evidence: {title}")
    fig.update_layout(margin={"t": 76})  # the title above the legend
    return fig


#: Colour of each kind of fabric event marked on a series (others: violet).
_EVENT_COLOURS = {"link_down": "#98a2b3", "node_gone": "#98a2b3", "error_burst": "#d92d20"}


def fabric_series(series: FabricSeries, events: Sequence[FabricEvent]) -> go.Figure:
    """A link's (or port's, node's) counters per step (`series`): bytes/s each way on top,
    error deltas (every error counter summed) and PortXmitWait ticks/s below; each event of
    `events` marked over both as a band from its start to its end (to the window's end
    while open; a point event as a line), labelled with its kind. Unknown steps are gaps."""
    if not series.t_ns:
        return message_figure("No sample in this window.")
    c = series.columns
    x = [_utc(t) for t in series.t_ns]
    ways = (("a_to_b_bytes_per_s", "a → b"), ("b_to_a_bytes_per_s", "b → a"))
    if series.subject != "link":
        ways = (("xmit_bytes_per_s", "sent"), ("rcv_bytes_per_s", "received"))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    for column, name in ways:
        fig.add_trace(go.Scatter(x=x, y=c.get(column, []), name=name, mode="lines+markers",
                                 marker={"size": 4}, connectgaps=False), row=1, col=1)  # fmt: skip
    errors: list[float | None] = []
    for i in range(len(series.t_ns)):
        known = [float(v) for e in ERROR_COUNTERS if e in c and (v := c[e][i]) is not None]
        errors.append(sum(known) if known else None)
    fig.add_trace(go.Bar(x=x, y=errors, name="errors", marker_color="#d92d20"), row=2, col=1)
    fig.add_trace(go.Scatter(x=x, y=c.get("xmit_wait_per_s", []), name="xmit wait/s",
                             mode="lines", line={"color": "#f79009"}), row=2, col=1)  # fmt: skip
    for event in events:
        start = max(event.start_ns, series.from_ns)
        end = min(event.end_ns if event.end_ns is not None else series.to_ns, series.to_ns)
        colour = _EVENT_COLOURS.get(event.kind, "#7a5af8")
        for row in (1, 2):  # over both panels, labelled on the top one
            label = {"annotation_text": event.kind} if row == 1 else {}
            if end > start:
                fig.add_vrect(x0=_utc(start), x1=_utc(end), fillcolor=colour, opacity=0.15,
                              line_width=0, annotation_position="top left", row=row, col=1,
                              **label)  # fmt: skip
            else:
                fig.add_vline(x=_utc(start).timestamp() * 1000, line_color=colour,
                              line_dash="dot", row=row, col=1, **label)  # fmt: skip
    fig.update_layout(legend={"orientation": "h", "y": -0.25}, **_base_layout())
    fig.update_xaxes(range=[_utc(series.from_ns), _utc(series.to_ns)])
    rates = [v for column, _ in ways for v in c.get(column, []) if v is not None]
    fig.update_yaxes(title_text="bytes/s", row=1, col=1, **bytes_axis(max(rates, default=0), True))
    fig.update_yaxes(title_text="errors · ticks/s", row=2, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=2, col=1)
    return _titled(fig, f"{series.subject.capitalize()} counters over the window")


# ---- run comparison (GET /api/compare): the Compare page and the comparison report ----

#: Bars of a comparison figure at most (the largest in either side).
MAX_COMPARED_BARS = 12
#: The two sides' colours: a (the reference) grey-blue, b (the run examined) orange.
SIDE_COLOURS = {"a": "#5b7aa8", "b": "#e8833a"}


def compared_side(side: ComparedRun, letter: str) -> str:
    """A side as a legend names it: "b: job run 2", with the window compared when there is
    one ("b: job run 2, 2023-11-14 22:16:40–22:16:45 UTC"), or "a: median of 5 earlier
    runs"."""
    if side.job is None:
        return f"{letter}: median of {side.runs} earlier run{'s' * (side.runs != 1)}"
    window = format_utc_window_ns(side.from_ns, side.to_ns)
    return f"{letter}: {side.job} run {side.run}" + (f", {window}" if window else "")


def _side_bars(comparison: Comparison, names: list[str], a: list[float], b: list[float],
               title: str, x_title: str, y_title: str) -> go.Figure:  # fmt: skip
    fig = go.Figure([
        go.Bar(name=compared_side(side, letter), x=names, y=values,
               marker_color=SIDE_COLOURS[letter])
        for side, letter, values in ((comparison.a, "a", a), (comparison.b, "b", b))
    ])  # fmt: skip
    fig.update_layout(
        barmode="group",
        xaxis={"title": {"text": x_title}, "type": "category", "automargin": True},
        yaxis={"title": {"text": y_title}, "rangemode": "tozero", "gridcolor": "#e5e9f0"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        **_base_layout(),
    )
    _titled(fig, title)
    fig.update_layout(margin={"t": 76})
    return fig


def compared_parts(comparison: Comparison) -> go.Figure:
    """Where each side's elapsed time went, per rank on average: a bar per part (at most
    MAX_COMPARED_BARS, the largest in either side first), a beside b."""
    a, b = comparison.a.parts, comparison.b.parts
    names = sorted(set(a) | set(b), key=lambda n: (-max(a.get(n, 0), b.get(n, 0)), n))
    names = names[:MAX_COMPARED_BARS]
    return _side_bars(comparison, names, [a.get(n, 0) / 1e9 for n in names],
                      [b.get(n, 0) / 1e9 for n in names],
                      "Where the elapsed time went (per rank)", "part of the run",
                      "seconds per rank")  # fmt: skip


def compared_families(comparison: Comparison) -> go.Figure:
    """Time in each communicator family's calls, summed over the ranks, a beside b (at most
    MAX_COMPARED_BARS families, the largest change first, as the API lists them)."""
    shown = comparison.families[:MAX_COMPARED_BARS]
    if not shown:
        return message_figure("Neither run describes a communicator family.")
    return _side_bars(comparison, [f.label for f in shown], [f.a_ns / 1e9 for f in shown],
                      [f.b_ns / 1e9 for f in shown],
                      "Time per communicator family (summed over the ranks)",
                      "communicator family", "seconds (all ranks)")  # fmt: skip


def compared_sizes(comparison: Comparison) -> go.Figure:
    """Messages per operation and size bucket, summed over the ranks, a beside b (at most
    2 x MAX_COMPARED_BARS bars, the op with the most messages first, its buckets
    upwards): "op size-range"."""
    shown = comparison.sizes[: 2 * MAX_COMPARED_BARS]
    if not shown:
        return message_figure("Neither run sent a message.")
    return _side_bars(comparison,
                      [f"{r.op} {format_size_bucket(r.lower_bytes, r.upper_bytes)}"
                       for r in shown],
                      [r.a_messages for r in shown], [r.b_messages for r in shown],
                      "Messages per size (summed over the ranks)",
                      "operation and message size", "messages")  # fmt: skip


def compared_sites(comparison: Comparison) -> go.Figure:
    """Time at each call site, summed over the ranks, a beside b (at most
    MAX_COMPARED_BARS sites, the largest change first): "op at file:line"."""
    shown = comparison.sites[:MAX_COMPARED_BARS]
    if not shown:
        return message_figure("Neither run has call sites.")
    return _side_bars(comparison, [f"{s.op} at {s.label}" for s in shown],
                      [s.a_ns / 1e9 for s in shown], [s.b_ns / 1e9 for s in shown],
                      "Time per call site (summed over the ranks), largest change first",
                      "call site", "seconds (all ranks)")  # fmt: skip


#: Colours of a program's build segments in the history trend, in turn.
BUILD_COLOURS = ("#5b7aa8", "#7a9a4a", "#9a5ba8", "#a8915b", "#5ba89a")


def build_name(build_id: str | None) -> str:
    """A build of a program's executable as a legend names it: "build 1a2b3c4d5e6f" (its
    first 12 hex digits) or "build unknown"."""
    return "build unknown" if build_id is None else f"build {build_id[:12]}"


#: The least time a history's trend spans: runs started within it are drawn over an hour
#: around them, not over an axis of milliseconds.
TREND_MIN_NS = 3600 * 10**9


def history_trend(history: RunHistory | None,
                  title: str = "Elapsed time of the program's runs") -> go.Figure:  # fmt: skip
    """Elapsed time of a program's runs over their start (UTC), oldest first: one line per
    segment of runs of one build of its executable (a rebuild starts a new line, named by
    its build-id; a build seen again later is named with the start of its new segment),
    and the run the history is of marked as "this run" (None: no history to show). The time
    axis spans the runs and a tenth more on each side, and at least `TREND_MIN_NS`."""
    runs = (
        [] if history is None else sorted(history.runs, key=lambda r: (r.started_ns, r.job, r.run))
    )
    if history is None or not runs:
        return message_figure("No run of this program to show.")
    segments: list[list[HistoryRun]] = []
    for r in runs:
        if not segments or r.rebuilt:
            segments.append([])
        segments[-1].append(r)
    fig = go.Figure()
    named: set[str] = set()
    for i, segment in enumerate(segments):
        name = build_name(segment[0].build_id)
        if name in named:
            name += f" (again from {format_utc_ns(segment[0].started_ns)})"
        named.add(name)
        fig.add_trace(go.Scatter(
            name=name, mode="lines+markers", x=[_utc(r.started_ns) for r in segment],
            y=[r.elapsed_ns / 1e9 for r in segment],
            line={"color": BUILD_COLOURS[i % len(BUILD_COLOURS)]},
            text=[f"{r.job} run {r.run} ({r.owner}): {format_duration_ns(r.elapsed_ns)}"
                  for r in segment], hoverinfo="text",
        ))  # fmt: skip
    this = history.runs[0]
    fig.add_trace(go.Scatter(
        name="this run", mode="markers", x=[_utc(this.started_ns)], y=[this.elapsed_ns / 1e9],
        marker={"symbol": "star", "size": 14, "color": SIDE_COLOURS["b"]},
        text=[f"{this.job} run {this.run}: {format_duration_ns(this.elapsed_ns)}"],
        hoverinfo="text",
    ))  # fmt: skip
    starts = [r.started_ns for r in runs]
    middle, half = (
        (min(starts) + max(starts)) // 2,
        max(max(starts) - min(starts), TREND_MIN_NS) // 2,
    )
    fig.update_layout(
        xaxis={"title": {"text": "run start (UTC)"}, "automargin": True,
               "range": [_utc(middle - half - half // 10), _utc(middle + half + half // 10)]},
        yaxis={"title": {"text": "elapsed seconds"}, "rangemode": "tozero",
               "gridcolor": "#e5e9f0"},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        **_base_layout(),
    )  # fmt: skip
    _titled(fig, title)
    fig.update_layout(margin={"t": 76})
    return fig
