"""Queries of API bearer tokens (`stacklens token create|list|revoke`; the gate's check).

A token is `slt_` + 43 URL-safe characters (256 random bits); only its SHA-256 is stored,
so the table gives no token away. A token acts as its user until it expires or is revoked.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from stacklens.schema import ApiToken

#: Every API token starts with this (tells it from other bearer values at a glance).
PREFIX = "slt_"
_NS_PER_DAY = 86_400 * 10**9


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def create(session: Session, user: str, name: str, days: float) -> tuple[str, int]:
    """A new token for `user` that expires in `days` days: (the token, shown once; its id).
    Commits."""
    token = PREFIX + secrets.token_urlsafe(32)
    now = time.time_ns()
    row = ApiToken(user=user, name=name, sha256=_digest(token), created_ns=now,
                   expires_ns=now + int(days * _NS_PER_DAY))  # fmt: skip
    session.add(row)
    session.commit()
    return token, row.id


def listing(session: Session, user: str | None = None) -> list[dict[str, Any]]:
    """Every token (of `user`, if given) by id: id, user, name, created, expires, revoked
    (ns or None) and its state (active, expired, revoked)."""
    query = select(ApiToken).order_by(ApiToken.id)
    if user is not None:
        query = query.where(ApiToken.user == user)
    now = time.time_ns()
    return [
        {
            "id": t.id, "user": t.user, "name": t.name, "created_ns": t.created_ns,
            "expires_ns": t.expires_ns, "revoked_ns": t.revoked_ns,
            "state": "revoked" if t.revoked_ns is not None
            else "expired" if t.expires_ns <= now else "active",
        }
        for t in session.scalars(query)
    ]  # fmt: skip


def revoke(session: Session, token_id: int) -> bool:
    """Revoke token `token_id` now (False: no such token, or already revoked). Commits."""
    done = session.execute(
        update(ApiToken)
        .where(ApiToken.id == token_id, ApiToken.revoked_ns.is_(None))
        .values(revoked_ns=time.time_ns())
    )
    session.commit()
    return bool(done.rowcount)  # type: ignore[attr-defined]


def user_of(engine: Engine, token: str) -> str | None:
    """The user `token` acts as, None if it is unknown, expired or revoked."""
    query = select(ApiToken.user).where(
        ApiToken.sha256 == _digest(token),
        ApiToken.revoked_ns.is_(None),
        ApiToken.expires_ns > time.time_ns(),
    )
    with engine.connect() as conn:  # not an ORM session: a third of the cost per request
        user: str | None = conn.execute(query).scalar()
    return user
