# collector/resolver.py — call sites resolved in the background as they arrive.
"""The collector's call-site resolver (docs/callsites.md, "Where it is resolved"): after
every commit that stored call-site frames the frame writer names their jobs (`notify`); a
thread of its own reads, for those jobs, the frames no stored row answers
(collector/store/symbols.pending), resolves them against the module files where the
collector runs (stacklens/symbols.Resolver: build-id checked, module indexes cached by
file identity and bounded) and stores the answers and the fallbacks with their reasons.
A frame is data its sender chose: it is resolved from a file only when the job's owner
(jobs.owner_uid, with its groups from the system's group database, looked up each round)
may read that file by the mode bits (stacklens/symbols.owner_access), and its fallback is
stored for that owner only.
No API request reads a module file: the server answers from the stored rows, and a frame
not resolved yet is labelled so (server/callsites/resolution.py).

At start the jobs seen in the last CATCH_UP_NS with frames left unanswered (a collector
stopped meanwhile) are queued, and so again every `retry_ns` (RETRY_NS): by then a frame
answered only by a fallback (its module missing, unreadable, rebuilt) is tried again, as
the file may have appeared or been restored; an answer is never tried again, so a frame is
never downgraded. A module unchanged since (same file identity) costs one stat, its index
or its build-id cached. Several collectors may resolve the same frame at once: the
rows are the same, stored once. The work is on a thread, never on the ingest event loop;
pyelftools is pure Python and holds the GIL while it decodes, so a large module slows the
loop's own Python work for that time (the collector runs in its own process under
`stacklens up`, apart from the API).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable

import psycopg

from collector.store import symbols as stored
from stacklens import symbols
from stacklens.constants import DAY_NS

log = logging.getLogger(__name__)

#: How far back the start-up catch-up looks for jobs with unanswered frames.
CATCH_UP_NS = 2 * DAY_NS
#: How long a fallback stands before its frame is tried again.
RETRY_NS = 10 * 60 * 10**9
#: Frames resolved per database round (a job with more takes several rounds).
ROUND = 20_000


class SiteResolver:
    """A thread resolving the call-site frames of the jobs it is told of (module doc)."""

    def __init__(
        self, url: str, resolver: symbols.Resolver | None = None, retry_ns: int = RETRY_NS
    ) -> None:
        self.url = url
        self.resolver = resolver or symbols.Resolver()
        self.retry_ns = retry_ns
        self._jobs: set[int] = set()
        self._cond = threading.Condition()
        self._stop = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self.rounds = 0  # database rounds done (each: a read, resolutions, a write)
        self.errors = 0

    def start(self) -> None:
        """Start the thread; it first queues the jobs left unanswered, and again every
        `retry_ns`."""
        self._thread = threading.Thread(target=self._run, name="stacklens-resolver", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the round in progress."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        self.resolver.close()

    def notify(self, jobs: Iterable[int]) -> None:
        """Call-site frames of these jobs were just committed (any thread, never blocks)."""
        with self._cond:
            self._jobs.update(int(j) for j in jobs)
            self._cond.notify_all()

    def idle(self, timeout: float = 30.0) -> bool:
        """Wait until no job is queued or being resolved (for tests and the demo)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        conn: psycopg.Connection | None = None
        sweep = True  # queue the jobs left unanswered (at start, then every retry_ns)
        next_sweep = time.monotonic() + self.retry_ns / 1e9
        while True:
            with self._cond:
                while not self._jobs and not self._stop and not sweep:
                    self._cond.wait(max(0.0, next_sweep - time.monotonic()))
                    if time.monotonic() >= next_sweep:
                        sweep = True
                if self._stop:
                    break
                jobs = sorted(self._jobs)
                self._jobs.clear()
                self._busy = True
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True)
                if sweep:
                    now = time.time_ns()
                    queued = stored.jobs_pending(conn, now - CATCH_UP_NS, now - self.retry_ns)
                    jobs = sorted({*jobs, *queued})
                    sweep = False
                    next_sweep = time.monotonic() + self.retry_ns / 1e9
                self.resolve_jobs(conn, jobs)
            except psycopg.Error as exc:
                self.errors += 1
                log.warning("call-site resolver: %s (retried with the next call sites)", exc)
                if conn is not None:
                    conn.close()
                conn = None
                sweep = True  # the jobs of this round are found again by the catch-up
                time.sleep(1.0)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        if conn is not None:
            conn.close()

    def resolve_jobs(self, conn: psycopg.Connection, jobs: list[int]) -> None:
        """Resolve and store every unanswered frame of `jobs` (a fallback older than
        `retry_ns` included), ROUND frames at a time."""
        retry_before = time.time_ns() - self.retry_ns
        while jobs:
            todo = stored.pending(conn, jobs, retry_before, ROUND)
            if not todo:
                return
            by_module: dict[tuple[int, str, str], list[int]] = defaultdict(list)
            for uid, module, bid, offset in todo:
                by_module[(uid, module, bid)].append(offset)
            owners = {uid: symbols.Owner.of(uid) for uid, _, _ in by_module}
            answers, fallbacks = [], []
            for (uid, module, bid), offsets in by_module.items():
                for site in self.resolver.resolve(module, bid, offsets, owners[uid]):
                    if site.quality == symbols.MODULE_OFFSET:
                        fallbacks.append((uid, module, bid, site.offset, site.reason))
                    else:
                        answers.append((module, bid, site.offset, {
                            "quality": site.quality, "function": site.function,
                            "function_offset": site.function_offset, "file": site.file,
                            "line": site.line, "reason": site.reason}))  # fmt: skip
            with conn.transaction():
                stored.store_resolved(conn, answers, fallbacks)
            self.rounds += 1
            if len(todo) < ROUND:
                return
