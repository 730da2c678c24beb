# server/jobs/sections.py — the reads of a job's sections, one per job card (presentation/cards.py).
"""Each section of a job's details (`JobDetails`: matrix, ops, io, collectives, sizes,
rma, ranks, runs, callsites, families) read for a `Target`: the job routes answer one each,
GET /api/overview all of them at once, and the job report reads them through
`detail_reads`. The families place their traffic on the fabric: they read it through the
app's AttributionCache, with its forwarding mode (STACKLENS_FABRIC_PATHS)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from server import paging
from server.callsites import service as callsite_service
from server.families import service as family_service
from server.jobs import repository, series
from server.jobs.target import Target
from server.paging import PageSizes
from server.traffic.service import AttributionCache
from stacklens.api_models import (
    Callsite,
    CategoryTotal,
    CollectiveTotal,
    CommFamily,
    CommunicatorTotal,
    FileIo,
    HostRanks,
    IoTotals,
    JobCallsites,
    JobCollectives,
    JobDetails,
    JobFamilies,
    JobIo,
    JobOps,
    JobRanks,
    JobRma,
    JobRuns,
    JobSizes,
    Matrix,
    MatrixCell,
    OpSizes,
    OpTotal,
    RankHealth,
    RankInfo,
    RmaCell,
    RmaOp,
    RunSummary,
)

#: Page sizes of a job's lists: its rank pairs (matrix, RMA), files and ranks.
PAIR_LIMITS = PageSizes(default=5000, maximum=50_000)
FILE_LIMITS = PageSizes(default=1000, maximum=10_000)
RANK_LIMITS = PageSizes(default=1000, maximum=10_000)
SITE_LIMITS = PageSizes(default=500, maximum=10_000)
FAMILY_LIMITS = PageSizes(default=100, maximum=1000)

log = logging.getLogger(__name__)


def without_key(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "key"}


def detail_reads(
    t: Target, cache: AttributionCache, paths: str
) -> dict[str, Callable[[Session], Any]]:
    """The independent reads a job's details are made of, by JobDetails field: each takes
    the session to read on (the reports run them at once, each on a session of its own);
    the families read the fabric through `cache` with forwarding mode `paths`."""
    return {
        "matrix": lambda s: matrix(s, t, PAIR_LIMITS.default),
        "ops": lambda s: ops(s, t),
        "io": lambda s: io(s, t, "program", FILE_LIMITS.default),
        "collectives": lambda s: collectives(s, t),
        "sizes": lambda s: sizes(s, t),
        "rma": lambda s: rma(s, t, PAIR_LIMITS.default),
        "ranks": lambda s: ranks(s, t, RANK_LIMITS.default),
        "runs": lambda s: runs(s, t),
        "callsites": lambda s: callsites(s, t, SITE_LIMITS.default),
        "families": lambda s: families(s, t, cache, paths, FAMILY_LIMITS.default),
    }


def details(session: Session, t: Target, cache: AttributionCache, paths: str) -> JobDetails:
    """Every section of the job's details, read on `session`, each in a savepoint of its
    own: a section whose read fails is left null with the reason in `errors` (logged),
    and the others are still read."""
    answers: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for key, read in detail_reads(t, cache, paths).items():
        try:
            with session.begin_nested():
                answers[key] = read(session)
        except SQLAlchemyError as exc:
            log.exception("reading the %s of job %r failed", key, t.job)
            errors[key] = f"the server could not read this card's data ({type(exc).__name__})"
    return JobDetails(job=t.job, errors=errors, **answers)


def matrix(session: Session, t: Target, limit: int, cursor: str | None = None) -> Matrix:
    after = paging.decode("matrix", cursor, (int, int))
    rows, total = repository.p2p_matrix(session, t.scope, limit, after)
    kept, page = paging.page("matrix", rows, limit, total, lambda r: (r["src"], r["dst"]))
    side, blocks = repository.p2p_blocks(session, t.scope)
    return Matrix(
        job=t.job,
        run=t.run,
        world_size=t.world_size,
        cells=[MatrixCell(**row) for row in kept],
        page=page,
        block_ranks=side,
        blocks=[MatrixCell(**row) for row in blocks],
    )


def ops(session: Session, t: Target) -> JobOps:
    ops = repository.job_ops(series.op_totals(session, t.scope))
    return JobOps(
        job=t.job,
        run=t.run,
        categories=[CategoryTotal(**row) for row in repository.category_totals(ops)],
        ops=[OpTotal(**row) for row in ops],
    )


#: The `phase` of the I/O endpoint and the stored phase it reads.
_PHASES = {"program": 0, "startup": 1}


def io(session: Session, t: Target, phase: str, limit: int, cursor: str | None = None) -> JobIo:
    kind = f"{phase} file"
    after = paging.decode(kind, cursor, (int, int, str))
    rows, total = repository.job_io(session, t.scope, _PHASES[phase], limit, after)
    kept, page = paging.page(kind, rows, limit, total, lambda r: r["key"])
    return JobIo(
        job=t.job,
        run=t.run,
        files=[FileIo(**without_key(row)) for row in kept],
        startup=IoTotals(**repository.io_totals(session, t.scope, _PHASES["startup"])),
        page=page,
    )


def collectives(session: Session, t: Target) -> JobCollectives:
    communicators, collectives = repository.collective_totals(session, t.scope)
    return JobCollectives(
        job=t.job,
        run=t.run,
        communicators=[CommunicatorTotal(**row) for row in communicators],
        collectives=[CollectiveTotal(**row) for row in collectives],
    )


def sizes(session: Session, t: Target) -> JobSizes:
    ops = [OpSizes(**row) for row in repository.job_sizes(session, t.scope)]
    return JobSizes(job=t.job, run=t.run, ops=ops)


def rma(session: Session, t: Target, limit: int, cursor: str | None = None) -> JobRma:
    after = paging.decode("rma", cursor, (int, int))
    rows, total = repository.rma_pairs(session, t.scope, limit, after)
    kept, page = paging.page("rma", rows, limit, total, lambda r: (r["origin"], r["target"]))
    return JobRma(
        job=t.job,
        run=t.run,
        world_size=t.world_size,
        ops=[RmaOp(**row) for row in repository.job_rma(session, t.scope)],
        cells=[RmaCell(**row) for row in kept],
        page=page,
    )


def ranks(session: Session, t: Target, limit: int, cursor: str | None = None) -> JobRanks:
    after = paging.decode("rank", cursor, (int, int))
    rows, reported = repository.job_ranks(session, t.scope, limit, after)
    total = reported["ranks"] + reported["processes"]
    kept, page = paging.page("rank", rows, limit, total, lambda r: (r["run"], r["rank"]))
    return JobRanks(
        job=t.job,
        run=t.run,
        world_size=t.world_size,
        ranks=[RankInfo(**row) for row in kept],
        page=page,
        ranks_reported=reported["ranks"],
        processes_reported=reported["processes"],
        hosts=[HostRanks(**row) for row in repository.rank_hosts(session, t.scope)],
        health=RankHealth(**repository.rank_health(session, t.scope)),
    )


def runs(session: Session, t: Target) -> JobRuns:
    """The runs (launches) of the job seen in the window, by ordinal (all of the job's,
    whichever run the target is)."""
    rows = repository.job_runs(session, t.scope)
    return JobRuns(job=t.job, runs=[RunSummary(**row) for row in rows])


def callsites(session: Session, t: Target, limit: int, cursor: str | None = None) -> JobCallsites:
    """A page of the job's call sites, heaviest time first (server/callsites/service.py)."""
    answer = callsite_service.job_callsites(session, t.scope)
    rows = answer["sites"]
    total = len(rows)
    after = paging.decode("callsite", cursor, (int, str))
    if after is not None:
        rows = [r for r in rows if (-r["time_ns"], r["key"]) > after]
    kept, page = paging.page("callsite", rows[: limit + 1], limit, total,
                             lambda r: (-r["time_ns"], r["key"]))  # fmt: skip
    w = t.scope.window
    return JobCallsites(job=t.job, from_ns=w.from_ns, to_ns=w.to_ns,
                        mpi_time_ns=answer["mpi_time_ns"], io_time_ns=answer["io_time_ns"],
                        sites=[Callsite(**r) for r in kept], page=page, run=t.run)  # fmt: skip


def families(session: Session, t: Target, cache: AttributionCache, paths: str, limit: int,
             cursor: str | None = None) -> JobFamilies:  # fmt: skip
    """A page of the job's communicator families, heaviest time first
    (server/families/service.py)."""
    kept, page = family_service.families_page(session, cache, paths, t.scope, limit, cursor)
    w = t.scope.window
    return JobFamilies(job=t.job, from_ns=w.from_ns, to_ns=w.to_ns,
                       families=[CommFamily(**r) for r in kept], page=page, run=t.run)  # fmt: skip
