"""The incident detector service: started by `stacklens up` next to the collector and the
fabric sampler (in the web app's lifespan, like the collector), it wakes at a quarter of
the sweep period, and when a new sweep is stored (or a job step has settled) it runs one
`tick` in a worker thread:

1. the sweeps stored since the last tick, in order, through the link detectors
   (congestion, errors), and the link down/up events stored since (flaps); when no sweep
   has come for STALE_SWEEPS sweep periods (the configured one, or the measured one if
   longer: the fabric is no longer swept, its pages say STALE), every open link signal
   ends unobserved since the last sweep (also right after a start on a stale fabric);
2. every job's whole-second steps that have settled (SETTLE_NS past their end, so late
   frames are in) through its own detectors (MPI slowdown, I/O stall); a job that ended
   with a signal open ends it unobserved since its last interval (not "cleared");
3. the join: each link signal with the overlapping job signals of the jobs whose traffic
   crosses it (the traffic domain's attribution of that link alone over the signal's time,
   both directions, every category; read again every REFRESH_NS while it lasts, and when it
   ends, and in the pass that first reports it)
   becomes an incident, the job with the most bytes on a congested link its likely
   aggressor (errors and flaps have none); a
   job signal that joins no link signal within `sweeps` sweep periods is an incident of
   its own;
4. every open incident (and one that just closed) big enough to report (detect.py: the
   size of an effect, STACKLENS_INCIDENT_MIN_S) is stored, a smaller one is silent (never
   stored while small, forgotten if it ends so); a pass writes only what changed since
   the service last wrote an incident (its row, with updated_ns, when a column or a job
   changed; the jobs' rows that changed), nothing when nothing did; its opening, a
   change of its severity or of a job's role or signals ("updated") and its closing are
   sent to the webhook if one is set, each with the incident's URL and a line of text
   (message.py). Ids are drawn only for an incident stored the first time. A job's
   incident of its own that a link signal joins later becomes the link's (keeping its id
   and URL) if the link's is new, else it is merged into the link's (deleted; "merged"
   to the webhook).

After a restart the first pass replays enough sweeps and steps to judge every condition
afresh: an incident the earlier server left open whose condition still holds (its
detector finds a signal of the same kind on the same subject) is taken over with its key
and id; any other is closed at its newest evidence point and "closed" goes to the
webhook (its jobs' signals found again over its time stay joined to it).

Why a service of its own and not the fabric sampler's loop: the detectors read jobs'
series as well as the fabric's, the sampler belongs to the collector layer (which may not
import the server's repositories) and its sweep period must not stretch with detection
work; several collectors may share a database, while one server detects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from server.compare.regression import RegressionCheck
from server.compare.service import Around
from server.fabric import repository as fabric
from server.fabric.groups import Group
from server.fabric.snapshot import STALE_SWEEPS
from server.incidents import message
from server.incidents import repository as repo
from server.incidents.detect import (
    GROUP_KINDS,
    JOB_KINDS,
    GroupDetector,
    JobDetector,
    JobStep,
    Joined,
    LinkDetector,
    Signal,
    Thresholds,
    alone,
    busiest,
    join,
    overlaps,
)
from server.incidents.webhook import Webhook
from server.query_params import Window
from server.traffic.repository import TrafficConfig
from server.traffic.service import DIRECTIONS, AttributionCache
from stacklens.timings import Timings

log = logging.getLogger(__name__)

SECOND = 10**9
#: How long after a step's end its frames are taken to be in.
SETTLE_NS = 1_500_000_000
#: How far back each pass reads link events again (an event is stored after its time).
EVENT_MARGIN_NS = 10 * SECOND
#: How often an open incident's jobs' bytes on its links, ranks and files are read again.
REFRESH_NS = 5 * SECOND
#: Ranks of a job an incident lists at most (its late and waiting ones first).
RANKS_LISTED = 16
#: A member's details as last read: when, its ranks, files, late and waiting ranks, and per
#: signal kind of its own the call sites whose time rose.
_Details = tuple[int, list[int], list[str], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]
#: How the kinds are named in titles.
KIND_TEXT = {
    "congestion": "Congestion",
    "link_errors": "Link errors",
    "link_flap": "Link flapping",
    "mpi_slowdown": "MPI slowdown",
    "io_stall": "I/O stall",
    "imbalance": "Imbalance",
    "regression": "Regression",
}


@dataclass
class ServiceStats:
    """What the service did (shown on /metrics)."""

    ticks: int = 0
    errors: int = 0
    opened: int = 0
    closed: int = 0
    silenced: int = 0  # incidents that ended while too small to report (never stored)
    last_tick_s: float = 0.0
    #: durations of the detector passes (/metrics: stacklens_incident_pass_seconds)
    pass_timings: Timings = field(default_factory=Timings)


class IncidentService:
    """Detects incidents on the stored series of `engine`'s database (see the module)."""

    def __init__(
        self,
        engine: Engine,
        thresholds: Thresholds,
        sweep_interval_s: float = 1.0,
        traffic: TrafficConfig | None = None,
        webhook: Webhook | None = None,
        clock: Callable[[], int] = time.time_ns,
        base_url: str = "http://127.0.0.1:7450",
        regression_factor: float = 0.0,
    ):
        self.engine = engine
        self.base_url = base_url  # the dashboard's address, for the incidents' URLs
        self.th = thresholds
        self.interval_ns = int(sweep_interval_s * SECOND)
        self.webhook = webhook
        self.traffic = traffic or TrafficConfig()
        self.attributions = AttributionCache(max_age_s=REFRESH_NS / SECOND)
        #: the regression check after each run (server/compare/regression.py); None: off
        self.regression = (RegressionCheck(regression_factor,
                                           Around(self.attributions, self.traffic))
                           if regression_factor else None)  # fmt: skip
        self.clock = clock
        self.stats = ServiceStats()
        self.links = LinkDetector(thresholds)
        self.groups = GroupDetector(thresholds)
        self.jobs: dict[int, JobDetector] = {}
        self.sweep_after: int | None = None  # newest sweep fed
        self.sweep_gaps: deque[int] = deque(maxlen=9)  # between the latest sweeps fed
        self.last_fed: int | None = None  # end of the newest sweep fed
        self.events_after: int | None = None
        self.events_seen: dict[int, int] = {}  # event id -> its time, of those read lately
        self.steps_after: int | None = None  # end of the newest step fed
        self.ended: list[Signal] = []  # closed since the last tick, to store once more
        self.joined: dict[str, str] = {}  # job signal key -> the link incident it joined
        self.stored: dict[str, int] = {}  # open incident key -> id
        self.shapes: dict[str, tuple[str, tuple[tuple[Any, ...], ...]]] = {}  # severity, roles
        #: open incident key -> its row (less updated_ns), jobs and updated_ns as last saved
        self.written: dict[str, tuple[dict[str, Any], list[dict[str, Any]], int]] = {}
        self.resumed = False  # whether the incidents left open were taken over
        self._task: asyncio.Task[None] | None = None
        self._view: repo.FabricView | None = None
        # per open incident: its jobs' bytes on the link, their ranks and files (REFRESH_NS)
        self._on: dict[str, tuple[int, dict[int, int | None]]] = {}
        #: per (incident, job, kind, role): when read, ranks, files, named ranks
        self._details: dict[tuple[str, int, str, str], _Details] = {}

    # ---- running -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start detecting (and the webhook's sender)."""
        if self.webhook is not None:
            await self.webhook.start()
        self._task = asyncio.create_task(self._run(), name="incidents")

    async def stop(self) -> None:
        """Stop detecting."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.webhook is not None:
            await self.webhook.stop()

    async def _run(self) -> None:
        poll = max(0.05, self.interval_ns / SECOND / 4)
        while True:
            try:
                await asyncio.to_thread(self.tick)
            except Exception:  # the database may be away for a while: try again
                self.stats.errors += 1
                if self.stats.errors in (1, 10) or self.stats.errors % 100 == 0:
                    log.exception("incident detection failed (%d times)", self.stats.errors)
            await asyncio.sleep(poll)

    # ---- one tick ------------------------------------------------------------------------

    def tick(self) -> list[dict[str, Any]]:
        """Feed what is new to the detectors, join, store; the webhook messages it made
        (also posted)."""
        started = time.monotonic()
        now = self.clock()
        with Session(self.engine) as session:
            version = fabric.topology_version(session)
            if self._view is None or version is None or version != self._view.version:
                self._view = repo.FabricView(session)  # a new discovery was stored
            links = self._view.links
            fed = self._fabric(session, links, now, self._view.groups)
            fed |= self._events(session, now)
            fed |= self._jobs(session, now)
            messages = self._store(session, links, now) if fed else []
            if self.regression is not None:
                for incident_id, row in self.regression.check(session, now):
                    messages.append(self._message(session, "opened", incident_id, row))
            session.commit()
        self.stats.ticks += 1
        self.stats.last_tick_s = time.monotonic() - started
        self.stats.pass_timings.observe(self.stats.last_tick_s)
        for sent in messages:
            if self.webhook is not None:
                self.webhook.post(sent)
        return messages

    def _fabric(self, session: Session, links: list[dict[str, Any]], now: int,
                groups: dict[int, Group]) -> bool:  # fmt: skip
        newest = repo.newest_sweep(session)
        if newest is None:
            return False
        fed = newest != self.sweep_after
        if fed:
            if self.sweep_after is None:  # enough sweeps before now to judge streaks afresh
                self.sweep_after = newest - (self.th.sweeps + self.th.clear + 1) * self.interval_ns
            for ts, points in repo.sweeps_after(session, self.sweep_after, newest, links):
                self.ended += [s for s in self.links.sweep(points) if s.end_ns is not None]
                self.ended += [s for s in self._groups_sweep(ts, points, groups)
                               if s.end_ns is not None]  # fmt: skip
                if self.last_fed is not None:
                    self.sweep_gaps.append(ts - self.last_fed)
                self.last_fed = ts
            self.sweep_after = newest
        # no sweep for STALE_SWEEPS sweep periods (the fabric pages say STALE from then):
        # the open link signals end unobserved since the last sweep
        period = max(self.interval_ns, int(statistics.median(self.sweep_gaps or [0])))
        if now - newest > STALE_SWEEPS * period and (self.links.active() or self.groups.active()):
            self.ended += self.links.unobserved(newest) + self.groups.unobserved(newest)
            return True
        return fed

    def _groups_sweep(self, ts: int, points: dict[int, Any], groups: dict[int, Group]
                      ) -> list[Signal]:  # fmt: skip
        """Feed one sweep's link points to the imbalance detector: per group with a member
        swept, its members' utilisations (None: not swept or unknown)."""
        utils = {}
        t0 = ts
        for group in groups.values():
            swept = [points[m] for m in group.members if m in points]
            if not swept:
                continue
            t0 = min(t0, *(p.t0_ns for p in swept))
            utils[group.id] = {m: points[m].utilisation if m in points else None
                               for m in group.members}  # fmt: skip
        return self.groups.sweep(t0, ts, utils)

    def _events(self, session: Session, now: int) -> bool:
        """Feed the link down/up events stored since the last tick (and age the old ones:
        a flap ends when its events leave the baseline window)."""
        # read again from EVENT_MARGIN_NS back: an event is stored after its time
        after = now - self.th.baseline_ns if self.events_after is None else self.events_after
        events = repo.link_events_after(session, after - EVENT_MARGIN_NS, now)
        new: dict[int, list[int]] = {}
        for link, seen in events.items():
            times = [ts for event_id, ts in seen if event_id not in self.events_seen]
            self.events_seen.update(seen)
            if times:
                new[link] = times
        self.events_seen = {i: ts for i, ts in self.events_seen.items()
                            if ts > after - 2 * EVENT_MARGIN_NS}  # fmt: skip
        changed = False
        for link in set(new) | set(self.links.events):
            signal = self.links.link_events(link, new.get(link, []), now)
            if signal is not None and signal.end_ns is not None:
                self.ended.append(signal)
            changed |= signal is not None
        self.events_after = now
        return bool(new) or changed

    def _jobs(self, session: Session, now: int) -> bool:
        upto = (now - SETTLE_NS) // SECOND * SECOND
        if self.steps_after is None:
            self.steps_after = upto - self.th.baseline_ns
        if upto <= self.steps_after:
            return False
        steps = repo.job_steps(session, self.steps_after, upto)
        watched = [job for job, detector in self.jobs.items() if detector.active()]
        for job in watched:  # open signals see the quiet steps too
            steps.setdefault(job, [])
        gone = repo.ended_jobs(session, watched)  # job -> the end of its last interval
        for job, rows in steps.items():
            detector = self.jobs.setdefault(job, JobDetector(job, self.th))
            have = {s.t0_ns for s in rows}
            last = gone.get(job)  # its last interval is in the step [last // 1 s, + 1 s)
            after = None if last is None else last // SECOND * SECOND + SECOND
            if detector.active():  # a step without traffic is quiet for an open signal,
                stop = upto if after is None else min(upto, after)  # until the job ended
                rows = sorted(rows + [JobStep(t, t + SECOND, 0, 0, 0, 0)
                                      for t in range(self.steps_after, stop, SECOND)
                                      if t not in have], key=lambda s: s.t0_ns)  # fmt: skip
            for step in rows:
                self.ended += [s for s in detector.step(step) if s.end_ns is not None]
            if last is not None and after is not None and after <= upto:  # all its steps fed
                self.ended += detector.unobserved(last)
        for job in [j for j, d in self.jobs.items() if not d.active() and j not in steps]:
            last = max((t for q in self.jobs[job].history.values() for t, _ in q), default=0)
            if last < upto - self.th.baseline_ns:
                del self.jobs[job]  # its baseline has aged out
        self.steps_after = upto
        return True

    # ---- the join and storing ------------------------------------------------------------

    def _resume(self, session: Session) -> None:
        """Take over the incidents an earlier server left open whose condition still holds:
        the detectors' signal of the same kind on the same subject (the earliest, open or
        just ended) gets the stored start and detection time, so the incident keeps its
        key, id and state; the others are closed by `_store` (close_stale), and their
        jobs' signals found again over their time stay joined to them (not incidents of
        their own)."""
        found: dict[tuple[str, int], list[Signal]] = {}
        signals = self.links.active() + self.groups.active()
        signals += [s for d in self.jobs.values() for s in d.active()]
        for signal in sorted(signals + self.ended, key=lambda s: s.start_ns):
            found.setdefault((signal.kind, signal.subject), []).append(signal)
        slack = self.th.sweeps * self.interval_ns
        for stored in repo.open_incidents(session):
            same = found.get((stored["kind"], stored["subject"]))
            if same:
                signal = same.pop(0)
                signal.start_ns, signal.detected_ns = stored["start_ns"], stored["detected_ns"]
                self.stored[signal.key] = stored["id"]
                self.shapes[signal.key] = stored["shape"]
                continue
            span = Signal(stored["kind"], stored["subject"], stored["start_ns"],
                          stored["detected_ns"], stored["last_ns"])  # fmt: skip
            for job, _, *kinds in stored["shape"][1]:
                for kind in kinds:
                    for signal in found.get((kind, job), []):
                        if overlaps(signal, span, slack):
                            self.joined[signal.key] = stored["key"]

    def _store(self, session: Session, links: list[dict[str, Any]], now: int
               ) -> list[dict[str, Any]]:  # fmt: skip
        if not self.resumed:
            self._resume(session)
            self.resumed = True
        by_id = {lk["id"]: lk for lk in links}
        of_links = JOB_KINDS + GROUP_KINDS
        link_signals = self.links.active() + [s for s in self.ended if s.subject in by_id
                                              and s.kind not in of_links]  # fmt: skip
        link_signals += self.groups.active() + [s for s in self.ended if s.kind in GROUP_KINDS]
        view_groups = self._view.groups if self._view is not None else {}
        job_signals = [s for d in self.jobs.values() for s in d.active()]
        job_signals += [s for s in self.ended if s.kind in JOB_KINDS]
        slack = self.th.sweeps * self.interval_ns
        incidents: list[Joined] = []
        for signal in link_signals:
            members = None  # a link signal's link; an imbalance's: its group's members
            if signal.kind in GROUP_KINDS:
                group = view_groups.get(signal.subject)
                members = list(group.members) if group is not None else []
            cached = self._on.get(signal.key)
            if cached is None or now - cached[0] >= REFRESH_NS or signal.end_ns is not None:
                cached = self._read_on(session, signal, now, slack)
            incident = join(signal, job_signals, cached[1], self.th, slack, members)
            if incident.reported and signal.key not in self.stored and cached[0] < now:
                # reported in this pass: its jobs as they stand now, not as when it was silent
                cached = self._read_on(session, signal, now, slack)
                incident = join(signal, job_signals, cached[1], self.th, slack, members)
            incidents.append(incident)
            for s in incident.signals[1:]:
                self.joined[s.key] = incident.key
        for signal in job_signals:
            if signal.key in self.joined:
                continue
            if signal.end_ns is None and now - signal.detected_ns < slack:
                continue  # a link signal may still join it
            incidents.append(alone(signal, self.th))
        messages = []
        for key in [k for k in self.joined if k in self.stored]:  # it opened alone before
            messages += self._merge(session, key, self.joined[key])
        keep, silent = set(), set()
        for incident in incidents:
            was_open = incident.key in self.stored
            if not was_open and not incident.reported:  # too small yet to tell anyone
                silent.add(incident.key)
                self.stats.silenced += incident.end_ns is not None
                continue
            incident_id, row = self._write(session, incident, by_id, now)
            if incident.end_ns is None:
                self.stored[incident.key] = incident_id
                keep.add(incident.key)
            else:
                self.stored.pop(incident.key, None)
            shape = (incident.severity,
                     tuple((m.job, m.role, *m.signals) for m in incident.members))  # fmt: skip
            event = None
            if incident.end_ns is not None:
                event = "closed"
            elif not was_open:
                event = "opened"
            elif self.shapes.get(incident.key) != shape:
                event = "updated"  # its severity or a job's role changed
            self.shapes[incident.key] = shape
            if event is not None:
                self.stats.opened += event == "opened"
                self.stats.closed += event == "closed"
                messages.append(self._message(session, event, incident_id, row))
        for key in set(self.stored) - keep:  # its signals are gone (e.g. a restart)
            del self.stored[key]
        live = keep | silent
        self.shapes = {k: v for k, v in self.shapes.items() if k in keep}
        self.written = {k: v for k, v in self.written.items() if k in keep}
        self._on = {k: v for k, v in self._on.items() if k in live}
        self._details = {k: v for k, v in self._details.items() if k[0] in keep}
        for closed in repo.close_stale(session, keep):  # e.g. left open by an earlier server
            self.stats.closed += 1
            messages.append(self._message(session, "closed", closed["id"], closed))
        self.ended = []
        self.joined = {k: v for k, v in self.joined.items()
                       if any(s.key == k for s in job_signals if s.end_ns is None)}  # fmt: skip
        return messages

    def _merge(self, session: Session, key: str, into: str) -> list[dict[str, Any]]:
        """A job's incident of its own (stored as `key`) is now part of a link's (`into`):
        if that one is new, it takes the job's row over (its id and URL stay; the webhook
        hears "updated" when it is saved); else the job's is deleted and the webhook hears
        "merged" with the incident it went into."""
        incident_id = self.stored.pop(key)
        if into not in self.stored:
            repo.rekey(session, key, into)
            self.stored[into] = incident_id
            self.written.pop(key, None)  # its row has another key now: written anew
            self.shapes[into] = self.shapes.pop(key, ("", ()))
            return []
        repo.remove(session, key)
        self.written.pop(key, None)
        return [message.merged(incident_id, self.stored[into], self.base_url)]

    def _read_on(self, session: Session, signal: Signal, now: int, slack: int
                 ) -> tuple[int, dict[int, int | None]]:  # fmt: skip
        """Read again the jobs on a link signal's link (an imbalance's: on its group's
        busiest member, `detect.busiest`) over its time (and `slack` either side) as of
        `now`, and keep them (REFRESH_NS)."""
        window = Window(signal.start_ns - slack, (signal.end_ns or now) + slack)
        link = busiest(signal) if signal.kind in GROUP_KINDS else signal.subject
        on = {} if link is None else self._on_link(session, link, window)
        self._on[signal.key] = (now, on)
        return self._on[signal.key]

    def _on_link(self, session: Session, link: int, window: Window) -> dict[int, int | None]:
        """Job -> its bytes on the link (both directions, every category) over the window."""
        result = self.attributions.link(session, self.traffic, link, window)
        on: dict[int, float] = {}
        for direction in DIRECTIONS:
            for (job, *_), nbytes in result.shares.get((link, direction), {}).items():
                on[job] = on.get(job, 0.0) + nbytes
        return {job: round(nbytes) for job, nbytes in on.items() if nbytes > 0}

    def _write(self, session: Session, incident: Joined, by_id: dict[int, dict[str, Any]],
               now: int) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """Store an incident as it stands now: only what changed since this service last
        wrote it (its row, if any column or job changed, with updated_ns `now`; the jobs'
        rows that changed), nothing if nothing did (updated_ns stays). Its id and row."""
        row, members = self._describe(session, incident, by_id, now)
        content = {k: v for k, v in row.items() if k != "updated_ns"}
        last = self.written.get(incident.key) if incident.key in self.stored else None
        if last is not None and (last[0], last[1]) == (content, members):
            return self.stored[incident.key], {**row, "updated_ns": last[2]}
        before = None if last is None else (last[0], last[1])
        incident_id = repo.save(session, row, members, before)
        self.written[incident.key] = (content, members, now)
        return incident_id, row

    def _describe(self, session: Session, incident: Joined, by_id: dict[int, dict[str, Any]],
                  now: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
        """An incident's row and its jobs' rows as they stand `now` (a job's ranks, files
        and named ranks read again every REFRESH_NS)."""
        lead = incident.signals[0]
        links_json = []
        for link_id in incident.links:
            lk = by_id.get(link_id) or {}
            links_json.append({
                "id": link_id, "a": lk.get("a"), "b": lk.get("b"),
                "capacity_bytes_per_s": lk.get("capacity_bytes_per_s"),
                "signals": [lead.kind], "peak": lead.peak, "evidence": lead.evidence,
            })  # fmt: skip
        title = KIND_TEXT[incident.kind]
        group = self._view.groups.get(lead.subject) if self._view is not None else None
        if incident.kind in GROUP_KINDS:
            heaviest = busiest(lead)
            ref = None if group is None else {"id": group.id, "kind": group.kind,
                                              "name": group.name}  # fmt: skip
            for entry in links_json:
                entry["group"] = ref
                entry["busiest"] = entry["id"] == heaviest
                # per member its own utilisation each sweep, beside the group's skew
                entry["evidence"] = [
                    {"t_ns": p["t_ns"], "utilisation": p["members"].get(str(entry["id"])),
                     "xmit_wait_per_s": None, "max_mean": p["max_mean"], "cv": p["cv"]}
                    for p in lead.evidence if "members" in p]  # fmt: skip
            title += f" on {group.name if group else f'group {lead.subject}'}"
            hot = by_id.get(heaviest) if heaviest is not None else None
            if hot is not None:
                title += f": {_end(hot['a'])} – {_end(hot['b'])} busiest"
        elif incident.links:
            first = by_id.get(incident.links[0])
            if first is not None:
                title += f" on {_end(first['a'])} – {_end(first['b'])}"
        upto = incident.end_ns or now
        members = []
        for slot, m in enumerate(incident.members):
            own = [s for s in incident.signals if s.subject == m.job and s.kind in JOB_KINDS]
            kind = own[0].kind if own else "mpi_slowdown"
            key = (incident.key, m.job, kind, m.role)
            known = self._details.get(key)
            if known is None or now - known[0] >= REFRESH_NS or incident.end_ns is not None:
                named = repo.named_ranks(session, m.job, incident.start_ns, upto)
                top = repo.top_ranks(session, m.job, kind, incident.start_ns, upto)
                ranks = list(dict.fromkeys([n["rank"] for n in named] + top))[:RANKS_LISTED]
                files = (repo.top_files(session, m.job, incident.start_ns, upto)
                         if kind == "io_stall" or m.role == "aggressor" else [])  # fmt: skip
                # the sites whose time rose over the steps each signal held (settled ones)
                sites = {s.kind: repo.risen_sites(session, m.job, s.kind, s.start_ns,
                                                  s.last_ns if s.end_ns is None else s.end_ns,
                                                  self.th.baseline_ns) for s in own}  # fmt: skip
                known = self._details[key] = (now, ranks, files, named, sites)
            _, ranks, files, named, sites = known
            evidence = {s.kind: {"baseline_per_byte_ns": s.baseline, "peak_factor": s.peak,
                                 "lost_ns": round(s.lost_ns), "unobserved_ns": s.unobserved_ns,
                                 **_waiting(s), "ranks": named,
                                 "callsites": sites.get(s.kind, []),
                                 "series": _during(s.evidence, incident.start_ns)}
                        for s in own}  # fmt: skip
            members.append({"slot": slot, "job_id": m.job, "role": m.role,
                            "signals": m.signals, "ranks": ranks, "files": files,
                            "link_bytes": m.link_bytes, "evidence": evidence})  # fmt: skip
        row = {
            "key": incident.key, "kind": incident.kind, "severity": incident.severity,
            "title": title, "start_ns": incident.start_ns, "end_ns": incident.end_ns,
            "detected_ns": lead.detected_ns, "updated_ns": now, "links": links_json,
            "members": [{"role": m.role} for m in incident.members],
            "link_ids": incident.links,
            "signals": sorted({s.kind for s in incident.signals}),
            "unobserved_ns": incident.unobserved_ns, "lost_ns": round(incident.lost_ns),
            "hit": incident.hit,
        }  # fmt: skip
        return row, members

    def _message(self, session: Session, event: str, incident_id: int, row: dict[str, Any]
                 ) -> dict[str, Any]:  # fmt: skip
        """The webhook's JSON (server/incidents/message.py): the event, the incident's URL,
        its one-line text and the incident as an administrator sees it."""
        jobs = repo.visible_jobs(session, [incident_id]).get(incident_id, {})
        return message.message(event, incident_id, row, [j for _, j in sorted(jobs.items())],
                               self.base_url)  # fmt: skip


def _during(series: list[dict[str, Any]], start_ns: int) -> list[dict[str, Any]]:
    """The points of a job signal's series that end after its incident's start (a point
    ends at its `t_ns`), as its links' series start at their first hot sweep: a job's
    detector keeps the steps before it too (those it was judged against, an earlier
    incident's), which are not this incident's evidence."""
    return [p for p in series if p["t_ns"] > start_ns]


def _waiting(signal: Signal) -> dict[str, Any]:
    """A job signal's kind of waiting: its time blocked per kind (an MPI slowdown's: per
    repo.WAITING kind; an I/O stall's: per repo.IO_WAITING op class) summed over the steps
    it held (`waiting_ns`) and the kind with the most (`waits_in`)."""
    kinds = repo.WAITING if signal.kind == "mpi_slowdown" else repo.IO_WAITING
    last = signal.last_ns if signal.end_ns is None else signal.end_ns
    held: dict[str, int] = {}
    for point in signal.evidence:
        if signal.start_ns < point["t_ns"] <= last:
            for kind, ns in point.get("waiting_ns", {}).items():
                held[kind] = held.get(kind, 0) + ns
    most = max(kinds, key=lambda k: held.get(k, 0)) if held else None
    return {"waiting_ns": held, "waits_in": most}


def _end(end: dict[str, Any]) -> str:
    return f"{end['name'] or end['guid']}[{end['port']}]"


def incident_service(engine: Engine, settings: Any, traffic: TrafficConfig | None = None
                     ) -> IncidentService | None:  # fmt: skip
    """The service the settings ask for (None: STACKLENS_INCIDENTS=off); `traffic`: how the
    fabric forwards and where the storage servers are (as the traffic domain's routes)."""
    if settings.incidents != "on":
        return None
    return IncidentService(
        engine,
        Thresholds.from_settings(settings),
        sweep_interval_s=settings.fabric_interval_ms / 1000,
        traffic=traffic,
        webhook=Webhook(settings.alert_webhook) if settings.alert_webhook else None,
        base_url=settings.public_base_url(),
        regression_factor=settings.regression_factor,
    )
