"""Durations counted into fixed buckets, for /metrics histograms (Prometheus' cumulative
form): the fabric sampler's sweeps and discoveries, the web server's requests. Kept by the
part that measures; read by server/metrics at scrape time. Thread-safe enough for one
writer per instance (a sweep thread, the event loop): readers see a consistent sum only
approximately, as Prometheus clients do."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Upper bounds (s) of the buckets of every duration histogram: 1 ms to 60 s.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0, 60.0)  # fmt: skip


@dataclass
class Timings:
    """How many durations fell at or below each bucket bound (not cumulative), their count
    and their sum; the last one observed."""

    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    count: int = 0
    total_s: float = 0.0
    last_s: float = 0.0

    def observe(self, seconds: float) -> None:
        """Count one duration."""
        for i, bound in enumerate(DURATION_BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1
                break
        self.count += 1
        self.total_s += seconds
        self.last_s = seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' buckets: (`le` bound as text, durations at or below it), `+Inf` last."""
        buckets, running = [], 0
        for bound, n in zip(DURATION_BUCKETS, self.counts, strict=True):
            running += n
            buckets.append((repr(bound), running))
        buckets.append(("+Inf", self.count))
        return buckets
