# server/compare/regression.py — the regression check after each run (issue #28 point 3).
"""With STACKLENS_REGRESSION_FACTOR set (0: off), the incident service
(server/incidents/service.py) asks this check, every pass, for the runs that finished since
its last pass: each is compared with the median of the last DEFAULT_HISTORY earlier runs of
its program (server/compare/service.py, as the Compare page compares it without run a),
read as the run's owner reads it (the owner filter: a user's own runs, an admin's every
run). A run whose elapsed time is more than `factor` times that median, over at least
MIN_HISTORY earlier runs, opens a `regression` incident — stored as every incident is,
sent to the same webhook — named after the run and the top differences of the comparison;
its job is its member (role victim, signal regression) with the comparison's figures as
evidence. The incident is about a run that has ended, so it is stored closed (its start
and end the run's); its key (`regression:<run id>`) makes the check idempotent across
restarts (a run whose incident exists is never sent again).

`judge` is pure (tested on hand-made comparisons); `RegressionCheck.check` reads and
writes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from presentation.formatting import format_duration_ns
from server.access.owner import restrict
from server.access.viewer import Viewer
from server.compare import repository, service
from server.compare.diff import span
from server.incidents import repository as incidents
from stacklens.api_models import Comparison
from stacklens.schema import Incident, Job, Run

#: Earlier runs a median needs at least.
MIN_HISTORY = 3
#: Differences named in the title at most.
NAMED = 3
#: How far back the first pass after a start looks for finished runs.
LOOKBACK_NS = 3600 * 10**9
#: How far back every later pass looks again (a run is stored finished after its end).
MARGIN_NS = 600 * 10**9
#: The incident kind and its key's prefix.
KIND = "regression"


def key_of(run_id: int) -> str:
    """The incident key of a run's regression."""
    return f"{KIND}:{run_id}"


def judge(comparison: Comparison, factor: float) -> dict[str, Any] | None:
    """The regression the comparison of a run with its history's median shows (None: not
    one): the run's elapsed time is more than `factor` times the median's, with at least
    MIN_HISTORY runs in the median. Its severity (major from twice `factor`), title
    (the run, how much slower, the top differences slower), time lost and evidence."""
    a, b = comparison.a, comparison.b
    if a.runs < MIN_HISTORY or a.elapsed_ns <= 0 or b.elapsed_ns <= factor * a.elapsed_ns:
        return None
    ratio = b.elapsed_ns / a.elapsed_ns
    slower = [d for d in comparison.differences if d.delta_ns > 0][:NAMED]
    named = [f"{d.name} {span(d.delta_ns)} per rank" for d in slower]
    sites = [s for s in comparison.sites if s.delta_ns > 0][:NAMED]
    named += [f"{s.op} at {s.label} {span(s.delta_ns)} over the ranks" for s in sites[:1]]
    families = [f for f in comparison.families if f.delta_ns > 0][:1]
    named += [f"family {f.label} {span(f.delta_ns)} over the ranks" for f in families]
    title = (f"Regression of job {b.job} run {b.run}: {ratio:.1f}× the median of its "
             f"program's last {a.runs} runs ({format_duration_ns(b.elapsed_ns)} against "
             f"{format_duration_ns(a.elapsed_ns)})")  # fmt: skip
    if named:
        title += ": " + ", ".join(named)
    return {
        "severity": "major" if ratio >= 2 * factor else "minor",
        "title": title,
        "lost_ns": b.elapsed_ns - a.elapsed_ns,
        "evidence": {
            KIND: {
                "factor": factor,
                "ratio": ratio,
                "elapsed_ns": b.elapsed_ns,
                "median_elapsed_ns": a.elapsed_ns,
                "runs": a.runs,
                "finding": comparison.finding,
                "differences": [d.model_dump() for d in slower],
                "sites": [s.model_dump() for s in sites],
                "families": [f.model_dump() for f in families],
            }
        },
    }


class RegressionCheck:
    """The check after each run (see the module): `factor` (STACKLENS_REGRESSION_FACTOR,
    above 1) and the fabric context the comparisons read (the incident service's
    attribution cache and traffic settings)."""

    def __init__(self, factor: float, around: service.Around):
        if factor <= 1:
            raise ValueError("the regression factor is above 1")
        self.factor = factor
        self.around = around
        self.started = False
        self.seen: dict[int, int] = {}  # run id -> its end, of the runs checked lately
        self.checked = 0
        self.opened = 0

    def check(self, session: Session, now: int) -> list[tuple[int, dict[str, Any]]]:
        """Check the runs that finished in the last MARGIN_NS before `now` (on the first
        pass, LOOKBACK_NS) and were not checked yet, oldest first; store each regression
        found as a closed incident in `session` (unrestricted: the detector's) and return
        the new ones' (id, row) for the webhook's 'opened' messages."""
        after = now - (MARGIN_NS if self.started else LOOKBACK_NS)
        self.started = True
        self.seen = {r: end for r, end in self.seen.items() if end > after}
        runs = session.execute(
            select(Job, Run)
            .join(Run, Run.job_id == Job.id)
            .where(Run.status == "finished", Run.finished_ns > after, Run.finished_ns <= now)
            .order_by(Run.finished_ns, Run.id)
        ).all()
        opened = []
        for job, run in runs:
            if run.id in self.seen:
                continue
            self.seen[run.id] = run.finished_ns or now
            key = key_of(run.id)
            if session.scalar(select(Incident.id).where(Incident.key == key)) is not None:
                continue
            self.checked += 1
            found = self._judge(session, job, run)
            if found is None:
                continue
            row = {
                "key": key, "kind": KIND, "severity": found["severity"],
                "title": found["title"], "start_ns": run.started_ns,
                "end_ns": run.finished_ns, "detected_ns": now, "updated_ns": now, "links": [],
                "members": [{"role": "victim"}], "link_ids": [], "signals": [KIND],
                "unobserved_ns": None,
                "lost_ns": found["lost_ns"], "hit": 1,
            }  # fmt: skip
            member = {"slot": 0, "job_id": job.id, "role": "victim", "signals": [KIND],
                      "ranks": [], "files": [], "link_bytes": None,
                      "evidence": found["evidence"]}  # fmt: skip
            opened.append((incidents.save(session, row, [member]), row))
            self.opened += 1
        return opened

    def _judge(self, session: Session, job: Job, run: Run) -> dict[str, Any] | None:
        """The run against its history's median, read as its owner reads it."""
        with Session(session.get_bind()) as own:
            restrict(own, Viewer(user=job.user or "", admin=False, how="token"))
            earlier = repository.same_program(own, run, service.DEFAULT_HISTORY)
            if len(earlier) < MIN_HISTORY:
                return None
            side = service.Side(job.job_key, run.ordinal, job.user)
            comparison = service.compare(own, side, None, service.DEFAULT_HISTORY, NAMED,
                                         self.around)  # fmt: skip
        return judge(comparison, self.factor)
