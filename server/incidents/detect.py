"""The detectors and the join, as pure functions and small state machines (no database):
server/incidents/service.py feeds them the stored series sweep by sweep.

Signals. A detector judges one subject per point in time:
- `congestion` (a link, per sweep): its busier direction's utilisation is at least
  `utilisation`, or its ends' PortXmitWait ticks per second reach `xmit_wait_per_s`, or
  an end's PortXmitWait reached saturation in the sweep (2^32 - 1: its rate is unknown
  from then on). The rule for a pegged PortXmitWait: the sweep in which it gets there
  (it was below at the link's previous point) is congestion of unknown size (the port
  waited the rest of the counter's range); every sweep after it while it stays pegged
  is no evidence either way (unknown: not congested on its account), so a congestion
  that only the pegged counter would hold ends after `clear` such sweeps instead of
  lasting until someone resets the counter; a counter already pegged at the link's
  first point seen is no evidence;
- `link_errors` (a link, per sweep): its ends' error counters rose by at least
  `link_errors` in the sweep, or it is down;
- `link_flap` (a link): at least `flaps` link down/up events of it in the baseline window;
- `imbalance` (a group of parallel links, server/fabric/groups.py, per sweep): a member's
  utilisation is at least `utilisation` while another member's is below half of it (the
  load piles onto one link or rail while its twin idles); its value is the sweep's skew
  (max/mean of the members' utilisations). It opens after `imbalance_sweeps` such sweeps
  in a row (STACKLENS_INCIDENT_IMBALANCE_SWEEPS: the skew must be sustained) and, that
  setting being its guard against blips, is reported from the start (never silent);
- `mpi_slowdown` (a job, per step): time blocked in MPI calls that wait (the spec's
  waits= key: blocking point-to-point sends, receives, Sendrecv and probes, collectives,
  completion calls, RMA synchronisation) per byte of the job's MPI traffic is at least
  `slowdown` times the job's own baseline; each point keeps that time by what it waited
  for (`waiting_ns`), the evidence of the kind of waiting;
- `io_stall` (a job, per step): file I/O time (reads and writes through MPI-IO, POSIX
  and stdio: each layer counts the program's own calls, never those one layer makes
  inside another) per byte read or written is at least `slowdown` times its baseline;
  each point keeps that time by op class (`waiting_ns`: mpiio_write, posix_read, ...),
  the evidence of what the job waited in.
A signal starts when its condition holds `sweeps` points in a row (an error signal: at the
first sweep with errors, an increment is evidence enough) (its start is the start
of the first of them, so detection comes `sweeps` points after the condition starts) and
ends after `clear` quiet points in a row (its end is the end of the last point that held).
A job's signal whose job can no longer be observed (it ended) ends at once, *unobserved*
since the job's last interval (`JobDetector.unobserved`): nobody knows whether it would
have cleared; so does every link signal when the fabric is no longer swept
(`LinkDetector.unobserved`, since the last sweep). A job's baseline is the median time
per byte of its steps in the `baseline_ns` before the step judged (at least
BASELINE_STEPS of them, each with `min_time_ns` of that time, and the middle half of them
within `slowdown` times of each other: a window that holds two phases of a job is no
baseline); it is frozen while the job's signal is open, so a long slowdown does not
become its own baseline. A step whose mix of MPI bytes (shares per traffic category:
point-to-point, collective, RMA) is more than PHASE_CHANGE from its baseline window's
starts a new phase of the job: it is not judged and the baseline starts again from it
(a job that allreduced and now exchanges halos changed what it does; a slowed job moves
its bytes in the same calls, only slower).

The size of an effect. A signal keeps how long its condition held (`held_ns`: its hot
points' durations) and, a job's, the time the job lost (`lost_ns`: per hot step, its
waiting time beyond what its baseline time per byte gives for the step's bytes, averaged
over the ranks that reported in the step: about how much longer the job ran). One
setting, `min_ns` (STACKLENS_INCIDENT_MIN_S), says how big an effect must be: an incident
of a rate detector (congestion, MPI slowdown, I/O stall) is *silent* (`reported` is false:
not stored, not listed, not sent) until its condition has held that long or its jobs have
lost that much time; its severity is minor until its jobs have lost that much in all,
major from there, critical once two jobs have each lost that much (or a link flaps under
jobs). Errors and flaps are counted events and are never silent.

Incidents (`join`): a link signal and the job signals that overlap it in time (within
`slack_ns`) of the jobs whose traffic crosses the link make one incident; the job on a
congested link with the most bytes during it is named the likely aggressor (errors and
flaps have none), the jobs with signals the victims, other jobs on it are listed "on
link". An imbalance is joined the same way over its group's busiest member (`busiest`:
the member that carried the most over its hot sweeps): the jobs with the most bytes
there, the likely aggressor first; its links are the group's members. A job signal that
joins no link signal is an incident of its own.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from server.fabric.groups import skew

#: Detector kinds; link kinds first.
LINK_KINDS = ("congestion", "link_errors", "link_flap")
JOB_KINDS = ("mpi_slowdown", "io_stall")
#: Kinds of a group of parallel links (server/fabric/groups.py).
GROUP_KINDS = ("imbalance",)
KINDS = (*LINK_KINDS, *GROUP_KINDS, *JOB_KINDS)
#: Kinds judged from a rate, which can blip: their incidents stay silent while small.
RATE_KINDS = ("congestion", *JOB_KINDS)
SEVERITIES = ("minor", "major", "critical")
ROLES = ("aggressor", "victim", "on link")
#: Steps with traffic a job's baseline needs.
BASELINE_STEPS = 5
#: Points of evidence kept per subject (older ones are dropped from the series).
MAX_EVIDENCE = 600
#: How far a step's mix of MPI bytes (shares per traffic category) may be from its
#: baseline window's (half the sum of the shares' differences: 0 = the same mix, 1 = no
#: category in common) before the step starts a new phase of the job.
PHASE_CHANGE = 0.5


def mix_distance(a: dict[str, int], b: dict[str, int]) -> float:
    """Half the sum of the differences of two mixes' shares per category (0 to 1; 0 when
    either has no bytes)."""
    total_a, total_b = sum(a.values()), sum(b.values())
    if total_a <= 0 or total_b <= 0:
        return 0.0
    return sum(abs(a.get(k, 0) / total_a - b.get(k, 0) / total_b) for k in a.keys() | b.keys()) / 2


@dataclass(frozen=True)
class Thresholds:
    """The detectors' thresholds (the STACKLENS_INCIDENT_* settings)."""

    utilisation: float = 0.8
    xmit_wait_per_s: float = 1_000_000.0
    sweeps: int = 2
    clear: int = 3
    link_errors: int = 1
    flaps: int = 2
    slowdown: float = 3.0
    baseline_ns: int = 120 * 10**9
    min_time_ns: int = 50 * 10**6
    min_ns: int = 5 * 10**9
    imbalance_sweeps: int = 2

    @classmethod
    def from_settings(cls, settings: Any) -> Thresholds:
        """The thresholds of a stacklens Settings object."""
        return cls(
            utilisation=settings.incident_utilisation,
            xmit_wait_per_s=settings.incident_xmit_wait_per_s,
            sweeps=settings.incident_sweeps,
            clear=settings.incident_clear_sweeps,
            link_errors=settings.incident_link_errors,
            flaps=settings.incident_flaps,
            slowdown=settings.incident_slowdown,
            baseline_ns=int(settings.incident_baseline_s * 1e9),
            min_time_ns=int(settings.incident_min_time_ms * 1e6),
            min_ns=int(settings.incident_min_s * 1e9),
            imbalance_sweeps=settings.incident_imbalance_sweeps,
        )


