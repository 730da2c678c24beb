"""The deployment's modes as every part says them: `stacklens status`, the dashboard's
footer, /metrics and the collector's log.

Two modes say what a deployment protects: how senders are proven (`ingest`,
`STACKLENS_INGEST_AUTH`: `proven` or `trusted`, docs/identity.md) and how readers are
(`auth`, `STACKLENS_AUTH_MODE`: `none`, `proxy` or `oidc`, docs/access.md). A server that
runs no collector has the ingest mode `off`. In `trusted` mode nothing proves who sends:
anyone holding the ingest token writes into any job and names any user. That is safe only
where one user (or one service account) sends, so several users sending in that mode is
warned about (`trusted_warning`); the users sending are the distinct users the runs seen in
the last SENDERS_WINDOW_NS name (collector/store/status.py counts them).
"""

from __future__ import annotations

from stacklens.constants import DAY_NS

#: Runs seen this recently (their last frame's interval end) count among the users sending.
SENDERS_WINDOW_NS = DAY_NS
#: The ingest mode of a server that runs no collector (it receives no frames).
NO_INGEST = "off"


def modes_text(ingest: str, auth: str) -> str:
    """The modes in one phrase: `ingest trusted, auth none`."""
    return f"ingest {ingest}, auth {auth}"


def senders_text(senders: int) -> str:
    """How many users sent runs recently: `2 users sent runs in the last 24 h`."""
    hours = SENDERS_WINDOW_NS // (3600 * 10**9)
    return f"{senders} user{'' if senders == 1 else 's'} sent runs in the last {hours} h"


def trusted_warning(ingest: str, senders: int | None) -> str | None:
    """The warning of trusted ingest with more than one user sending; None otherwise (or
    when the number is unknown)."""
    if ingest != "trusted" or senders is None or senders < 2:
        return None
    return (
        f"trusted ingest with {senders} users sending: any of them can write into another's "
        "job and claim any user (STACKLENS_INGEST_AUTH=proven keeps them apart; "
        "docs/identity.md)"
    )
