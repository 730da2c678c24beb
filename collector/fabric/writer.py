"""The fabric sampler's store writer: sweeps are stored off the sweep schedule.

The sampler hands every database operation (a topology, a sweep's samples and the ports it
brings, ports to forget) to a SweepWriter, in order; a thread of the writer's own runs them
against the FabricStore one after the other, so the sweeps keep their period while
PostgreSQL is slow. The sweeps waiting one after another are stored together (one
transaction, one upsert per port and span: FabricStore.write_sweeps), so a writer behind
catches up. Memory is bounded: at most `max_pending` sweeps' samples wait. When one more
comes, the oldest waiting sweep is merged into the next one waiting
(counters.merge_sweeps: each port's sample then spans both intervals with their deltas
summed), counted in `merged` and logged: the byte, packet and error totals stay exact, only
the time resolution of that stretch is coarser (the rollup's sample count says so). The
other operations are rare and never merged. Until start() (a sampler stepped by hand, not
by its loop), each operation runs at once in the caller's thread and its errors are the
caller's. In the thread, a failed operation is counted and logged, and `take_failed()`
tells the sampler to discover afresh (the topology and port ids are written again).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from collector.fabric.counters import DeltaSweep, merge_sweeps
from collector.fabric.store import FabricStore
from stacklens.timings import Timings

if TYPE_CHECKING:
    from collector.fabric.service import RateLimitedLog

#: Sweeps' samples waiting to be stored at most (STACKLENS_FABRIC_STORE_QUEUE's default).
DEFAULT_PENDING = 8


class SweepWriter:
    """Runs a FabricStore's operations in order, in a thread once started (see the module)."""

    def __init__(self, store: FabricStore, warnings: RateLimitedLog,
                 max_pending: int = DEFAULT_PENDING):  # fmt: skip
        self.store = store
        self.warnings = warnings
        self.max_pending = max_pending
        #: operations waiting, in order: a sweep (and whether its ports are to be
        #: registered first) or any other operation
        self._queue: deque[tuple[DeltaSweep, bool] | Callable[[], object]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._busy = False
        #: sweeps waiting now; sweeps stored, merged into the next (the store behind), failed
        #: to store
        self.pending = 0
        self.stored = 0
        self.merged = 0
        self.failed = 0
        self._failed_since = False
        #: durations of the sweeps' stores (/metrics)
        self.store_timings = Timings()

    def start(self) -> None:
        """Run the operations handed over from now on in the writer's thread."""
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="stacklens-fabric-writer",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def stop(self) -> None:
        """Store what waits, then end the thread (operations run at once again after)."""
        if self._thread is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join()
        self._thread = None

    def samples(self, sweep: DeltaSweep, register: bool = False) -> None:
        """Store a sweep's samples (with `register`, its ports not known yet first: a source
        without topology), merging the oldest sweep waiting into the next if `max_pending`
        wait already."""
        self._put((sweep, register))

    def run(self, operation: Callable[..., object], *args: object) -> None:
        """Run `operation(*args)` (a FabricStore method) after what was handed over before."""
        self._put(lambda: operation(*args))

    def idle(self) -> bool:
        """Whether nothing waits and nothing is being stored."""
        with self._cond:
            return not self._queue and not self._busy

    def take_failed(self) -> bool:
        """Whether an operation failed in the thread since the last call."""
        with self._cond:
            failed, self._failed_since = self._failed_since, False
        return failed

    def _put(self, item: tuple[DeltaSweep, bool] | Callable[[], object]) -> None:
        if self._thread is None:
            self._do([item])
            return
        with self._cond:
            if isinstance(item, tuple) and self.pending >= self.max_pending:
                item = self._merge_oldest(item)
            self._queue.append(item)
            self.pending += isinstance(item, tuple)
            self._cond.notify_all()

    def _merge_oldest(self, coming: tuple[DeltaSweep, bool]) -> tuple[DeltaSweep, bool]:
        """The oldest sweep waiting merged into the next sweep waiting, in that one's place
        (or, when it is the only one, into `coming`); returns what is to be queued after
        them (`coming`, merged or not); under the lock."""
        sweeps = [i for i, x in enumerate(self._queue) if isinstance(x, tuple)]
        oldest = self._queue[sweeps[0]]
        newer = self._queue[sweeps[1]] if len(sweeps) > 1 else coming
        assert isinstance(oldest, tuple) and isinstance(newer, tuple)
        merged = (merge_sweeps(oldest[0], newer[0]), oldest[1] or newer[1])
        if len(sweeps) > 1:
            self._queue[sweeps[1]] = merged
        else:
            coming = merged
        del self._queue[sweeps[0]]
        self.pending -= 1
        self.merged += 1
        self.warnings.warning(
            "merged",
            "fabric store behind: the sweep of %d ports ending at %d ns was merged into the "
            "next (%d sweeps waiting at most; %d merged so far)",
            len(oldest[0].raw), oldest[0].raw.t_end_ns, self.max_pending, self.merged,
        )  # fmt: skip
        return coming

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                # an operation, or the sweeps waiting one after another from the first
                batch = [self._queue.popleft()]
                while (
                    isinstance(batch[0], tuple)
                    and self._queue
                    and isinstance(self._queue[0], tuple)
                ):
                    batch.append(self._queue.popleft())
                self.pending -= sum(isinstance(x, tuple) for x in batch)
                self._busy = True
            try:
                self._do(batch)
            except Exception as exc:  # keep storing: the sampler discovers afresh
                with self._cond:
                    self.failed += 1
                    self._failed_since = True
                self.warnings.warning("store", "fabric store failed: %s", exc)
            finally:
                with self._cond:
                    self._busy = False

    def _do(self, batch: list[tuple[DeltaSweep, bool] | Callable[[], object]]) -> None:
        """Run one operation, or store sweeps (one transaction)."""
        sweeps = [x for x in batch if isinstance(x, tuple)]
        if not sweeps:
            for operation in batch:
                assert callable(operation)
                operation()
            return
        started = time.monotonic()
        for sweep, register in sweeps:
            if register:
                self.store.ensure_ports(sweep.raw, sweep.raw.t_end_ns)
        self.store.write_sweeps([sweep for sweep, _ in sweeps])
        self.store_timings.observe(time.monotonic() - started)
        self.stored += len(sweeps)