@dataclass
class Signal:
    """A detector's finding about one subject: active while `end_ns` is None."""

    kind: str
    subject: int  # link id or job id
    start_ns: int
    detected_ns: int
    last_ns: int  # end of the last point whose condition held
    end_ns: int | None = None
    peak: float = 0.0  # utilisation, xmit-wait rate, error count, or factor over baseline
    baseline: float | None = None  # a job signal's time per byte baseline
    evidence: list[dict[str, Any]] = field(default_factory=list)
    held_ns: int = 0  # how long its condition held: the sum of its hot points' durations
    lost_ns: float = 0.0  # a job signal's time lost (module doc), ns
    unobserved_ns: int | None = None  # ended unobserved: its subject's last observation

    @property
    def key(self) -> str:
        """Identity: detector, subject and start."""
        return f"{self.kind}:{self.subject}:{self.start_ns}"


class Streak:
    """The condition of one detector on one subject, point by point: opens a Signal after
    `need` hot points in a row, closes it after `clear` quiet ones."""

    def __init__(self, kind: str, subject: int, need: int, clear: int):
        self.kind, self.subject, self.need, self.clear = kind, subject, need, clear
        # (start_ns, end_ns, value, time lost) of each point of the hot run so far
        self.hot: list[tuple[int, int, float, float]] = []
        self.quiet = 0
        self.open: Signal | None = None
        self.evidence: deque[dict[str, Any]] = deque(maxlen=MAX_EVIDENCE)

    def feed(self, t0_ns: int, t1_ns: int, hot: bool, value: float, point: dict[str, Any],
             lost_ns: float = 0.0) -> Signal | None:  # fmt: skip
        """One point [t0_ns, t1_ns): whether the condition held, its value and (a job's)
        the time lost in it. Returns the signal it opened or closed at this point, else
        None."""
        self.evidence.append(point)
        if self.open is not None:
            if hot:
                self.quiet = 0
                self.open.last_ns = t1_ns
                self.open.peak = max(self.open.peak, value)
                self.open.held_ns += t1_ns - t0_ns
                self.open.lost_ns += lost_ns
            else:
                self.quiet += 1
                if self.quiet >= self.clear:
                    closed, self.open = self.open, None
                    closed.end_ns = closed.last_ns
                    closed.evidence = list(self.evidence)
                    self.hot, self.quiet = [], 0
                    return closed
            self.open.evidence = list(self.evidence)
            return None
        if not hot:
            self.hot = []
            return None
        self.hot.append((t0_ns, t1_ns, value, lost_ns))
        if len(self.hot) < self.need:
            return None
        self.open = Signal(self.kind, self.subject, start_ns=self.hot[0][0], detected_ns=t1_ns,
                           last_ns=t1_ns, peak=max(h[2] for h in self.hot),
                           evidence=list(self.evidence),
                           held_ns=sum(b - a for a, b, _, _ in self.hot),
                           lost_ns=sum(h[3] for h in self.hot))  # fmt: skip
        self.quiet = 0
        return self.open

    def unobserved(self, since_ns: int) -> Signal | None:
        """End the open signal (if any) unobserved since `since_ns`: its subject can no
        longer be observed; it ends then, or at the end of its last hot point if earlier.
        The closed signal, else None."""
        closed, self.open = self.open, None
        self.hot, self.quiet = [], 0
        if closed is None:
            return None
        closed.end_ns = max(closed.start_ns, min(closed.last_ns, since_ns))
        closed.unobserved_ns = since_ns
        closed.evidence = list(self.evidence)
        return closed


