# frontend/formatting.py — human-readable text for bytes and ns timestamps (pure, shared by views).
"""Formatting helpers: binary byte units and UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_SHORT_UNITS = ("K", "M", "G", "T", "P", "E")


def format_bytes(n: int | float) -> str:
    """`n` bytes in binary units: 512 -> "512 B", 1572864 -> "1.50 MiB"."""
    if n < 1024:
        return f"{n:.0f} B"
    value = n / 1024
    unit = 0
    while round(value, 2) >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.2f} {_BINARY_UNITS[unit]}"


def format_bytes_short(n: int) -> str:
    """Compact (at most 5 characters), binary multiples: 512 -> "512", 1536 -> "1.5K",
    123456789 -> "118M" (K = KiB, M = MiB, ...)."""
    if n < 1024:
        return str(n)
    value = n / 1024
    unit = 0
    while round(value) >= 1024 and unit < len(_SHORT_UNITS) - 1:
        value /= 1024
        unit += 1
    digits = 1 if value < 9.95 else 0
    return f"{value:.{digits}f}{_SHORT_UNITS[unit]}"


def format_utc_ns(ns: int) -> str:
    """A ns-since-epoch timestamp as "YYYY-MM-DD HH:MM:SS UTC"."""
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
