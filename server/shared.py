"""Answers computed once for every viewer: `SharedAnswers` keeps the latest answers by key
with the version of the data they were computed from, and gives a kept one back while the
data's version read now is the same (and, when it has a `max_age_s`, while it is younger
than that). The caller reads the version before computing: the data an answer was computed
from is then at least as new as its version, so a change made meanwhile makes the next
version differ and is never missed. Requests that miss the same key at once compute it
once (`Gates`): the others wait for that answer instead of all computing it (ten viewers
polling together would otherwise do the work ten times just when it is needed). Used for a
job's answers (server/traffic/service.py, AttributionCache.per_job), the job list's rows
and a job's sections (server/jobs/routes.py), and, with its gates only, the fabric's
shared answers (server/fabric/snapshot.py)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


#: Locks a set of gates holds: keys share them by hash (two keys on one lock compute one
#: after the other, which the interpreter's lock mostly does anyway).
GATES = 64


class Gates:
    """A lock per key (striped over GATES locks): whoever computes a key's answer holds it,
    so requests missing that key at once wait for the first one's answer."""

    def __init__(self) -> None:
        self._locks = [threading.Lock() for _ in range(GATES)]

    def of(self, key: Hashable) -> threading.Lock:
        """The lock of `key`."""
        return self._locks[hash(key) % GATES]


class SharedAnswers:
    """The `size` latest answers by key, each with its data's version (thread-safe: the
    routes run in worker threads; two requests missing at once both compute, the later
    one's answer is kept)."""

    def __init__(self, size: int, max_age_s: float | None = None) -> None:
        self.size = size
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, tuple[Any, float, Any]] = OrderedDict()
        self._gates = Gates()

    def get(self, key: Hashable, version: Any, build: Callable[[], T]) -> T:
        """The answer kept for `key` if it was computed at `version` (and within
        `max_age_s`), else `build()`'s (computed once for the requests that miss it
        together), kept (the least recently used forgotten beyond `size`)."""
        found = self._found(key, version)
        if found is not None:
            kept: T = found[0]
            return kept
        with self._gates.of(key):
            found = self._found(key, version)  # computed while this one waited
            if found is not None:
                kept = found[0]
                return kept
            now = time.monotonic()
            answer = build()
            with self._lock:
                self._kept[key] = (version, now, answer)
                self._kept.move_to_end(key)
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
            return answer

    def _found(self, key: Hashable, version: Any) -> tuple[Any] | None:
        """(the answer,) kept for `key` at `version` and young enough, else None."""
        with self._lock:
            found = self._kept.get(key)
            if found is None or found[0] != version:
                return None
            if self.max_age_s is not None and time.monotonic() - found[1] >= self.max_age_s:
                return None
            self._kept.move_to_end(key)
            return (found[2],)

    def __len__(self) -> int:
        """Answers kept."""
        return len(self._kept)
