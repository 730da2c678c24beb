# presentation/formatting.py — human-readable bytes, durations and ns timestamps (pure, shared).
"""Formatting helpers: binary byte units, durations and UTC timestamps (and reading a
typed UTC time back), a program's name, how many ranks and processes a job had."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the API's models only as types: this module stays light to import
    from stacklens.api_models import RunSummary

_BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_SHORT_UNITS = ("K", "M", "G", "T", "P", "E")


def communicator_label(comm_id: int, overflow: bool) -> str:
    """How a communicator id reads on the pages, in the reports and in the findings: 8 hex
    digits, or "overflow" for the key that holds the communicators beyond
    STACKLENS_MAX_KEYS."""
    return "overflow" if overflow else f"{comm_id:08x}"


def ranks_or_processes(kind: str, count: int) -> str:
    """`count` members of a run of `kind` in words: processes of a processes run ("1
    process", "3 processes"), ranks of an MPI run ("1 rank", "4 ranks")."""
    if kind == "processes":
        return f"{count} process{'es' if count != 1 else ''}"
    return f"{count} rank{'s' if count != 1 else ''}"


def ranks_and_processes(runs: Sequence[RunSummary], *, of_world: bool = False) -> list[str]:
    """How many ranks and processes reported in a job's runs, apart: the MPI ranks (of every
    run but the processes run; a launch none of whose ranks reported counts 0), then the
    non-MPI processes when there are some; the ranks are left out when only processes
    reported. ["2 ranks", "1 process"], ["4 ranks"], ["3 processes"], ["0 ranks"] (nothing
    yet). `of_world`: the ranks as "seen / world" (the largest world of the MPI runs), as
    the jobs grid shows them: ["2 / 2", "1 process"]. The caller joins them."""
    mpi = [r for r in runs if r.kind != "processes"]
    ranks = sum(r.ranks_seen for r in mpi)
    processes = sum(r.ranks_seen for r in runs if r.kind == "processes")
    said = counted_apart(ranks, processes)
    if of_world and (ranks or not processes):
        said[0] = f"{ranks} / {max((r.world_size for r in mpi), default=0)}"
    return said


def counted_apart(ranks: int, processes: int) -> list[str]:
    """`ranks` MPI ranks and `processes` non-MPI processes in words, apart: the ranks, then
    the processes when there are some; the ranks left out when there are only processes.
    ["2 ranks", "1 process"], ["4 ranks"], ["3 processes"], ["0 ranks"]. The caller joins
    them."""
    said = [ranks_or_processes("mpi", ranks)] if ranks or not processes else []
    return said + ([ranks_or_processes("processes", processes)] if processes else [])


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


def format_bytes_tick(n: int | float) -> str:
    """`n` bytes on an axis tick: binary units, at most three significant digits, no
    trailing zeros: 0 -> "0 B", 512 -> "512 B", 1610612736 -> "1.5 GiB"."""
    if n < 1024:
        return f"{n:.3g} B"
    value, unit = n / 1024, 0
    while value >= 1024 and unit < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.3g} {_BINARY_UNITS[unit]}"


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


def format_rate(bytes_per_s: float | None) -> str:
    """A rate in binary units per second: 1572864.0 -> "1.50 MiB/s", None -> "?" (unknown)."""
    return "?" if bytes_per_s is None else f"{format_bytes(bytes_per_s)}/s"


def format_age(seconds: float) -> str:
    """How long ago, plainly: 4.2 -> "4.2 s", 300 -> "5 min", 7300 -> "2 h", 200000 ->
    "2 days"."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def format_duration_ns(ns: int) -> str:
    """A duration in ns, three significant digits: 850 -> "850 ns", 12_345 -> "12.3 µs",
    3_200_000 -> "3.20 ms", 75_000_000_000 -> "75.0 s"; from 1,000 s on, whole seconds."""
    if ns < 1000:
        return f"{ns:.0f} ns"
    for unit, scale in (("µs", 1e3), ("ms", 1e6)):
        text = f"{ns / scale:#.3g}".rstrip(".")
        if float(text) < 1000:
            return f"{text} {unit}"
    if ns < 999_500_000_000:
        return f"{f'{ns / 1e9:#.3g}'.rstrip('.')} s"
    return f"{ns / 1e9:,.0f} s"


def program_name(command: str, exe_path: str | None) -> str:
    """A program as the comparison knows it: its executable's path, then its arguments (the
    command line after its first word, argv[0] as typed); the command line when the path
    is not known."""
    if exe_path is None:
        return command
    _, space, arguments = command.partition(" ")
    return exe_path + space + arguments


def format_utc_ns(ns: int) -> str:
    """A ns-since-epoch timestamp as "YYYY-MM-DD HH:MM:SS UTC"."""
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _utc_exact(ns: int, date: bool) -> str:
    """An instant as "[YYYY-MM-DD ]HH:MM:SS[.fff…]": the fraction of a second only when
    there is one, to the ns, trailing zeros dropped."""
    whole, rest = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(whole, tz=UTC).strftime("%Y-%m-%d %H:%M:%S" if date else
                                                          "%H:%M:%S")  # fmt: skip
    return text + (f".{rest:09d}".rstrip("0") if rest else "")


def format_utc_window_ns(from_ns: int | None, to_ns: int | None) -> str:
    """A window [from, to) in words, exact to the ns (never cut to the second): "2023-11-14
    22:16:40–22:16:45.5 UTC" (the end's date only when it is another day), "from … UTC",
    "until … UTC"; "" for an open window."""
    if from_ns is None and to_ns is None:
        return ""
    if to_ns is None:
        return f"from {_utc_exact(from_ns or 0, True)} UTC"
    if from_ns is None:
        return f"until {_utc_exact(to_ns, True)} UTC"
    day = datetime.fromtimestamp(from_ns // 10**9, tz=UTC).date()
    other_day = datetime.fromtimestamp(to_ns // 10**9, tz=UTC).date() != day
    return f"{_utc_exact(from_ns, True)}–{_utc_exact(to_ns, other_day)} UTC"


def format_power_of_two_bytes(n: int) -> str:
    """A power of two of bytes in the largest binary unit that keeps it whole: 512 -> "512 B",
    1024 -> "1 KiB", 2**63 -> "8 EiB", 2**64 -> "16 EiB"."""
    units = ("B", *_BINARY_UNITS)
    unit = 0
    while n >= 1024 and n % 1024 == 0 and unit < len(units) - 1:
        n //= 1024
        unit += 1
    return f"{n} {units[unit]}"


def format_size_bucket(lower: int, upper: int) -> str:
    """The byte range [lower, upper) of a log2 message-size bucket as read on the page:
    (0, 1) -> "0 B (empty)", (1, 2) -> "1 B", (512, 1024) -> "512 B – 1 KiB"."""
    if upper - lower <= 1:
        return "0 B (empty)" if lower == 0 else format_power_of_two_bytes(lower)
    return f"{format_power_of_two_bytes(lower)} – {format_power_of_two_bytes(upper)}"


def parse_utc_ns(text: str | None) -> int | None:
    """A time typed as UTC ("2026-12-01 19:30", "2026-12-01", a trailing "UTC" allowed) in
    ns since the epoch; None if empty or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.strip().removesuffix("UTC").strip())
    except ValueError:
        return None
    return int(moment.replace(tzinfo=UTC).timestamp()) * 10**9


def rank_ranges(ranks: Sequence[int]) -> str:
    """Sorted ranks as runs: [0, 1, 2, 5] -> "0–2, 5"."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)
