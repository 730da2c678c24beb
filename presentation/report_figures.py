"""Pure Plotly figure builders of the reports that the dashboard has no figure for (the
timeline, matrix, rank heat map and size histogram come from presentation/figures.py): time
per MPI operation, collectives, file I/O per file, the fabric with a set of links
highlighted, and the load of links over time. Data in, go.Figure out, no I/O.

Every text that comes from a user (file paths, host and node names) goes through `text`:
Plotly reads a few HTML tags in labels (<b>, <br>, <a href>), so they are written as
character references and shown verbatim.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from presentation.figures import bytes_axis
from presentation.formatting import format_bytes
from stacklens.api_models import CollectiveTotal, FileIo, OpTotal

#: Bars shown at most in a ranking figure (the tables list the rest).
MAX_BARS = 20
#: Links drawn over time at most (the busiest).
MAX_SERIES_LINKS = 8
#: Utilisation classes of highlighted links: (lower bound, colour, name).
LOAD_CLASSES = (
    (0.8, "#b2182b", "≥ 80 %"),
    (0.5, "#ef8a62", "50–80 %"),
    (0.2, "#f4a582", "20–50 %"),
    (0.0, "#4393c3", "< 20 %"),
    (-1.0, "#7b3294", "unknown"),
)

#: The halo of a congested link (as on the Fabric page: frontend/cyto_style.py).
CONGESTED_COLOUR = "#fdb022"

_FONT = "DejaVu Sans, Arial, sans-serif"


def text(value: str) -> str:
    """User text as Plotly shows it verbatim (its tag characters as references)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _layout(**extra: Any) -> dict[str, Any]:
    return {
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": _FONT, "size": 12, "color": "#1f2a37"},
        **extra,
    }


def _empty(message: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        xaxis={"visible": False},
        yaxis={"visible": False},
        annotations=[{"text": message, "showarrow": False, "xref": "paper", "yref": "paper"}],
        **_layout(),
    )
    return fig


def _title(words: str) -> dict[str, Any]:
    """A figure's title, left above the plot."""
    return {"text": words, "x": 0, "xanchor": "left"}


def _bars(
    labels: list[str], values: list[float], hover: list[str], axis: str, title: str, what: str
) -> go.Figure:
    """Horizontal bars, the first label at the top: `axis` the values' axis title (and the
    legend's name of the bars), `what` the labels' axis title."""
    fig = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            name=axis,
            showlegend=True,
            orientation="h",
            customdata=hover,
            marker_color="#2b6cb0",
            hovertemplate="%{y}<br>%{customdata}<extra></extra>",
        )
    )
    fig.update_layout(
        title=_title(title),
        xaxis={"title": {"text": axis}, "gridcolor": "#e5e9f0", "rangemode": "tozero"},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category",
               "title": {"text": what}},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        **_layout(margin={"l": 60, "r": 20, "t": 50, "b": 50}),
    )  # fmt: skip
    return fig


def op_times(ops: Sequence[OpTotal]) -> go.Figure:
    """Time inside each MPI operation summed over ranks (the MAX_BARS heaviest), seconds."""
    shown = sorted((o for o in ops if o.time_ns > 0), key=lambda o: -o.time_ns)[:MAX_BARS]
    if not shown:
        return _empty("No MPI operation took time.")
    return _bars(
        [o.op for o in shown],
        [o.time_ns / 1e9 for o in shown],
        [f"{o.calls:,} calls, {format_bytes(o.bytes)}, {o.ranks} ranks" for o in shown],
        "time inside, summed over ranks (s)",
        "Time inside each MPI operation",
        "MPI operation",
    )


def collective_times(collectives: Sequence[CollectiveTotal]) -> go.Figure:
    """Time inside each collective per communicator (the MAX_BARS heaviest), seconds."""
    shown = sorted(collectives, key=lambda c: -c.time_ns)[:MAX_BARS]
    if not shown:
        return _empty("No collective was called.")

    def label(c: CollectiveTotal) -> str:
        root = f", root {c.root}" if c.root >= 0 else ""
        return f"{c.op} (comm {c.comm_id}, {c.comm_size} ranks{root})"

    return _bars(
        [label(c) for c in shown],
        [c.time_ns / 1e9 for c in shown],
        [f"{c.calls:,} calls, {format_bytes(c.bytes)}" for c in shown],
        "time inside, summed over ranks (s)",
        "Time inside each collective, per communicator",
        "collective (communicator)",
    )


def file_bytes(files: Sequence[FileIo]) -> go.Figure:
    """Bytes read and written per (layer, file), the MAX_BARS with most bytes, stacked."""
    shown = sorted(files, key=lambda f: -(f.bytes_read + f.bytes_written))[:MAX_BARS]
    if not shown:
        return _empty("No file-system I/O in this window.")
    labels = [f"{f.layer}: {text(f.path)}" for f in shown]
    fig = go.Figure(
        [
            go.Bar(
                name="read",
                x=[f.bytes_read for f in shown],
                y=labels,
                orientation="h",
                marker_color="#2b6cb0",
            ),
            go.Bar(
                name="written",
                x=[f.bytes_written for f in shown],
                y=labels,
                orientation="h",
                marker_color="#dd6b20",
            ),
        ]
    )
    fig.update_layout(
        barmode="stack",
        title=_title("Bytes read and written per file"),
        xaxis={"title": {"text": "bytes"}, "gridcolor": "#e5e9f0",
               **bytes_axis(max(f.bytes_read + f.bytes_written for f in shown))},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category",
               "title": {"text": "layer: file"}},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        **_layout(margin={"l": 60, "r": 20, "t": 50, "b": 50}),
    )  # fmt: skip
    return fig


