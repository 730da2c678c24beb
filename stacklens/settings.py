"""The one settings object of stacklens; every field is read from a `STACKLENS_*` variable,
else from the configuration file (STACKLENS_CONFIG_FILE), else its default.

Every setting is declared once, with its default and meaning, in
contract/stacklens_settings.def (see stacklens/settings_table.py); the C hook library
reads the same variable names, so one environment configures both sides.
"""

from __future__ import annotations

import io
import ipaddress
import os
import pwd
import re
import socket
from functools import lru_cache
from pathlib import Path
from typing import Literal

from dotenv import dotenv_values
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


#: Host names that mean "this machine only" (a bind to one of them needs no login).
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


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


def parse_storage_servers(text: str) -> dict[str, list[str]]:
    """STACKLENS_STORAGE_SERVERS, `mount=host,host;mount=host` (mount `*`: every mount not
    named), as mount -> server host names; ValueError with the reason for a bad value."""
    out: dict[str, list[str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        mount, sep, hosts = part.partition("=")
        servers = [h.strip() for h in hosts.split(",") if h.strip()]
        if not sep or not mount.strip() or not servers:
            raise ValueError(f"storage servers entry {part!r} is not mount=host[,host...]")
        if mount.strip() in out:
            raise ValueError(f"storage servers name mount {mount.strip()!r} twice")
        out[mount.strip()] = servers
    return out


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
    """stacklens configuration (environment prefix `STACKLENS_`): the types and bounds of the
    settings the stacklens command reads; their defaults and meanings are declared in
    contract/stacklens_settings.def (tests/test_settings_declared.py keeps both equal)."""

    model_config = SettingsConfigDict(env_prefix="STACKLENS_", extra="ignore")

    config_file: Path = Path("/etc/stacklens.env")
    state_dir: Path = Field(default_factory=_default_state_dir)
    database_url: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=7450, ge=0, le=65535)
    public_url: str = ""
    collector: str = "127.0.0.1:7451"
    ingest_token: str = Field(default="", repr=False)
    # who sends (contract/stacklens_wire.def: connection start; docs/identity.md)
    ingest_auth: Literal["proven", "trusted"] = "proven"
    collector_socket: str = "/run/stacklens/ingest.sock"  # "off" = none
    collector_user: str = ""  # a user name or uid; "" = root or the hooks' own user
    admin_uids: str = "0"  # comma list of user names or uids; see admins()
    munge_socket: str = ""
    interval_ms: int = Field(default=1000, ge=10, le=3_600_000)
    job_id: str | None = None
    spool_dir: Path = Field(default_factory=default_spool_dir)
    library: Path | None = None
    refresh_ms: int = Field(default=1000, ge=200)
    fabric_fold_above: int = Field(default=256, ge=0)
    retention_days: int | None = Field(default=None, ge=1)
    maintenance_interval_s: float = Field(default=3600.0, gt=0)
    rollup_interval_s: float = Field(default=10.0, gt=0)
    job_lost_after_s: float = Field(default=600.0, gt=0)
    # bounds at the edge (collector/ingest, server/http_guard.py; stacklens/connguard.py)
    max_connections: int = Field(default=4096, ge=16)
    max_connections_per_peer: int = Field(default=1024, ge=1)
    handshake_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    idle_timeout_s: float = Field(default=3900.0, gt=0)  # above the hooks' longest interval
    ingest_buffer_mb: int = Field(default=64, ge=1)
    http_max_body_mb: int = Field(default=32, ge=1)
    max_frame_bytes: int = Field(default=BOUNDS["max_body_bytes"], ge=BOUNDS["max_body_bytes"])
    max_clock_skew_s: float = Field(default=300.0, gt=0, le=86_400)
    ingest_horizon_days: int = Field(default=31, ge=1, le=3660)
    max_new_days_per_hour: int = Field(default=8, ge=1, le=366)
    max_mb_per_hour: int = Field(default=262_144, ge=1, le=1 << 26)
    max_stored_mb: int = Field(default=1 << 22, ge=1, le=1 << 30)
    max_run_files: int = Field(default=100_000, ge=100, le=10_000_000)
    max_run_comms: int = Field(default=10_000, ge=16, le=1_000_000)
    max_run_callsites: int = Field(default=1 << 20, ge=256, le=1 << 24)
    # who may read (server/access/, docs/access.md)
    auth_mode: Literal["none", "proxy", "oidc"] = "none"
    allow_open_bind: bool = False
    http_allowed_hosts: str = ""  # comma-separated, as every list below
    proxy_user_header: str = "X-Forwarded-User"
    proxy_addresses: str = ""
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = Field(default="", repr=False)
    oidc_user_claim: str = "preferred_username"
    oidc_groups_claim: str = "groups"
    session_secret: str = Field(default="", repr=False)
    session_hours: float = Field(default=12.0, gt=0)
    admin_users: str = ""
    admin_group: str = ""
    token_days: float = Field(default=90.0, gt=0)
    api_token: str = Field(default="", repr=False)  # what `stacklens report` sends
    # fabric sampler (collector/fabric)
    fabric_source: Literal["auto", "none", "mad", "sysfs", "replay"] = "auto"
    fabric_interval_ms: int = Field(default=1000, ge=50)
    fabric_rediscover_s: float = Field(default=60.0, gt=0)
    fabric_min_sample_ms: int = Field(default=500, ge=0)
    fabric_missed_sweeps: int = Field(default=3, ge=1, le=1000)
    fabric_replay_file: Path | None = None
    fabric_sweep_workers: int | None = Field(default=None, ge=1, le=32)
    fabric_store_queue: int = Field(default=8, ge=1, le=1000)
    # traffic attribution (server/traffic, docs/attribution.md)
    fabric_paths: Literal["fixed", "parallel", "adaptive"] = "fixed"
    storage_servers: str = ""  # mount=host,host;mount=host
    storage_placement: Literal["stripe", "file-hash"] = "stripe"
    # incident detectors (server/incidents)
    incidents: Literal["on", "off"] = "on"
    incident_utilisation: float = Field(default=0.8, ge=0.0, le=1.0)
    incident_xmit_wait_per_s: float = Field(default=1_000_000.0, gt=0)
    incident_sweeps: int = Field(default=2, ge=1, le=100)
    incident_clear_sweeps: int = Field(default=3, ge=1, le=1000)
    incident_link_errors: int = Field(default=1, ge=1)
    incident_flaps: int = Field(default=2, ge=1)
    incident_slowdown: float = Field(default=3.0, gt=1.0)
    incident_baseline_s: float = Field(default=120.0, gt=0)
    incident_min_time_ms: float = Field(default=50.0, ge=0)
    incident_min_s: float = Field(default=5.0, ge=0)
    incident_imbalance_sweeps: int = Field(default=2, ge=1, le=100)
    regression_factor: float = Field(default=0.0, ge=0)
    alert_webhook: str = ""

    @field_validator("regression_factor")
    @classmethod
    def _check_regression_factor(cls, value: float) -> float:
        if value != 0 and value <= 1:
            raise ValueError("STACKLENS_REGRESSION_FACTOR is 0 (off) or a number above 1")
        return value

    @field_validator("collector")
    @classmethod
    def _check_collector(cls, value: str) -> str:
        split_endpoint(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        if value and not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
            raise ValueError(
                f"STACKLENS_PUBLIC_URL={value!r}: give the dashboard's address as "
                "http(s)://host[:port][/path]"
            )
        return value.rstrip("/")

    @field_validator("storage_servers")
    @classmethod
    def _check_storage(cls, value: str) -> str:
        parse_storage_servers(value)
        return value

    @field_validator("ingest_token")
    @classmethod
    def _check_token(cls, value: str) -> str:
        if not valid_token(value):  # the value is never shown, not even in part
            raise ValueError(f"STACKLENS_INGEST_TOKEN must be {TOKEN_RULE}")
        return value

    @field_validator("proxy_addresses")
    @classmethod
    def _check_proxies(cls, value: str) -> str:
        for item in cls.items(value):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"STACKLENS_PROXY_ADDRESSES: {item!r} is not an address or network (CIDR)"
                ) from None
        return value

    @staticmethod
    def items(value: str) -> list[str]:
        """The items of a comma-separated setting (http_allowed_hosts, proxy_addresses,
        admin_users), blanks dropped."""
        return [part.strip() for part in value.split(",") if part.strip()]

    def public_base_url(self) -> str:
        """The dashboard's address as people reach it, for links sent elsewhere (alerts):
        STACKLENS_PUBLIC_URL, else http://HTTP_HOST:HTTP_PORT (this host's name when bound
        to every address)."""
        if self.public_url:
            return self.public_url
        host = self.http_host if self.http_host not in ("0.0.0.0", "::", "") else socket.getfqdn()
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.http_port}"

    def check_exposure(self) -> str | None:
        """Whether the HTTP server may start as configured: ConfigError (one line) for
        auth_mode=none on an address other than loopback; with allow_open_bind, the warning
        to print instead (None: nothing to say)."""
        if self.auth_mode != "none" or self.http_host in LOOPBACK_HOSTS:
            return None
        exposed = (
            f"STACKLENS_HTTP_HOST={self.http_host} without authentication: anyone who reaches "
            "it reads every job, user, command and path"
        )
        if not self.allow_open_bind:
            raise ConfigError(
                f"refusing to serve on {exposed}; set STACKLENS_AUTH_MODE=proxy or oidc, or "
                "STACKLENS_HTTP_HOST=127.0.0.1 (STACKLENS_ALLOW_OPEN_BIND=1 serves anyway)"
            )
        return f"warning: serving on {exposed} (STACKLENS_ALLOW_OPEN_BIND=1)"

    @field_validator("admin_uids", "collector_user")
    @classmethod
    def _check_users(cls, value: str) -> str:
        for name in filter(None, (part.strip() for part in value.split(","))):
            user_id(name)
        return value

    def admins(self) -> frozenset[int]:
        """The uids of `admin_uids`."""
        return frozenset(user_id(p.strip()) for p in self.admin_uids.split(",") if p.strip())

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


def config_file_path() -> Path:
    """The configuration file: STACKLENS_CONFIG_FILE, else its default."""
    default = Settings.model_fields["config_file"].default
    return Path(os.environ.get("STACKLENS_CONFIG_FILE") or default)


def config_file_values() -> dict[str, str]:
    """The STACKLENS_* lines of the configuration file ({} when there is none); a file that
    cannot be read is a ConfigError."""
    path = config_file_path()
    if not path.exists():
        return {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the configuration file {path}: {exc}") from exc
    values = dotenv_values(stream=io.StringIO(text))
    return {k: v or "" for k, v in values.items() if k.startswith("STACKLENS_")}


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment and the configuration file
    (the environment wins); ConfigError if the file cannot be read."""
    path = config_file_path()
    config_file_values()  # a file that cannot be read says so in one line
    return Settings(_env_file=path if path.exists() else None)  # type: ignore[call-arg]
