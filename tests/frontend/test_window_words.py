# tests/frontend/test_window_words.py — a page's window in words, never as raw epochs.
"""frontend/timerange.py: a window's bounds as a person reads them (the Fabric page's
captions say "from ... to ..."): epoch seconds and RFC 3339 times in UTC to the second, an
absent bound in words, a bound that is not a time as written."""

from __future__ import annotations

from frontend.timerange import Window, bound_words


def test_bounds_in_words():
    assert bound_words("1700000000", "now") == "2023-11-14 22:13:20 UTC"
    assert bound_words("1700000005.75", "now") == "2023-11-14 22:13:25 UTC"
    assert bound_words("2023-11-14T23:13:20+01:00", "now") == "2023-11-14 22:13:20 UTC"
    assert bound_words(None, "now") == bound_words("", "now") == "now"
    assert bound_words("yesterday", "now") == "yesterday"


def test_a_windows_words():
    assert Window(start="1700000000", end="1700000005").words() == (
        "from 2023-11-14 22:13:20 UTC to 2023-11-14 22:13:25 UTC"
    )
    assert Window(end="1700000005").words() == "from the start to 2023-11-14 22:13:25 UTC"
    assert Window(live="5m").words() == "the last 5 min (live)"
    assert Window().words() == "all"