def _levels(nodes: Sequence[dict[str, Any]], links: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Level of each node: HCAs 0, then hops from the nearest HCA (leaves 1, spines 2, ...)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for lk in links:
        graph[lk["a"]["guid"]].add(lk["b"]["guid"])
        graph[lk["b"]["guid"]].add(lk["a"]["guid"])
    level = {n["guid"]: 0 for n in nodes if n["type"] == "hca"}
    frontier = list(level)
    while frontier:
        nxt = []
        for guid in frontier:
            for other in graph[guid]:
                if other not in level:
                    level[other] = level[guid] + 1
                    nxt.append(other)
        frontier = nxt
    top = max(level.values(), default=0) + 1
    return {n["guid"]: level.get(n["guid"], top) for n in nodes}


def topology(
    nodes: Sequence[dict[str, Any]],
    links: Sequence[dict[str, Any]],
    highlighted: dict[int, float | None],
    hosts: set[str],
    *,
    waiting: dict[int, float | None],
    congested_from: float,
) -> go.Figure:
    """The fabric in levels (hosts at the bottom, then leaves, then spines): every link in
    grey, the `highlighted` links (id -> peak utilisation, None unknown) coloured by load
    class, and under them an amber halo on those whose PortXmitWait rate (`waiting`: id ->
    ticks/s, None unknown) reached `congested_from` — congestion and utilisation are two
    things: a link can wait at 4 % of its capacity; the nodes named in `hosts` marked.
    `nodes`/`links` as server.fabric.repository answers them."""
    if not nodes:
        return _empty("No fabric discovered.")
    level = _levels(nodes, links)
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for n in sorted(nodes, key=lambda n: n["name"]):
        rows[level[n["guid"]]].append(n)
    where: dict[str, tuple[float, float]] = {}
    for lvl, members in rows.items():
        for i, n in enumerate(members):
            where[n["guid"]] = ((i + 0.5) / len(members), float(lvl))
    grey_x: list[float | None] = []
    grey_y: list[float | None] = []
    classes: dict[str, tuple[list[float | None], list[float | None], list[str]]] = {}
    halo: tuple[list[float | None], list[float | None], list[str]] = ([], [], [])
    for lk in links:
        a, b = where.get(lk["a"]["guid"]), where.get(lk["b"]["guid"])
        if a is None or b is None:
            continue
        if lk["id"] not in highlighted:
            grey_x += [a[0], b[0], None]
            grey_y += [a[1], b[1], None]
            continue
        load = highlighted[lk["id"]]
        wait = waiting.get(lk["id"])
        name = next(c[2] for c in LOAD_CLASSES if (load if load is not None else -0.5) >= c[0])
        xs, ys, tips = classes.setdefault(name, ([], [], []))
        tip = (
            f"{text(lk['a']['name'])}[{lk['a']['port']}] – {text(lk['b']['name'])}"
            f"[{lk['b']['port']}]: peak "
            f"{'?' if load is None else f'{load * 100:.0f} %'}"
            + ("" if wait is None else f", PortXmitWait {wait:,.0f} ticks/s")
        )
        mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
        drawn_in = [(xs, ys, tips)]
        if wait is not None and wait >= congested_from:
            drawn_in.append(halo)
        for in_x, in_y, in_tips in drawn_in:
            in_x += [a[0], mid[0], b[0], None]
            in_y += [a[1], mid[1], b[1], None]
            in_tips += [tip, tip, tip, ""]
    traces: list[go.Scatter] = [
        go.Scatter(
            x=grey_x,
            y=grey_y,
            mode="lines",
            line={"color": "#d5dbe3", "width": 1},
            hoverinfo="skip",
            name="other links",
        )
    ]
    if halo[0]:  # under the load classes: a halo around the link's own colour
        traces.append(
            go.Scatter(
                x=halo[0],
                y=halo[1],
                mode="lines",
                line={"color": CONGESTED_COLOUR, "width": 11},
                opacity=0.75,
                text=halo[2],
                hoverinfo="text",
                name=f"congested (PortXmitWait ≥ {congested_from:,.0f} ticks/s)",
            )
        )
    for _, colour, name in LOAD_CLASSES:
        if name in classes:
            xs, ys, tips = classes[name]
            traces.append(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line={"color": colour, "width": 3},
                    text=tips,
                    hoverinfo="text",
                    name=f"peak {name}",
                )
            )
    for marked in (False, True):
        chosen = [n for n in nodes if (n["name"].split(" ", 1)[0] in hosts) == marked]
        if not chosen:
            continue
        traces.append(
            go.Scatter(
                x=[where[n["guid"]][0] for n in chosen],
                y=[where[n["guid"]][1] for n in chosen],
                mode="markers",
                marker={
                    "size": 9 if marked else 6,
                    "color": "#d69e2e" if marked else "#4a5568",
                    "symbol": ["square" if n["type"] == "switch" else "circle" for n in chosen],
                },
                text=[f"{n['type']} {text(n['name'])}" for n in chosen],
                hoverinfo="text",
                name="these hosts" if marked else "nodes",
            )
        )
    switches = [n for n in nodes if n["type"] == "switch"]
    if len(switches) <= MAX_NAMED_SWITCHES:  # a static PDF has no hover: name them
        traces.append(
            go.Scatter(
                x=[where[n["guid"]][0] for n in switches],
                y=[where[n["guid"]][1] for n in switches],
                mode="text",
                text=[text(n["name"].split(" ", 1)[0]) for n in switches],
                textposition="top center",
                textfont={"size": 9, "color": "#4a5568"},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    fig = go.Figure(traces)
    levels = sorted(rows)
    fig.update_layout(
        title={"text": "Fabric topology: links coloured by their peak load, congested ones "
                       "haloed", "x": 0, "font": {"size": 13}},
        xaxis={"title": {"text": "the nodes of each level, by name"}, "showticklabels": False,
               "showgrid": False, "zeroline": False, "range": [-0.02, 1.02]},
        yaxis={"title": {"text": "level"}, "range": [-0.5, max(rows) + 0.5],
               "tickvals": levels, "ticktext": [level_name(lvl) for lvl in levels],
               "showgrid": False, "zeroline": False},
        legend={"orientation": "h", "y": -0.12, "yanchor": "top", "x": 0},
        **_layout(margin={"l": 70, "r": 10, "t": 40, "b": 60}),
    )  # fmt: skip
    return fig


#: Up to this many switches, the topology figure writes each one's name beside it.
MAX_NAMED_SWITCHES = 24


def level_name(level: int) -> str:
    """A fabric level as the topology figure's axis names it (0: hosts)."""
    return {0: "hosts", 1: "leaf switches", 2: "spine switches"}.get(level, f"level {level}")


def link_loads(
    names: dict[int, str],
    points: dict[int, list[tuple[int, float | None, float]]],
) -> go.Figure:
    """Per link (id -> name), over time: utilisation of its busier direction (top) and
    PortXmitWait ticks per second of both ends (bottom); `points`: id -> (step start ns,
    utilisation or None, wait ticks/s)."""
    shown = [i for i in names if points.get(i)][:MAX_SERIES_LINKS]
    if not shown:
        return _empty("No fabric sample of these links in this window.")
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        subplot_titles=("utilisation (busier direction)", "PortXmitWait ticks per second"),
    )
    for i in shown:
        x = [datetime.fromtimestamp(t / 1e9, UTC) for t, _, _ in points[i]]
        name = text(names[i])
        fig.add_trace(
            go.Scatter(
                x=x, y=[u for _, u, _ in points[i]], name=name, legendgroup=name, mode="lines"
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[w for _, _, w in points[i]],
                name=name,
                legendgroup=name,
                showlegend=False,
                mode="lines",
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero", title_text="utilisation", row=1,
                     col=1)  # fmt: skip
    fig.update_yaxes(rangemode="tozero", title_text="ticks/s", row=2, col=1)
    fig.update_xaxes(title_text="time (UTC)", row=2, col=1)
    fig.update_layout(
        title=_title("Utilisation and PortXmitWait of the busiest links"),
        legend={"orientation": "h", "y": -0.18, "yanchor": "top", "x": 0},
        **_layout(margin={"l": 60, "r": 20, "t": 60, "b": 50}),
    )
    return fig


def per_byte(series: dict[str, list[tuple[int, float | None, float | None]]]) -> go.Figure:
    """Time per byte over time of each (job, signal) of an incident, with its baseline
    dashed: `series` label -> (step start ns, ns per byte or None, baseline ns per byte)."""
    shown = {label: points for label, points in series.items() if points}
    if not shown:
        return _empty("No job of this incident that you may read has a time-per-byte series.")
    fig = go.Figure()
    for label, points in shown.items():
        x = [datetime.fromtimestamp(t / 1e9, UTC) for t, _, _ in points]
        name = text(label)
        fig.add_trace(go.Scatter(x=x, y=[v for _, v, _ in points], name=name, mode="lines+markers"))
        fig.add_trace(go.Scatter(x=x, y=[b for _, _, b in points], name=f"{name}: baseline",
                                 mode="lines", line={"dash": "dash"}))  # fmt: skip
    fig.update_layout(
        title=_title("Time per byte of each job against its own baseline"),
        xaxis={"title": {"text": "time (UTC)"}},
        yaxis={"title": {"text": "ns per byte"}, "rangemode": "tozero", "gridcolor": "#e5e9f0"},
        legend={"orientation": "h", "y": -0.2, "yanchor": "top", "x": 0},
        **_layout(margin={"l": 60, "r": 20, "t": 50, "b": 50}),
    )
    return fig