# ---- links --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkPoint:
    """One sweep of one link: [t0_ns, t1_ns), utilisation (busier direction over capacity),
    PortXmitWait ticks/s of its ends, error counter increments of its ends (None: unknown),
    whether it is down, whether an end's PortXmitWait is saturated."""

    t0_ns: int
    t1_ns: int
    utilisation: float | None
    xmit_wait_per_s: float | None
    errors: int | None
    down: bool = False
    xmit_wait_saturated: bool = False

    def as_evidence(self) -> dict[str, Any]:
        """The point as an evidence series entry."""
        return {"t_ns": self.t1_ns, "utilisation": self.utilisation,
                "xmit_wait_per_s": self.xmit_wait_per_s, "errors": self.errors,
                "down": self.down,
                "xmit_wait_saturated": self.xmit_wait_saturated}  # fmt: skip


def congested(p: LinkPoint, th: Thresholds, pegged_now: bool = False) -> tuple[bool, float]:
    """Whether a sweep of a link is congested, and how much (the larger of utilisation over
    its threshold and the xmit-wait rate over its threshold, 1 = at the threshold; a
    PortXmitWait that reached saturation in this sweep, `pegged_now`, is congestion of
    unknown size: at least 1; one that stays saturated adds nothing: module doc)."""
    u = (p.utilisation or 0.0) / th.utilisation if th.utilisation else 0.0
    w = (p.xmit_wait_per_s or 0.0) / th.xmit_wait_per_s
    level = max(u, w, 1.0 if pegged_now else 0.0)
    return (not p.down and level >= 1.0), level


def erroring(p: LinkPoint, th: Thresholds) -> tuple[bool, float]:
    """Whether a sweep of a link shows errors (or the link down), and how many errors."""
    n = p.errors or 0
    return (p.down or n >= th.link_errors), float(n)


