"""`stacklens token create|list|revoke`: API bearer tokens for scripts (server/access/
tokens.py). Run where the database is (as whoever administers stacklens).

stacklens token create [--user U] [--name N] [--days D]   print a new token, once
stacklens token list [--user U]                           id, user, name, dates, state
stacklens token revoke ID                                 the token stops working now
"""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import UTC, datetime

from stacklens.settings import Settings
from stacklens_cli.helptext import subcommand


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The `token` command and its subcommands."""
    token = subcommand(
        sub, "token",
        "Create, list or revoke the API tokens scripts read the API with.",
        ["stacklens token create --name nightly-report  # printed once, stored hashed",
         "stacklens token list --user alice",
         "stacklens token revoke 3"],
        "A token acts as its user (Authorization: Bearer slt_...), sees what that user sees, "
        "expires after --days and can be revoked at once.",
    )  # fmt: skip
    verbs = token.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="a new token (printed once, stored hashed)")
    create.add_argument("--user", default=getpass.getuser(), help="who it acts as (default: you)")
    create.add_argument("--name", default="", help="what it is for")
    create.add_argument("--days", type=float, default=None,
                        help="lifetime in days (default: STACKLENS_TOKEN_DAYS, 90)")  # fmt: skip
    listing = verbs.add_parser("list", help="every token (never the token itself)")
    listing.add_argument("--user", default=None, help="only this user's")
    revoke = verbs.add_parser("revoke", help="stop a token now")
    revoke.add_argument("id", type=int)
    token.set_defaults(func=cmd_token)


def _when(ns: int | None) -> str:
    return "-" if ns is None else datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M")


def cmd_token(settings: Settings, args: argparse.Namespace) -> int:
    """Create, list or revoke API tokens in the configured database."""
    # imported here, not with the command's parser: every `stacklens` command builds the
    # parser, and the database layers cost a second of start-up (`stacklens report`)
    from sqlalchemy.orm import Session

    from server.access import tokens
    from stacklens.db import make_engine, migrate, open_database

    database = open_database(settings)
    migrate(database.url)
    engine = make_engine(database.url)
    try:
        with Session(engine) as session:
            if args.verb == "create":
                days = settings.token_days if args.days is None else args.days
                if days <= 0:
                    print("stacklens: --days must be more than 0", file=sys.stderr)
                    return 2
                token, token_id = tokens.create(session, args.user, args.name, days)
                print(token)
                print(f"# token {token_id} for {args.user}, expires in {days:g} days; shown "
                      "only now: send it as Authorization: Bearer <token>")  # fmt: skip
            elif args.verb == "list":
                print("id\tuser\tname\tcreated (UTC)\texpires (UTC)\tstate")
                for t in tokens.listing(session, args.user):
                    print(f"{t['id']}\t{t['user']}\t{t['name']}\t{_when(t['created_ns'])}\t"
                          f"{_when(t['expires_ns'])}\t{t['state']}")  # fmt: skip
            elif not tokens.revoke(session, args.id):
                print(f"stacklens: no active token {args.id}", file=sys.stderr)
                return 1
            else:
                print(f"token {args.id} revoked")
    finally:
        engine.dispose()
    return 0
