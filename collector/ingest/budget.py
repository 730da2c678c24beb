"""The budgets of each sender, over all its TCP connections and HTTP batches together: days
without a partition an owner may bring per hour (NewDayBudget), bytes of frames it may
have stored per hour (StorageBudget) and in all (StorageQuota, the bound on storage per
user, read from the database).

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
import psycopg

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


def _leading_within(lengths: np.ndarray, room: int) -> tuple[int, int]:
    """(how many leading `lengths` add up to at most `room`, their sum); one sum in the
    usual case, where all of them fit (this runs on every read of every connection)."""
    total = int(lengths.sum(dtype=np.int64))
    if total <= room:
        return len(lengths), total
    fit = int(np.searchsorted(np.cumsum(lengths, dtype=np.int64), room, side="right"))
    return fit, int(lengths[:fit].sum(dtype=np.int64))


#: Seconds of each slot of StorageBudget's sliding hour.
SLOT_S = 60.0


class StorageBudget:
    """Bytes of frames each owner may have stored within a sliding hour, over all its TCP
    connections and HTTP batches together (how fast one user may fill its StorageQuota;
    frame and name counts of a run follow from them and from collector/store/names.py).

    Frames are charged as they are accepted for the writer (their wire length), in slots of
    a minute: the hour is the last 60 slots, so per owner at most 60 numbers are held. A
    frame that does not fit is refused (the sender keeps it and resends it later)."""

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic):
        """`per_hour`: the bytes every owner may bring per hour; `clock`: seconds,
        monotonic (a test may move it on)."""
        self.per_hour = per_hour
        self.clock = clock
        self._slots: dict[int, dict[int, int]] = {}  # owner -> slot -> bytes charged

    def used(self, owner: int) -> int:
        """The bytes `owner` was charged within the last hour."""
        slots = self._slots.get(owner)
        if not slots:
            return 0
        oldest = int(self.clock() // SLOT_S) - int(WINDOW_S // SLOT_S) + 1
        for slot in [s for s in slots if s < oldest]:
            del slots[slot]
        if not slots:
            del self._slots[owner]
        return sum(slots.values())

    def fit(self, owner: int, lengths: np.ndarray, whole: bool = False) -> int:
        """How many leading frames (of `lengths` bytes each) of `owner` stay within its
        budget; those are charged to it. `whole`: all or nothing (an atomic batch): nothing
        is charged unless every frame fits."""
        room = self.per_hour - self.used(owner)
        fit, charged = _leading_within(lengths, room)
        if whole and fit < len(lengths):
            return fit
        if charged:
            slots = self._slots.setdefault(owner, {})
            slot = int(self.clock() // SLOT_S)
            slots[slot] = slots.get(slot, 0) + charged
        return fit


#: The bytes of frames each owner has stored, from the database (owner_storage).
_STORED_BY_OWNER = "SELECT owner_uid, sum(bytes)::bigint FROM owner_storage GROUP BY 1"


class StorageQuota:
    """Bytes of frames each owner may have stored in all (STACKLENS_MAX_STORED_MB: the bound
    on storage per user), over every collector writing to the database.

    What is stored comes from the database (`owner_storage`, kept by the writer in the
    transaction that stores the frames, cleared by retention with their days), read at
    start and at every maintenance pass (`refresh`), so a restart or another collector
    changes nothing; between two reads the frames this collector commits are added
    (`settle`), and the frames accepted but not yet committed count too (`pending`). A
    frame that does not fit is refused (`unavailable`: the sender keeps it and resends it;
    it fits once retention has dropped older days)."""

    def __init__(self, limit: int):
        """`limit`: the bytes every owner may have stored."""
        self.limit = limit
        self._stored: dict[int, int] = {}  # owner -> bytes stored, as last read (+ commits)
        self._pending: dict[int, int] = {}  # owner -> bytes accepted, not yet committed

    def used(self, owner: int) -> int:
        """The bytes `owner` has stored or on their way to the database."""
        return self._stored.get(owner, 0) + self._pending.get(owner, 0)

    def fit(self, owner: int, lengths: np.ndarray) -> int:
        """How many leading frames (of `lengths` bytes each) of `owner` fit within its
        quota (nothing is charged: see `charge`)."""
        return _leading_within(lengths, self.limit - self.used(owner))[0]

    def charge(self, owner: int, size: int) -> None:
        """`size` bytes of `owner`'s frames were handed to the writer."""
        self._pending[owner] = self._pending.get(owner, 0) + size

    def settle(self, owner: int, size: int, stored: bool) -> None:
        """The writer is done with `size` bytes charged to `owner`: `stored` (committed,
        resends included until the next refresh) or not."""
        left = self._pending.get(owner, 0) - size
        if left > 0:
            self._pending[owner] = left
        else:
            self._pending.pop(owner, None)
        if stored:
            self._stored[owner] = self._stored.get(owner, 0) + size

    async def refresh(self, conn: psycopg.AsyncConnection) -> None:
        """Read what every owner has stored from the database."""
        async with conn.transaction(), conn.cursor() as cur:
            await cur.execute(_STORED_BY_OWNER)
            self._stored = {int(owner): int(size) for owner, size in await cur.fetchall()}