class LinkDetector:
    """Congestion and error streaks of every link, sweep by sweep, plus flaps from the
    link down/up events."""

    def __init__(self, th: Thresholds):
        self.th = th
        self.streaks: dict[tuple[str, int], Streak] = {}
        self.events: dict[int, deque[int]] = {}  # link -> times of its down/up events
        self.flaps: dict[int, Signal] = {}
        #: link -> whether its PortXmitWait was saturated at its previous point
        self.pegged: dict[int, bool] = {}

    def _streak(self, kind: str, link: int) -> Streak:
        key = (kind, link)
        if key not in self.streaks:
            need = 1 if kind == "link_errors" else self.th.sweeps
            self.streaks[key] = Streak(kind, link, need, self.th.clear)
        return self.streaks[key]

    def sweep(self, points: dict[int, LinkPoint]) -> list[Signal]:
        """Feed one sweep (link id -> its point); the signals opened or closed by it."""
        changed = []
        for link, p in points.items():
            pegged_now = p.xmit_wait_saturated and self.pegged.get(link) is False
            self.pegged[link] = p.xmit_wait_saturated
            for kind in ("congestion", "link_errors"):
                if kind == "congestion":
                    hot, value = congested(p, self.th, pegged_now)
                else:
                    hot, value = erroring(p, self.th)
                if not hot and (kind, link) not in self.streaks:
                    continue  # quiet links keep no state
                streak = self._streak(kind, link)
                point = {**p.as_evidence(), "xmit_wait_pegged_now": pegged_now}
                signal = streak.feed(p.t0_ns, p.t1_ns, hot, value, point)
                if signal is not None:
                    changed.append(signal)
                if streak.open is None and not streak.hot:
                    del self.streaks[(kind, link)]
        return changed

    def link_events(self, link: int, times_ns: list[int], now_ns: int) -> Signal | None:
        """Feed a link's down/up event times (new ones); a flap signal opened or closed."""
        seen = self.events.setdefault(link, deque())
        seen.extend(sorted(times_ns))
        while seen and seen[0] < now_ns - self.th.baseline_ns:
            seen.popleft()
        flap = self.flaps.get(link)
        if flap is None and len(seen) >= self.th.flaps:
            flap = Signal("link_flap", link, start_ns=seen[0], detected_ns=now_ns,
                          last_ns=seen[-1], peak=float(len(seen)),
                          evidence=[{"t_ns": t} for t in seen])  # fmt: skip
            self.flaps[link] = flap
            return flap
        if flap is not None:
            flap.last_ns = seen[-1] if seen else flap.last_ns
            flap.peak = max(flap.peak, float(len(seen)))
            flap.evidence = [{"t_ns": t} for t in seen] or flap.evidence
            if not seen:
                flap.end_ns = flap.last_ns
                del self.flaps[link]
                del self.events[link]
                return flap
        elif not seen:
            del self.events[link]
        return None

    def active(self) -> list[Signal]:
        """Every open link signal."""
        out = [s.open for s in self.streaks.values() if s.open is not None]
        return out + list(self.flaps.values())

    def unobserved(self, since_ns: int) -> list[Signal]:
        """The fabric can no longer be observed (no sweep since the one that ended at
        `since_ns`): every open link signal ends unobserved, and the links start afresh
        when sweeps come back; the signals are returned."""
        closed = [s for s in (st.unobserved(since_ns) for st in self.streaks.values()) if s]
        for flap in self.flaps.values():  # its events were seen (discoveries) until last_ns
            flap.end_ns = flap.last_ns
            flap.unobserved_ns = max(since_ns, flap.last_ns)
            closed.append(flap)
        self.streaks, self.flaps, self.events = {}, {}, {}
        return closed


# ---- groups of parallel links ----------------------------------------------------------


def imbalanced(utilisations: dict[int, float | None], th: Thresholds) -> tuple[bool, float]:
    """Whether one sweep of a group (member link id -> its utilisation, None unknown) is
    imbalanced: a member at or above `utilisation` while another is below half of it; and
    its skew (max/mean of the known utilisations, 0 when undefined)."""
    known = [u for u in utilisations.values() if u is not None]
    if len(known) < 2:
        return False, 0.0
    max_mean, _ = skew(known)
    hot = max(known) >= th.utilisation and min(known) < th.utilisation / 2
    return hot, max_mean or 0.0


