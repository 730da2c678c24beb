"""The owner filter: the one place that decides which jobs a viewer may read.

Every request's database session (server/deps.py) is restricted here before any route
sees it: every ORM SELECT it runs is given, for the `jobs` table, `owner = the viewer`,
and for every other mapped table or view with a `job_id` column (runs, ranks, every delta
and rollup table, and any such table added later) `job_id IN (the viewer's jobs)`, in the
statement itself, its joins and its subqueries alike (SQLAlchemy's loader criteria). A
route therefore cannot read another user's job, whatever query it builds from the ORM
models: an unknown job and another user's job are the same 404. Admins (and the local
viewer of auth_mode=none) are not restricted. A session with no viewer (an open path)
sees no job at all.

Why here and not PostgreSQL row-level security: the embedded database is used as its
superuser, which row-level security never restricts; see docs/access.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, event, false, select
from sqlalchemy.orm import InstrumentedAttribute, ORMExecuteState, Session, with_loader_criteria

from server.access.viewer import Viewer
from stacklens.schema import Base, Job


def owner_column() -> InstrumentedAttribute[Any]:
    """The column that names a job's owner: the login name of its proven owner (in trusted
    ingest mode, the name its frames claim; collector/store/writer.py)."""
    return Job.user


def owner_key(viewer: Viewer) -> Any:
    """The value `owner_column()` has in the viewer's jobs (None: no job is theirs)."""
    return viewer.user


def _owned(viewer: Viewer | None) -> ColumnElement[bool]:
    key = None if viewer is None else owner_key(viewer)
    return false() if key is None else owner_column() == key


def _job_scoped() -> list[type[Any]]:
    """Every mapped class (table or view) that holds rows of a job, besides `jobs`."""
    return [
        mapper.class_
        for mapper in Base.registry.mappers
        if mapper.class_ is not Job and "job_id" in mapper.columns
    ]


#: Where a restricted session keeps its viewer (for `sibling`).
_VIEWER = "stacklens.viewer"


def restrict(session: Session, viewer: Viewer | None) -> None:
    """Make every ORM SELECT of `session` see only the jobs `viewer` may read (all of them
    for an admin)."""
    session.info[_VIEWER] = viewer
    if viewer is not None and viewer.admin:
        return
    owned = _owned(viewer)
    visible = select(Job.id).where(owned).scalar_subquery()
    criteria = [with_loader_criteria(Job, owned, include_aliases=True)] + [
        with_loader_criteria(cls, cls.job_id.in_(visible), include_aliases=True)
        for cls in _job_scoped()
    ]

    @event.listens_for(session, "do_orm_execute")
    def _only_visible(state: ORMExecuteState) -> None:
        if state.is_select:
            state.statement = state.statement.options(*criteria)


def sibling(session: Session) -> Session:
    """A new session on the same engine that sees exactly what `session` sees (restricted to
    the same viewer; unrestricted if `session` is), for reading in another thread: a
    Session is not thread-safe. The caller closes it."""
    other = Session(session.get_bind())
    if _VIEWER in session.info:
        restrict(other, session.info[_VIEWER])
    return other
