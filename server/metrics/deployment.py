"""The deployment's modes and the users sending lately, as GET /api/deployment and
/metrics answer them (stacklens/modes.py says what they mean)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import psycopg
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from collector.control import CollectorUnavailable
from collector.store.status import recent_senders
from server.access.viewer import Access
from stacklens.api_models import Deployment
from stacklens.modes import NO_INGEST, SENDERS_WINDOW_NS, trusted_warning

if TYPE_CHECKING:
    from collector.control import CollectorLink


async def ingest_mode(collector: CollectorLink | None) -> str:
    """The ingest mode of this server's collector, as it says over its control channel
    (asked once: `stacklens up` asks before it serves); NO_INGEST without one, or while
    it has never answered (it has received nothing then)."""
    if collector is None:
        return NO_INGEST
    try:
        return (await collector.status()).auth
    except CollectorUnavailable:
        return NO_INGEST


def senders(engine: Engine, now_ns: int | None = None) -> int | None:
    """How many users sent runs lately (recent_senders, over every user's runs); None when
    the database does not answer."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    try:
        with engine.connect() as conn:
            raw = conn.connection.driver_connection  # the psycopg connection under it
            assert isinstance(raw, psycopg.Connection), "stacklens' engines use psycopg"
            return recent_senders(raw, now_ns)
    except (SQLAlchemyError, psycopg.Error):
        return None


def deployment(engine: Engine, ingest: str, access: Access) -> Deployment:
    """The Deployment answer: modes (`ingest` that of ingest_mode), users sending, and the
    warning of trusted ingest with several of them."""
    count = senders(engine)
    return Deployment(
        ingest=ingest,
        auth=access.mode,
        senders=count,
        senders_window_s=SENDERS_WINDOW_NS // 10**9,
        warning=trusted_warning(ingest, count),
    )
