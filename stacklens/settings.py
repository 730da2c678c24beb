"""The one settings object of stacklens; every field is read from a `STACKLENS_*` variable.

The C hook library reads the same variable names (STACKLENS_COLLECTOR,
STACKLENS_INTERVAL_MS, STACKLENS_INGEST_TOKEN, ...), so one environment configures
both sides.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from stacklens.connguard import ConnectionLimits
from stacklens.wire import BOUNDS


class ConfigError(Exception):
    """A configuration that cannot work; the message says what to change."""


#: The ingest token: 1 to 64 bytes of visible ASCII (0x21-0x7E), the wire header's text(64)
#: field; the hook library applies the same rule (mpi_pmpi_hooks/src/config.c).
TOKEN_MAX_BYTES = 64
TOKEN_RULE = f"at most {TOKEN_MAX_BYTES} visible ASCII characters (no spaces)"

#: A host name or IPv4 address, or an IPv6 address in brackets (the same rule as config.c).
_HOST = re.compile(r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,253}[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])")


def valid_token(token: str) -> bool:
    """Whether `token` follows TOKEN_RULE (empty = no token)."""
    return len(token) <= TOKEN_MAX_BYTES and all(0x21 <= ord(c) <= 0x7E for c in token)


def split_endpoint(value: str) -> tuple[str, int]:
    """(host, port) of "host:port" or "[v6]:port"; ValueError with the reason otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not _HOST.fullmatch(host) or not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"STACKLENS_COLLECTOR={value!r}: expected host:port (a host name, IPv4 address "
            "or [IPv6 address], a colon, a port 0-65535)"
        )
    return host.removeprefix("[").removesuffix("]"), int(port)


def user_id(name: str) -> int:
    """The uid of a user name or decimal uid; ValueError if there is no such user."""
    if name.isdigit():
        return int(name)
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise ValueError(f"no user {name!r} (a user name or a uid)") from None


def _default_state_dir() -> Path:
    """State directory: /var/lib/stacklens for root, ~/.local/state/stacklens otherwise.

    Never under root's home directory: the embedded PostgreSQL opens every parent
    directory of its data directory to other users.
    """
    if os.geteuid() == 0:
        return Path("/var/lib/stacklens")
    return Path.home() / ".local" / "state" / "stacklens"


def default_spool_dir(uid: int | None = None) -> Path:
    """The per-user spool directory the hook library uses when STACKLENS_SPOOL_DIR is unset
    (mpi_pmpi_hooks/src/config.c): ${TMPDIR:-/tmp}/stacklens-spool-<uid> (TMPDIR only if
    absolute), for the effective uid unless `uid` is given."""
    tmp = os.environ.get("TMPDIR", "")
    root = Path(tmp) if tmp.startswith("/") else Path("/tmp")
    return root / f"stacklens-spool-{os.geteuid() if uid is None else uid}"