class GroupDetector:
    """Imbalance streaks of every group of parallel links, sweep by sweep."""

    def __init__(self, th: Thresholds):
        self.th = th
        self.streaks: dict[int, Streak] = {}

    def sweep(self, t0_ns: int, t1_ns: int, groups: dict[int, dict[int, float | None]]
              ) -> list[Signal]:  # fmt: skip
        """Feed one sweep [t0_ns, t1_ns): group id -> its members' utilisations; the
        signals opened or closed by it. A point's evidence: t_ns, max_mean, cv and the
        members' utilisations (link id -> utilisation)."""
        changed = []
        for group, utils in groups.items():
            hot, value = imbalanced(utils, self.th)
            if not hot and group not in self.streaks:
                continue  # balanced groups keep no state
            streak = self.streaks.get(group)
            if streak is None:
                streak = self.streaks[group] = Streak(
                    "imbalance", group, self.th.imbalance_sweeps, self.th.clear
                )
            max_mean, cv = skew([u for u in utils.values() if u is not None])
            point = {"t_ns": t1_ns, "max_mean": max_mean, "cv": cv,
                     "members": {str(k): v for k, v in sorted(utils.items())}}  # fmt: skip
            signal = streak.feed(t0_ns, t1_ns, hot, value, point)
            if signal is not None:
                changed.append(signal)
            if streak.open is None and not streak.hot:
                del self.streaks[group]
        return changed

    def active(self) -> list[Signal]:
        """Every open imbalance signal."""
        return [s.open for s in self.streaks.values() if s.open is not None]

    def unobserved(self, since_ns: int) -> list[Signal]:
        """The fabric is no longer swept: every open imbalance ends unobserved since the
        last sweep; they are returned and the groups start afresh."""
        closed = [s for s in (st.unobserved(since_ns) for st in self.streaks.values()) if s]
        self.streaks = {}
        return closed


def busiest(signal: Signal) -> int | None:
    """The member of an imbalance signal's group that carried the most over its hot points
    (summed utilisation; ties: lowest link id), from its evidence."""
    last = signal.last_ns if signal.end_ns is None else signal.end_ns
    total: dict[int, float] = {}
    for point in signal.evidence:
        if signal.start_ns < point["t_ns"] <= last:
            for link, u in point.get("members", {}).items():
                total[int(link)] = total.get(int(link), 0.0) + (u or 0.0)
    return min(total, key=lambda k: (-total[k], k)) if total else None


# ---- jobs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobStep:
    """One step of one job: [t0_ns, t1_ns), the time (summed over ranks) blocked in MPI
    calls that wait (the spec's waits= key: point-to-point, collectives, completion, RMA
    synchronisation) and the MPI bytes; the file I/O time and bytes; how many ranks
    reported in it; the blocked time by what it waited for (`waiting_ns`: p2p, coll,
    completion, rma -> ns; the evidence of a slowdown's kind of waiting); its MPI bytes
    per traffic category (`mix`: mpi_p2p, mpi_coll, mpi_rma -> bytes); its file I/O time
    by op class (`io_waiting_ns`: mpiio_read, mpiio_write, posix_read, ... -> ns; the
    evidence of an I/O stall's kind of waiting)."""

    t0_ns: int
    t1_ns: int
    mpi_time_ns: int
    mpi_bytes: int
    io_time_ns: int
    io_bytes: int
    ranks: int = 1
    waiting_ns: dict[str, int] = field(default_factory=dict)
    mix: dict[str, int] = field(default_factory=dict)
    io_waiting_ns: dict[str, int] = field(default_factory=dict)


def per_byte(time_ns: int, nbytes: int, min_time_ns: int) -> float | None:
    """Time per byte (ns/B) of a step with enough time and some bytes, else None."""
    if nbytes <= 0 or time_ns < min_time_ns or time_ns <= 0:
        return None
    return time_ns / nbytes


