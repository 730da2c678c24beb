"""The viewer of a request and the access configuration it is judged by.

A `Viewer` is who asks (a user name, and whether that user is an admin, who sees every
job); `Access` is what the server accepts: the mode (none, proxy, oidc), the Host names it
answers to, the proxies it believes, the OIDC provider, the admins. Both are plain data:
the gate (gate.py) makes a Viewer per request, the owner filter (owner.py) reads it.
"""

from __future__ import annotations

import functools
import grp
import ipaddress
import pwd
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Literal

from starlette.requests import Request

from stacklens.settings import LOOPBACK_HOSTS, Settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Viewer:
    """Who a request is from: `user` (empty for the one local viewer of auth_mode=none),
    `admin` (sees every job), and `how` they were recognised (none, proxy, oidc, token)."""

    user: str
    admin: bool
    how: Literal["none", "proxy", "oidc", "token"]


@dataclass(frozen=True)
class Access:
    """What the server accepts (made from the settings by `from_settings`; the defaults
    are auth_mode=none on loopback)."""

    mode: Literal["none", "proxy", "oidc"] = "none"
    hosts: frozenset[str] = frozenset(LOOPBACK_HOSTS)
    proxy_header: str = "x-forwarded-user"
    proxies: tuple[Network, ...] = ()
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = field(default="", repr=False)
    oidc_user_claim: str = "preferred_username"
    oidc_groups_claim: str = "groups"
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    session_s: int = 12 * 3600
    admins: frozenset[str] = frozenset()
    admin_group: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        """The access configuration the settings describe (ValueError for a proxy address
        that is not an address or network)."""
        hosts = {*LOOPBACK_HOSTS, *settings.items(settings.http_allowed_hosts)}
        if settings.http_host not in ("0.0.0.0", "::", ""):
            hosts.add(settings.http_host)
        else:  # every address: this machine's own names too
            hosts.update({socket.gethostname(), socket.getfqdn()})
        return cls(
            mode=settings.auth_mode,
            hosts=frozenset(h.lower().removeprefix("[").removesuffix("]") for h in hosts),
            proxy_header=settings.proxy_user_header.lower(),
            proxies=tuple(
                ipaddress.ip_network(a, strict=False)
                for a in settings.items(settings.proxy_addresses)
            ),
            oidc_issuer=settings.oidc_issuer.rstrip("/"),
            oidc_client_id=settings.oidc_client_id,
            oidc_client_secret=settings.oidc_client_secret,
            oidc_user_claim=settings.oidc_user_claim,
            oidc_groups_claim=settings.oidc_groups_claim,
            secret=settings.session_secret or secrets.token_urlsafe(32),
            session_s=int(settings.session_hours * 3600),
            admins=frozenset(settings.items(settings.admin_users)),
            admin_group=settings.admin_group,
        )

    def trusted_proxy(self, address: str) -> bool:
        """Whether a request from `address` may name its user in the proxy header."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.proxies)

    def viewer(
        self, user: str, how: Literal["proxy", "oidc", "token"], groups: tuple[str, ...] = ()
    ) -> Viewer:
        """The Viewer for `user`: an admin if listed in `admins`, or a member of
        `admin_group` (among the `groups` the login claimed, or as a Unix group)."""
        admin = user in self.admins or (
            bool(self.admin_group)
            and (self.admin_group in groups or self.admin_group in unix_groups(user))
        )
        return Viewer(user, admin, how)


def unix_groups(user: str) -> frozenset[str]:
    """The Unix groups of `user` (primary and supplementary; empty for an unknown user), as
    the system said at most a minute ago (a site's directory is not asked per request)."""
    return _unix_groups(user, int(time.monotonic() // 60))


@functools.lru_cache(maxsize=4096)
def _unix_groups(user: str, _minute: int) -> frozenset[str]:
    try:
        primary = {grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name}
    except KeyError:
        return frozenset()
    return frozenset(primary | {g.gr_name for g in grp.getgrall() if user in g.gr_mem})


def request_viewer(request: Request) -> Viewer | None:
    """The viewer the gate recognised for this request (None: nobody, on an open path)."""
    viewer: Viewer | None = getattr(request.state, "viewer", None)
    return viewer