class Settings(BaseSettings):
    """stacklens configuration (environment prefix `STACKLENS_`)."""

    model_config = SettingsConfigDict(env_prefix="STACKLENS_", extra="ignore")

    state_dir: Path = Field(default_factory=_default_state_dir)
    database_url: str | None = Field(
        default=None,
        description="External PostgreSQL URL; unset = embedded PostgreSQL in state_dir/pg.",
    )
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=7450, ge=0, le=65535)
    http_allowed_hosts: str = Field(
        default="",
        description="Comma list of the names requests may carry in their Host header "
        "(DNS rebinding); empty = the bound address, plus localhost, 127.0.0.1 and ::1 when "
        "bound to loopback or to every address, plus the host's names when bound to every "
        "address.",
    )
    collector: str = Field(
        default="127.0.0.1:7451",
        description="host:port where the collector listens for hook frames (and hooks send).",
    )
    ingest_token: str = Field(default="", repr=False, description=f"Ingest token, {TOKEN_RULE}.")
    # who sends (contract/stacklens_wire.def: hello and welcome; docs/identity.md)
    ingest_auth: Literal["proven", "trusted"] = Field(
        default="proven",
        description="proven: every hook connection proves its Unix user (the collector's "
        "Unix socket: SO_PEERCRED; TCP: a MUNGE credential) and the collector proves itself "
        "back; trusted: no proof either way, only the shared ingest token (one user, or "
        "senders that are all trusted), frames belong to the collector's user.",
    )
    collector_socket: str = Field(
        default="/run/stacklens/ingest.sock",
        description="The collector's Unix socket on its own node (proven mode; the hooks "
        "use it when it exists, TCP otherwise); 'off' = none.",
    )
    collector_user: str = Field(
        default="",
        description="User (name or uid) the collector runs as: the hooks send only to a "
        "collector proven to run as it; empty = root or the hooks' own user.",
    )
    admin_uids: str = Field(
        default="0",
        description="Comma list of users (names or uids) who may send frames for any owner "
        "(e.g. `stacklens replay --all-users` as root in the epilog).",
    )
    munge_socket: str = Field(
        default="", description="Socket of the local munged; empty = libmunge's default."
    )
    interval_ms: int = Field(default=1000, ge=10)
    max_frame_bytes: int = Field(
        default=BOUNDS["max_body_bytes"],
        ge=BOUNDS["max_body_bytes"],
        description="Largest frame body accepted; at least the largest the hooks send.",
    )
    refresh_ms: int = Field(default=1000, ge=200, description="Dashboard refresh period.")
    library: Path | None = Field(
        default=None,
        description="Path of libstacklens.so; unset = the build for the command's MPI "
        "(detected by `stacklens run` and `stacklens env`).",
    )
    job_id: str | None = None
    retention_days: int | None = Field(
        default=None, ge=1, description="Drop data older than this; unset = keep everything."
    )
    maintenance_interval_s: float = Field(
        default=3600.0, gt=0, description="How often partitions are created ahead / dropped."
    )
    rollup_interval_s: float = Field(
        default=10.0, gt=0, description="How often 1-minute rollups are brought up to date."
    )
    job_lost_after_s: float = Field(
        default=600.0,
        gt=0,
        description="A running job from which nothing arrived for this long is shown as lost "
        "(until a frame arrives).",
    )
    # bounds at the edge (collector/ingest, server/http_guard.py; stacklens/connguard.py)
    max_clock_skew_s: float = Field(
        default=300.0,
        gt=0,
        description="Frames whose interval ends more than this after the collector's clock "
        "are rejected (reason clock_skew).",
    )
    max_new_days_per_batch: int = Field(
        default=8,
        ge=1,
        le=366,
        description="Days without a partition yet that one batch of frames may bring; frames "
        "needing more are rejected (reason partition_limit).",
    )
    max_connections: int = Field(
        default=4096, ge=16, description="Connections at once, per server (ingest, HTTP)."
    )
    max_connections_per_peer: int = Field(
        default=1024, ge=1, description="Connections at once from one address, per server."
    )
    handshake_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Time for a new connection's first valid frame header (ingest) or a "
        "request head (HTTP).",
    )
    read_timeout_s: float = Field(
        default=60.0, gt=0, description="Time for the rest of a frame or request body once begun."
    )
    idle_timeout_s: float = Field(
        default=3900.0,
        gt=0,
        description="An ingest connection silent this long is closed (above the hooks' "
        "longest interval, 1 h; the sender reconnects).",
    )
    ingest_buffer_mb: int = Field(
        default=64,
        ge=1,
        description="Bytes of incomplete frames held for all ingest connections together; "
        "past it, connections with an incomplete frame wait.",
    )
    http_max_body_mb: int = Field(
        default=32, ge=1, description="Largest HTTP request body (the JSON ingest)."
    )
    spool_dir: Path = Field(
        default_factory=default_spool_dir,
        description="Where hooks spool undelivered frames; default (per user) "
        "${TMPDIR:-/tmp}/stacklens-spool-<uid>, as the hook library's.",
    )
    # fabric sampler (collector/fabric)
    fabric_source: Literal["auto", "none", "mad", "sysfs", "replay"] = Field(
        default="auto",
        description="auto = MAD via a running `stacklens fabric-sim` or local HCAs, else none.",
    )
    fabric_interval_ms: int = Field(default=1000, ge=50, description="Port counter sweep period.")
    fabric_rediscover_s: float = Field(default=60.0, gt=0, description="Topology re-scan period.")
    fabric_min_sample_ms: int = Field(
        default=500,
        ge=0,
        description="Shortest interval a port's rate is taken over: a port read sooner after "
        "its previous sample (e.g. right after a re-discovery) waits for the next sweep.",
    )
    fabric_missed_sweeps: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Sweeps a port may miss before its load and errors become unknown.",
    )
    fabric_replay_file: Path | None = Field(default=None, description="Recorded sweeps to replay.")
    fabric_sweep_workers: int | None = Field(
        default=None,
        ge=1,
        le=32,
        description="MAD worker processes a sweep is split over; default min(4, CPU count).",
    )

    @field_validator("collector")
    @classmethod
    def _check_collector(cls, value: str) -> str:
        split_endpoint(value)
        return value

    @field_validator("ingest_token")
    @classmethod
    def _check_token(cls, value: str) -> str:
        if not valid_token(value):  # the value is never shown, not even in part
            raise ValueError(f"STACKLENS_INGEST_TOKEN must be {TOKEN_RULE}")
        return value

    @field_validator("admin_uids", "collector_user")
    @classmethod
    def _check_users(cls, value: str) -> str:
        for name in filter(None, (part.strip() for part in value.split(","))):
            user_id(name)
        return value

    def admins(self) -> frozenset[int]:
        """The uids of `admin_uids`."""
        return frozenset(user_id(p.strip()) for p in self.admin_uids.split(",") if p.strip())

    def allowed_hosts(self) -> frozenset[str]:
        """The names a request's Host header may carry (server/host_check.py): those of
        `http_allowed_hosts`, else derived from `http_host`."""
        names = {p.strip().lower().rstrip(".") for p in self.http_allowed_hosts.split(",")}
        names.discard("")
        if names:
            return frozenset(n.removeprefix("[").removesuffix("]") for n in names)
        host = self.http_host.lower().removeprefix("[").removesuffix("]")
        wildcard = host in ("0.0.0.0", "::", "")
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        names = set() if wildcard else {host}  # a browser may take 0.0.0.0 for this machine
        if loopback or wildcard:
            names |= {"localhost", "127.0.0.1", "::1"}
        if wildcard:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return frozenset(names)

    def connection_limits(self) -> ConnectionLimits:
        """The connection limits and timeouts of each server."""
        return ConnectionLimits(self.max_connections, self.max_connections_per_peer,
                                self.handshake_timeout_s, self.read_timeout_s,
                                self.idle_timeout_s)  # fmt: skip

    @property
    def collector_host(self) -> str:
        """Host part of `collector` (an IPv6 address without its brackets)."""
        return split_endpoint(self.collector)[0]

    @property
    def collector_port(self) -> int:
        """Port part of `collector`."""
        return split_endpoint(self.collector)[1]


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