class JobDetector:
    """MPI slowdown and I/O stall streaks of one job, step by step, each against the job's
    own baseline."""

    def __init__(self, job: int, th: Thresholds):
        self.job, self.th = job, th
        self.history: dict[str, deque[tuple[int, float]]] = {k: deque() for k in JOB_KINDS}
        self.streaks = {k: Streak(k, job, th.sweeps, th.clear) for k in JOB_KINDS}
        self.frozen: dict[str, float] = {}
        #: the mix of MPI bytes (per category) of each step in the slowdown's baseline window
        self.mixes: deque[tuple[int, dict[str, int]]] = deque()

    def baseline(self, kind: str, now_ns: int) -> float | None:
        """The median time per byte of the baseline window before `now_ns`, or the frozen
        one of an open signal. None, nothing to judge against, with fewer than
        BASELINE_STEPS steps, or with steps that disagree: the middle half of them spread
        more than `slowdown` times (a job changing phase, such as one that reads and
        broadcasts its input before it computes, or one too erratic to judge)."""
        if kind in self.frozen:
            return self.frozen[kind]
        past = self.history[kind]
        while past and past[0][0] < now_ns - self.th.baseline_ns:
            past.popleft()
        if len(past) < BASELINE_STEPS:
            return None
        values = [v for _, v in past]
        low, median, high = statistics.quantiles(values, n=4)
        return None if high > low * self.th.slowdown else median

    def step(self, s: JobStep) -> list[Signal]:
        """Feed one complete step; the signals it opened or closed."""
        changed = []
        for kind, t, n in (("mpi_slowdown", s.mpi_time_ns, s.mpi_bytes),
                           ("io_stall", s.io_time_ns, s.io_bytes)):  # fmt: skip
            ratio = per_byte(t, n, self.th.min_time_ns)
            base = self.baseline(kind, s.t0_ns)
            factor = ratio / base if ratio is not None and base else 0.0
            hot = base is not None and factor >= self.th.slowdown
            streak = self.streaks[kind]
            point: dict[str, Any] = {
                "t_ns": s.t1_ns, "time_ns": t, "bytes": n, "per_byte_ns": ratio,
                "baseline_per_byte_ns": base,
            }  # fmt: skip
            waiting = s.waiting_ns if kind == "mpi_slowdown" else s.io_waiting_ns
            if waiting:
                point["waiting_ns"] = waiting
            if ratio is None and streak.open is None and not streak.hot:
                streak.evidence.append(point)
                continue  # nothing to judge; a quiet step without traffic does not count
            if kind == "mpi_slowdown" and streak.open is None and self._new_phase(s):
                point["phase_change"] = True  # not judged: a new baseline from this step on
                point["baseline_per_byte_ns"] = base = None
                hot, factor = False, 0.0
                self.history[kind].clear()
                self.mixes.clear()
            lost = max(0.0, t - base * n) / max(s.ranks, 1) if hot and base else 0.0
            signal = streak.feed(s.t0_ns, s.t1_ns, hot, factor, point, lost)
            if signal is not None:
                if signal.end_ns is None:
                    assert base is not None
                    self.frozen[kind] = signal.baseline = base
                else:
                    self.frozen.pop(kind, None)
                changed.append(signal)
            if not hot and ratio is not None and streak.open is None:
                self.history[kind].append((s.t1_ns, ratio))
                if kind == "mpi_slowdown":
                    self.mixes.append((s.t1_ns, s.mix))
        return changed

    def _new_phase(self, s: JobStep) -> bool:
        """Whether a step's mix of MPI bytes is more than PHASE_CHANGE from its baseline
        window's (the job moves its bytes in other calls now: a new phase, not a
        slowdown)."""
        while self.mixes and self.mixes[0][0] < s.t0_ns - self.th.baseline_ns:
            self.mixes.popleft()
        window: dict[str, int] = {}
        for _, mix in self.mixes:
            for k, n in mix.items():
                window[k] = window.get(k, 0) + n
        return mix_distance(s.mix, window) > PHASE_CHANGE

    def unobserved(self, since_ns: int) -> list[Signal]:
        """The job can no longer be observed (it ended; its last interval ended at
        `since_ns`): its open signals end unobserved; they are returned."""
        closed = [s for s in (st.unobserved(since_ns) for st in self.streaks.values()) if s]
        self.frozen.clear()
        return closed

    def active(self) -> list[Signal]:
        """The job's open signals."""
        return [s.open for s in self.streaks.values() if s.open is not None]


# ---- the join ------------------------------------------------------------------------------


@dataclass
class Member:
    """A job of an incident: its role, its own signals' kinds, its bytes on the links and
    the time it lost (its signals' `lost_ns`)."""

    job: int
    role: str
    signals: list[str]
    link_bytes: int | None
    lost_ns: float = 0.0


