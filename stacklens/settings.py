"""The one settings object of stacklens; every field is read from a `STACKLENS_*` variable.

The C hook library reads the same variable names (STACKLENS_COLLECTOR,
STACKLENS_INTERVAL_MS, STACKLENS_INGEST_TOKEN, ...), so one environment configures
both sides.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConfigError(Exception):
    """A configuration that cannot work; the message says what to change."""


def _default_state_dir() -> Path:
    """State directory: /var/lib/stacklens for root, ~/.local/state/stacklens otherwise.

    Never under root's home directory: the embedded PostgreSQL opens every parent
    directory of its data directory to other users.
    """
    if os.geteuid() == 0:
        return Path("/var/lib/stacklens")
    return Path.home() / ".local" / "state" / "stacklens"


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
    collector: str = Field(
        default="127.0.0.1:7451",
        description="host:port where the collector listens for hook frames (and hooks send).",
    )
    ingest_token: str = Field(default="", max_length=63)
    interval_ms: int = Field(default=1000, ge=10)
    max_frame_bytes: int = Field(default=16 * 1024 * 1024, ge=4096)
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
    spool_dir: Path = Field(
        default=None,  # type: ignore[assignment]  # filled in from state_dir
        description="Where hooks spool undelivered frames; default state_dir/spool.",
        validate_default=False,
    )
    # fabric sampler (collector/fabric)
    fabric_source: Literal["auto", "none", "mad", "sysfs", "replay"] = Field(
        default="auto",
        description="auto = MAD via a running `stacklens fabric-sim` or local HCAs, else none.",
    )
    fabric_interval_ms: int = Field(default=1000, ge=50, description="Port counter sweep period.")
    fabric_rediscover_s: float = Field(default=60.0, gt=0, description="Topology re-scan period.")
    fabric_replay_file: Path | None = Field(default=None, description="Recorded sweeps to replay.")
    fabric_sweep_workers: int | None = Field(
        default=None,
        ge=1,
        le=32,
        description="MAD worker processes a sweep is split over; default min(4, CPU count).",
    )

    @model_validator(mode="after")
    def _default_spool_dir(self) -> Settings:
        if self.spool_dir is None:
            self.spool_dir = self.state_dir / "spool"
        return self

    @field_validator("collector")
    @classmethod
    def _check_collector(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"expected host:port, got {value!r}")
        return value

    @property
    def collector_host(self) -> str:
        """Host part of `collector`."""
        return self.collector.rpartition(":")[0]

    @property
    def collector_port(self) -> int:
        """Port part of `collector`."""
        return int(self.collector.rpartition(":")[2])


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
