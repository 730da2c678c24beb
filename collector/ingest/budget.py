"""The new-partition budget of each sender: days without a partition an owner may bring
per hour, over all its TCP connections and HTTP batches together.

Within the ingest horizon (collector/ingest/server.py) every day may get a partition; this
budget bounds how fast one user makes them (each new day is a CREATE of every partitioned
table). It is kept per owner (the proven uid the frames belong to; the collector's own in
trusted mode), never per connection: opening more connections buys nothing. A day counts
once it is granted, whether or not its frames are then stored, for an hour.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from collector.store.partitions import Partitions

#: Seconds a granted day counts against its owner.
WINDOW_S = 3600.0


class NewDayBudget:
    """Days without a partition each owner may bring within a sliding hour."""

    def __init__(
        self, partitions: Partitions, per_hour: int, clock: Callable[[], float] = time.monotonic
    ):
        """`partitions`: the writer's (it knows the days that have one); `per_hour`: the
        budget of every owner; `clock`: seconds, monotonic (a test may move it on)."""
        self.partitions = partitions
        self.per_hour = per_hour
        self.clock = clock
        self._granted: dict[int, dict[int, float]] = {}  # owner -> day -> when granted

    def brought(self, owner: int) -> set[int]:
        """The days `owner` was granted within the last hour."""
        granted = self._granted.get(owner)
        if not granted:
            return set()
        since = self.clock() - WINDOW_S
        for day in [d for d, at in granted.items() if at <= since]:
            del granted[day]
        if not granted:
            del self._granted[owner]
        return set(granted)

    def fit(self, owner: int, t_end_ns: np.ndarray, whole: bool = False) -> int:
        """How many leading frames (by interval end) of `owner` stay within its budget; the
        new days of those frames are charged to it. `whole`: all or nothing (an atomic
        batch): nothing is charged unless every frame fits."""
        before = self.brought(owner)
        brought = set(before)
        fit = self.partitions.new_days_fit(t_end_ns, self.per_hour, brought)
        if whole and fit < len(t_end_ns):
            return fit
        if new := brought - before:
            now = self.clock()
            self._granted.setdefault(owner, {}).update(dict.fromkeys(new, now))
        return fit