@dataclass
class Joined:
    """An incident as the join makes it: its opening signal, the other signals joined, the
    jobs with their roles, the size of its effect (how long its opening signal's condition
    held, the time its jobs lost, how many jobs were hit: those with a signal of their
    own), its severity, whether it is big enough to be reported (`reported`), and, ended
    unobserved, its opening signal's last observation."""

    key: str
    kind: str
    signals: list[Signal]
    links: list[int]
    members: list[Member]
    severity: str
    start_ns: int
    end_ns: int | None
    held_ns: int
    lost_ns: float
    hit: int
    reported: bool
    unobserved_ns: int | None


def overlaps(a: Signal, b: Signal, slack_ns: int) -> bool:
    """Whether two signals overlap in time, within `slack_ns`."""
    a_end = a.last_ns if a.end_ns is None else a.end_ns
    b_end = b.last_ns if b.end_ns is None else b.end_ns
    return a.start_ns <= b_end + slack_ns and b.start_ns <= a_end + slack_ns


def severity(kind: str, lost_by_job: list[float], on_link: int, th: Thresholds) -> str:
    """From the size of the effect (`lost_by_job`: the time each job hit lost; `on_link`:
    the jobs on the link): critical when two or more jobs have each lost `min_ns`, or a
    link flaps under jobs; major when the jobs together have lost `min_ns`; else minor."""
    if sum(lost >= th.min_ns for lost in lost_by_job) >= 2 or (kind == "link_flap" and on_link):
        return "critical"
    return "major" if sum(lost_by_job) >= th.min_ns else "minor"


def _sized(key: str, signals: list[Signal], links: list[int], members: list[Member],
           th: Thresholds) -> Joined:  # fmt: skip
    """The incident of these signals (the opening one first) and members, with its size,
    severity and whether it is reported (module doc)."""
    lead = signals[0]
    hit = [m.lost_ns for m in members if m.signals]
    lost = sum(hit)
    big = lead.held_ns >= th.min_ns or lost >= th.min_ns
    return Joined(
        key=key,
        kind=lead.kind,
        signals=signals,
        links=links,
        members=members,
        severity=severity(lead.kind, hit, len(members), th),
        start_ns=min(s.start_ns for s in signals),
        end_ns=lead.end_ns,
        held_ns=lead.held_ns,
        lost_ns=lost,
        hit=len(hit),
        reported=big or lead.kind not in RATE_KINDS,
        unobserved_ns=lead.unobserved_ns,
    )


def join(
    link_signal: Signal,
    job_signals: list[Signal],
    bytes_on_link: dict[int, int | None],
    th: Thresholds,
    slack_ns: int,
    links: list[int] | None = None,
) -> Joined:
    """The incident of a link signal (or a group's imbalance, whose `links` are the group's
    members and `bytes_on_link` the jobs on its busiest member): `bytes_on_link` names the
    jobs whose traffic crosses the link during it (job -> bytes, None: on it, bytes
    unknown); the job signals of those jobs overlapping it join as victims; the job with
    the most bytes (> 0) on a congested link (or an imbalanced group's busiest member) is
    the likely aggressor (even if it also slowed: then it is named aggressor only). Errors
    and flaps are the link's own: they have no aggressor."""
    joined = [s for s in job_signals
              if s.subject in bytes_on_link and overlaps(s, link_signal, slack_ns)]  # fmt: skip
    by_job: dict[int, list[Signal]] = {}
    for s in joined:
        by_job.setdefault(s.subject, []).append(s)
    loaded = link_signal.kind in ("congestion", "imbalance")
    known = {j: b for j, b in bytes_on_link.items() if b and loaded}
    aggressor = max(sorted(known), key=lambda j: known[j]) if known else None
    members = []
    for j in sorted(bytes_on_link, key=lambda j: (-(bytes_on_link[j] or 0), j)):
        role = "aggressor" if j == aggressor else "victim" if j in by_job else "on link"
        own = by_job.get(j, [])
        members.append(Member(j, role, sorted(s.kind for s in own), bytes_on_link[j],
                              sum(s.lost_ns for s in own)))  # fmt: skip
    return _sized(link_signal.key, [link_signal, *joined],
                  [link_signal.subject] if links is None else links, members, th)  # fmt: skip


def alone(job_signal: Signal, th: Thresholds) -> Joined:
    """The incident of a job signal that joins no link signal: the job is its victim."""
    member = Member(job_signal.subject, "victim", [job_signal.kind], None, job_signal.lost_ns)
    return _sized(job_signal.key, [job_signal], [], [member], th)
