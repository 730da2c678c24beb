"""FastAPI dependencies shared by the domain routers (database sessions, each restricted to
the jobs its request's viewer may read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from server.access.owner import restrict
from server.access.viewer import request_viewer


def get_session(request: Request) -> Iterator[Session]:
    """A database session for one request, seeing only the jobs of the request's viewer
    (server/access/owner.py), closed afterwards."""
    with Session(request.app.state.engine) as session:
        restrict(session, request_viewer(request))
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
