# frontend/refresh.py — how often a page refreshes: the back-off under load (pure, no I/O).
"""The refresh period of a page that polls the API: the configured period while refreshes
are quick, longer while they are slow or failing, so a loaded server is asked less often
and no refresh is cut short by the next one."""

from __future__ import annotations

#: The period backs off to at most this (ms).
MAX_REFRESH_MS = 30_000
#: The next refresh comes at least this many times the last one's duration later.
BACKOFF_FACTOR = 2


def next_period(base_ms: int, period_ms: int, took_ms: float, failed: bool) -> int:
    """The period (ms) after a refresh that took `took_ms` under the period `period_ms`: at
    least `BACKOFF_FACTOR` times that, doubled after a failure, never below `base_ms` (the
    configured period) nor above `MAX_REFRESH_MS`."""
    wanted = max(base_ms, BACKOFF_FACTOR * took_ms, 2 * period_ms if failed else 0)
    return int(min(MAX_REFRESH_MS, wanted))
