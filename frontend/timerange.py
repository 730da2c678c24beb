# frontend/timerange.py — the one time-range control of the header, shared by every page
# (live presets and a custom range, carried in the URL), and how a page reads its window.
"""The time range of every page lives in the URL's query, one convention for all pages:

    ?live=5m|1h|24h            a window ending now, moving with every refresh
    ?from=<start>&to=<end>     a fixed window (RFC 3339 as the control writes it, or epoch
                               seconds as older links and the API take them)
    neither                    the page's whole span (a whole job, every incident, every job)

The header holds the control (Mantine SegmentedControl for the presets, two DateTimePickers
in UTC for a custom range and an Apply button). Picking a preset or applying a range writes
the URL (clientside, `assets/stacklens.js`: `timerange.update`, keeping the page's other
parameters except the playback step); Dash's page router then renders the page for it, and
the page reads its window with `window_of`. A URL changed by a link or by history sets the
control back (the same callback). The Fabric and Overview pages have no "all": their default
is live 5 min.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import dash
import dash_mantine_components as dmc
from dash import ALL, ClientsideFunction, Input, Output, State, html

from frontend import ids
from presentation.formatting import format_utc_ns

#: The live presets: query value -> seconds.
LIVE = {"5m": 300, "1h": 3600, "24h": 86400}
#: The presets of the control, in order.
PRESETS = [
    {"value": "5m", "label": "Live 5 min"},
    {"value": "1h", "label": "Live 1 h"},
    {"value": "24h", "label": "Live 24 h"},
    {"value": "all", "label": "All"},
    {"value": "custom", "label": "Custom"},
]
#: Pages whose default (no range in the URL) is a live window, not "all".
LIVE_DEFAULT = {"/fabric": "5m", "/": "5m"}


@dataclass(frozen=True)
class Window:
    """A page's window as its URL holds it: `live` (a key of LIVE) or the fixed bounds as
    written (the API reads them), or nothing (the page's whole span)."""

    live: str | None = None
    start: str | None = None
    end: str | None = None

    def bounds(self) -> tuple[str | None, str | None]:
        """(from, to) for the API: a live window ends now (no `to`) and starts LIVE seconds
        before now (epoch seconds)."""
        if self.live is not None:
            return str(round(time.time()) - LIVE[self.live]), None
        return self.start, self.end

    def ns_bounds(self) -> tuple[int | None, int | None]:
        """(from, to) in ns since the epoch (None: open); ValueError naming a bound that
        is neither epoch seconds nor an RFC 3339 time."""
        start, end = self.bounds()
        return _ns(start), _ns(end)

    def query(self) -> dict[str, str]:
        """The URL parameters of this window."""
        if self.live is not None:
            return {"live": self.live}
        return {k: v for k, v in (("from", self.start), ("to", self.end)) if v}

    def words(self) -> str:
        """The window in words: "the last 5 min (live)", "from ... to ...", "all"."""
        if self.live is not None:
            return f"the last {PRESETS[list(LIVE).index(self.live)]['label'][5:]} (live)"
        if self.start or self.end:
            return f"from {bound_words(self.start, 'the start')} to {bound_words(self.end, 'now')}"
        return "all"


def bound_words(text: str | None, absent: str) -> str:
    """A window bound as the URL holds it, in words: "2023-11-14 22:13:20 UTC" (the second
    it falls in), `absent` when there is none, as written when it is not a time (the API
    says why)."""
    if not text:
        return absent
    try:
        ns = _ns(text)
    except ValueError:
        return text
    return absent if ns is None else format_utc_ns(ns)


def _ns(text: str | None) -> int | None:
    """A bound as the URL holds it (epoch seconds or RFC 3339; a time without a zone is
    UTC) in ns since the epoch."""
    if text is None:
        return None
    try:
        return int(Decimal(text) * 10**9)
    except ArithmeticError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip().removesuffix("UTC").strip())
    except ValueError:
        raise ValueError(f"not a time: {text!r} (epoch seconds or RFC 3339)") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 10**6) * 1000


def window_of(query: dict[str, Any], default_live: str | None = None) -> Window:
    """The window of a page's URL query (module doc); `default_live` when it holds none."""
    live = query.get("live")
    if live in LIVE:
        return Window(live=str(live))
    start, end = (str(query.get(k) or "").strip() or None for k in ("from", "to"))
    if start or end:
        return Window(start=start, end=end)
    return Window(live=default_live)


def control() -> html.Div:
    """The header's time-range control (filled from the URL by `timerange.update`)."""
    # the value is UTC ("YYYY-MM-DD HH:mm:ss", stacklensTime.picker); shown with its zone,
    # as every time on the pages is
    picker = {"valueFormat": "YYYY-MM-DD HH:mm:ss [UTC]", "withSeconds": True, "size": "xs",
              "clearable": True, "w": 220}  # fmt: skip
    return html.Div(
        className="timerange",
        children=[
            dmc.SegmentedControl(id=ids.TR_PRESET, data=PRESETS, value="all", size="xs"),
            dmc.DateTimePicker(id=ids.TR_FROM, placeholder="from (UTC)", **picker),
            dmc.DateTimePicker(id=ids.TR_TO, placeholder="to (UTC, empty: now)", **picker),
            dmc.Button("Apply", id=ids.TR_APPLY, size="xs", variant="filled"),
            dmc.Text(id=ids.TR_SHOWN, size="xs", className="timerange-shown"),
        ],
    )


def register_callbacks(dash_app: dash.Dash) -> None:
    """The control's clientside callbacks (assets/stacklens.js): the control from the URL,
    the header's page links carrying the range, the URL from the control."""
    # One callback both ways (Dash allows a cycle only inside one callback): the URL sets
    # the control, a chosen preset or an applied range sets the URL.
    dash_app.clientside_callback(
        ClientsideFunction("timerange", "update"),
        Output(ids.URL, "search"),
        Output(ids.TR_PRESET, "value"),
        Output(ids.TR_PRESET, "data"),
        Output(ids.TR_FROM, "value"),
        Output(ids.TR_TO, "value"),
        Output(ids.TR_SHOWN, "children"),
        Input(ids.URL, "pathname"),
        Input(ids.URL, "search"),
        Input(ids.TR_PRESET, "value"),
        Input(ids.TR_APPLY, "n_clicks"),
        State(ids.TR_FROM, "value"),
        State(ids.TR_TO, "value"),
        State(ids.TR_CONFIG, "data"),
    )
    dash_app.clientside_callback(
        ClientsideFunction("timerange", "carry"),
        Output({"type": ids.NAV_LINK, "path": ALL}, "href"),
        Input(ids.URL, "search"),
        State({"type": ids.NAV_LINK, "path": ALL}, "id"),
    )


def config() -> dict[str, Any]:
    """What the clientside callbacks need: the presets and the pages' defaults."""
    return {"presets": PRESETS, "live_default": LIVE_DEFAULT}
