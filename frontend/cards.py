# frontend/cards.py — the job cards on the pages: laid out from the registry, one callback each.
"""The job cards (presentation/cards.py) on the Jobs page and the job page: the same
sections with the same ids on both, each filled by a callback of its own.

A page reads every card's data of its job in one request (GET /api/overview) and passes
it on with `publish`: the answer is kept here for a short while under a token, and each
card whose data changed gets that token (and the view it was read for) in its store. The
card's callback renders its part of the answer, or, if the answer is no longer kept (a
restart; another server process), reads it again for the view. A card whose section the
server could not read shows why and keeps its last view.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Any

import dash
from dash import ALL, Input, Output, dcc, no_update
from dash.exceptions import PreventUpdate

from frontend import api
from frontend.api import ApiError, WindowQuery
from presentation.cards import CARDS, Card, error_id, layout, part_id
from stacklens.api_models import JobDetails

#: Answers kept for the card callbacks at most (the newest; a page's cards read theirs
#: within a moment of its refresh).
MAX_KEPT = 64

_kept: OrderedDict[str, JobDetails] = OrderedDict()
_kept_lock = threading.Lock()


def _keep(details: JobDetails) -> str:
    """Keep `details` under a new token (the oldest dropped beyond MAX_KEPT)."""
    token = secrets.token_hex(16)
    with _kept_lock:
        _kept[token] = details
        while len(_kept) > MAX_KEPT:
            _kept.popitem(last=False)
    return token


def _kept_details(token: str) -> JobDetails | None:
    with _kept_lock:
        return _kept.get(token)


def store_id(page: str, key: str) -> dict[str, str]:
    """The id of the store through which `page` hands a card its data."""
    return {"type": "card-data", "page": page, "card": key}


def sections(page: str) -> list:
    """Every card's section, in the registry's order, with the store `page` fills."""
    return [dcc.Store(id=store_id(page, card.key)) for card in CARDS] + [
        layout(card) for card in CARDS
    ]


def outputs(page: str) -> dict[str, Output]:
    """The outputs of a page's refresh that hand the cards their data, by card key."""
    return {card.key: Output(store_id(page, card.key), "data") for card in CARDS}


def publish(
    details: JobDetails | None,
    view: dict[str, Any],
    drawn: dict[str, str],
) -> dict[str, Any]:
    """What each card's store gets from a page's refresh: the token of `details` (read for
    `view`: job, owner, run, from, to) for the cards whose data or error changed since
    `drawn` (their digests, updated here), no_update for the others."""
    token = None if details is None else _keep(details)
    out: dict[str, Any] = {}
    for card in CARDS:
        answer = None if details is None else getattr(details, card.key)
        error = None if details is None else details.errors.get(card.key)
        d = api.digest((answer, error, view))
        if drawn.get(card.key) == d:
            out[card.key] = no_update
            continue
        drawn[card.key] = d
        out[card.key] = {"token": token, "view": view}
    return out


def fail(message: str) -> dict[str, Any]:
    """What each card's store gets when the page's request failed: the error."""
    return {card.key: {"error": message} for card in CARDS}


def _details(data: dict[str, Any]) -> JobDetails | None:
    """The answer a store names: kept, or read again for its view."""
    kept = _kept_details(data.get("token") or "")
    if kept is not None:
        return kept
    view = data["view"]
    window = WindowQuery(view.get("run"), view.get("from"), view.get("to"))
    return api.current_client().overview(view["job"], window, view.get("owner")).shown


def _render(card: Card, stored: list[dict[str, Any] | None]) -> dict[str, Any]:
    """A card's outputs from its store (of whichever page is shown)."""
    data = next((s for s in stored if s), None)
    if data is None:
        raise PreventUpdate
    keep = {part.name: no_update for part in card.parts}
    if "error" in data:
        return {**keep, "error": data["error"]}
    try:
        details = _details(data)
    except ApiError as exc:
        return {**keep, "error": str(exc)}
    if details is None:
        return {**keep, "error": f"unknown job {data['view']['job']!r}"}
    error = details.errors.get(card.key)
    answer = getattr(details, card.key)
    if error is not None or answer is None:
        return {**keep, "error": error or "no data"}
    return {**card.render(answer), "error": None}


def register_callbacks(dash_app: dash.Dash) -> None:
    """One callback per card: its store (on either page) in, its parts and error line out."""
    for card in CARDS:
        dash_app.callback(
            output={
                **{p.name: Output(part_id(card.key, p.name), p.prop) for p in card.parts},
                "error": Output(error_id(card.key), "children"),
            },
            inputs={"stored": Input({"type": "card-data", "page": ALL, "card": card.key}, "data")},
        )(lambda stored, card=card: _render(card, stored))
