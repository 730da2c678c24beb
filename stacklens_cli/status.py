"""`stacklens status`: what runs where, and how fresh its data is, seen from this node.

One line per part: the database (embedded or external, its schema revision), the
collector and the API (does something answer at their addresses), the deployment's modes
(ingest and auth, stacklens/modes.py) with the users sending lately, and a warning line for
trusted ingest with several of them, the simulated fabric,
the newest fabric sweep and the newest frames stored (with their age), this node's spool
backlog (as root also every other user's default spool that holds frames) and its RDMA
devices. It only looks: it starts nothing, and works when nothing
runs. Exit status 0 when the database, collector and API all answer, else 3.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from stacklens import __version__
from stacklens.modes import modes_text, senders_text, trusted_warning
from stacklens.settings import Settings
from stacklens_cli.helptext import subcommand

#: Exit status when a part is not running (as LSB's "status" actions say it).
NOT_RUNNING = 3


def add_parser(sub) -> None:
    """Register the `status` subcommand on the CLI's subparsers."""
    subcommand(
        sub, "status",
        "Show what runs where (database, collector, API, fabric), how fresh the newest "
        "frames and fabric sweep are, and this node's spool backlog and RDMA devices.",
        ["stacklens status",
         "STACKLENS_DATABASE_URL=postgresql://u:pw@db/stacklens stacklens status"],
        "It starts nothing and works when nothing runs; exit status 3 when the database, "
        "collector or API does not answer.",
    ).set_defaults(func=cmd_status)  # fmt: skip


def age(ns: int, now_ns: int) -> str:
    """How long ago `ns` was, for a person: `4 s ago`, `12 min ago`, `3 h ago`, `2 d ago`."""
    seconds = max(0, (now_ns - ns) // 1_000_000_000)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def _database(settings: Settings) -> tuple[str | None, str]:
    """(a libpq URL to read from or None, the database line)."""
    from stacklens.db import libpq_url, running_embedded_url

    if settings.database_url:
        external = libpq_url(settings.database_url)
        try:
            psycopg.connect(external, connect_timeout=3).close()
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return None, f"external PostgreSQL: not reachable ({first})"
        return external, "external PostgreSQL: reachable"
    data_dir = settings.state_dir / "pg"
    embedded = running_embedded_url(data_dir)
    if embedded is None:
        return None, f"embedded PostgreSQL in {data_dir}: not running (`stacklens up` starts it)"
    return embedded, f"embedded PostgreSQL in {data_dir}: running"


def _listening(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _api(settings: Settings) -> tuple[bool, str]:
    """(answers, the API line)."""
    host = "127.0.0.1" if settings.http_host in ("0.0.0.0", "::", "") else settings.http_host
    url = f"http://{host}:{settings.http_port}/"
    try:
        health = httpx.get(f"{url}api/health", timeout=3).json()
        return True, f"{url} answers (stacklens {health.get('version', '?')})"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False, f"{url}: nothing answers (`stacklens up` serves it)"


def _mean_ms(families: dict, name: str, labels: dict[str, str] | None = None) -> tuple[int, str]:
    """(how many, their mean in ms as text) of a histogram of the server's /metrics."""
    wanted = labels or {}
    samples = {s.name: s.value for s in families[name].samples
               if all(s.labels.get(k) == v for k, v in wanted.items())}  # fmt: skip
    count = int(samples[f"{name}_count"])
    return count, (f"{samples[f'{name}_sum'] / count * 1000:.0f} ms" if count else "-")


def _metric_families(settings: Settings) -> dict[str, Any]:
    """The server's /metrics by family name; {} when it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    from stacklens_cli.report import api_base_url

    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    try:
        answer = httpx.get(f"{api_base_url(settings)}/metrics", headers=headers, timeout=3)
    except httpx.HTTPError:
        return {}
    if answer.status_code != 200:
        return {}
    return {f.name: f for f in text_string_to_metric_families(answer.text)}


def _modes(settings: Settings, families: dict[str, Any], senders: int | None) -> list[tuple]:
    """The modes row (the server's, from its /metrics; this node's settings when it does
    not answer) with the users sending (None: the database is not reachable), and the
    warning row of trusted ingest with several of them."""
    if "stacklens_mode_info" in families:
        labels = families["stacklens_mode_info"].samples[0].labels
        ingest = labels["ingest"]
        text = f"{modes_text(ingest, labels['auth'])} (the server's)"
    else:
        ingest = settings.ingest_auth
        text = f"{modes_text(ingest, settings.auth_mode)} (this node's settings)"
    text += f"; {'users sending unknown' if senders is None else senders_text(senders)}"
    warning = trusted_warning(ingest, senders)
    return [("modes", text), *([("warning", warning)] if warning else [])]


def _served_metrics(families: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows from the server's /metrics: the fabric sampler (sweeps, their mean duration
    against the period, ports answered and failed, stale ports, discoveries), the detector
    passes and the web server's answers by kind; [] when /metrics did not answer."""
    if not families:
        return []

    def value(name: str) -> int:
        return int(families[name].samples[0].value)

    rows = []
    if "stacklens_fabric_sweep_seconds" in families:
        sweeps, sweep_ms = _mean_ms(families, "stacklens_fabric_sweep_seconds")
        found, discovery_ms = _mean_ms(families, "stacklens_fabric_discovery_seconds")
        period = families["stacklens_fabric_sweep_interval_seconds"].samples[0].value
        rows.append(("sampler", f"{sweeps} sweeps of {sweep_ms} on average (every {period:g} "
                     f"s), {value('stacklens_fabric_sweep_errors')} failed, "
                     f"{value('stacklens_fabric_sweeps_behind')} behind schedule; "
                     f"{value('stacklens_fabric_sweeps_stored')} stored, "
                     f"{value('stacklens_fabric_sweeps_merged')} merged, "
                     f"{value('stacklens_fabric_store_queue')} waiting; ports "
                     f"{value('stacklens_fabric_ports_answered')} answered, "
                     f"{value('stacklens_fabric_ports_failed')} did not, "
                     f"{value('stacklens_fabric_stale_ports')} stale now; {found} discoveries "
                     f"of {discovery_ms} on average"))  # fmt: skip
    if "stacklens_incident_pass_seconds" in families:
        passes, pass_ms = _mean_ms(families, "stacklens_incident_pass_seconds")
        rows.append(("detector", f"{passes} passes of {pass_ms} on average, "
                     f"{value('stacklens_incident_errors')} failed"))  # fmt: skip
    kinds = sorted({s.labels["kind"] for s in families["stacklens_http_request_seconds"].samples})
    served = []
    for kind in kinds:
        count, mean = _mean_ms(families, "stacklens_http_request_seconds", {"kind": kind})
        served.append(f"{kind.replace('_', ' ')} {count} ({mean} on average)")
    rows.append(("requests", "; ".join(served) or "none yet"))
    return rows


def _spool(spool: Path) -> str:
    """The spool line: frames waiting in this node's spool directory (read through
    descriptors, never following a link: stacklens_cli/replay.py)."""
    from stacklens_cli.replay import Refused, open_directory

    if str(spool) == "off":
        return "off (STACKLENS_SPOOL_DIR=off)"
    try:
        fd = open_directory(spool)
    except (OSError, Refused):
        return f"{spool}: none (nothing waits)"
    try:
        return _spool_line(spool, *_spool_counts(fd))
    finally:
        os.close(fd)


def _spool_counts(fd: int) -> tuple[int, int, int]:
    """(frames waiting, their bytes, frames in rejected/) of the spool opened as `fd`."""
    from stacklens_cli.replay import REJECTED_DIR, SPOOL_SUFFIX, walk

    waiting = rejected = size = 0
    for where, dir_fd, names in walk(fd, into_rejected=True):
        for name in names:
            if not name.endswith(SPOOL_SUFFIX):
                continue
            if where[:1] == (REJECTED_DIR,):
                rejected += 1
                continue
            with contextlib.suppress(FileNotFoundError):  # delivered meanwhile
                size += os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
                waiting += 1
    return waiting, size, rejected


def _spool_line(spool: Path, waiting: int, size: int, rejected: int) -> str:
    """What the spool line says of a spool's counts."""
    line = f"{spool}: {waiting} frames waiting ({size} bytes), {rejected} rejected"
    return line + (" (`stacklens replay` delivers them)" if waiting else "")


def _other_users_spools(own: Path) -> list[str]:
    """As root: the spool lines of the other users' default spools on this node (what
    `stacklens replay --all-users` delivers) that hold something, each opened by handle
    and checked to be its user's like the replay does; [] for other users."""
    from stacklens.settings import default_spool_dir
    from stacklens_cli.replay import Refused, Spool, user_spools

    if os.geteuid() != 0:
        return []
    root = default_spool_dir().parent
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    lines = []
    try:
        for uid, name in user_spools(root_fd):
            if root / name == own:
                continue
            try:
                with Spool.open(root / name, uid, root_fd) as spool:
                    counts = _spool_counts(spool.fd)
            except (OSError, Refused):
                continue  # gone, or no longer its user's, since it was listed
            if counts[0] or counts[2]:
                lines.append(_spool_line(root / name, *counts))
    finally:
        os.close(root_fd)
    return lines


def status_lines(settings: Settings, now_ns: int | None = None) -> tuple[bool, list[str]]:
    """(database, collector and API all answer; the lines of `stacklens status`)."""
    from collector.fabric.service import sim_state_file
    from collector.fabric.sysfs import describe_local_hcas
    from collector.store.status import recent_senders, stored_status
    from stacklens.db import head_revision

    now_ns = time.time_ns() if now_ns is None else now_ns
    url, database = _database(settings)
    collector_up = _listening(settings.collector_host, settings.collector_port)
    collector = f"{settings.collector}: " + (
        "listening"
        if collector_up
        else "nothing listens (`stacklens up` or `collector` starts one)"
    )
    api_up, api = _api(settings)
    sim = "running" if sim_state_file(settings).exists() else "not running"
    senders = None
    if url is None:
        fabric = frames = "unknown (the database is not reachable)"
    else:
        with psycopg.connect(url, connect_timeout=3) as conn:
            stored = stored_status(conn)
            senders = recent_senders(conn, now_ns) if stored.revision else None
        head = head_revision()
        database += f", schema {stored.revision or 'empty'}" + (
            "" if stored.revision == head else f" (newest {head}: `stacklens migrate`)"
        )
        fabric = (
            f"{stored.fabric_nodes} nodes, {stored.fabric_ports} ports; last sweep "
            f"{age(stored.newest_sweep_ns, now_ns)}"
            if stored.newest_sweep_ns is not None
            else "no sweep stored (`stacklens up` samples a fabric it finds)"
        )
        frames = (
            f"last received {age(stored.newest_frame_ns, now_ns)} (job {stored.newest_job}); "
            f"{stored.jobs} jobs"
            if stored.newest_frame_ns is not None
            else "none received yet"
        )
    families = _metric_families(settings) if api_up else {}
    rows = [
        ("database", database),
        ("collector", collector),
        ("API", api),
        *_modes(settings, families, senders),
        ("fabric-sim", sim),
        ("fabric", fabric),
        ("frames", frames),
        ("spool", _spool(settings.spool_dir)),
        *(("spool", line) for line in _other_users_spools(settings.spool_dir)),
        *(("RDMA", line) for line in describe_local_hcas()),
        *_served_metrics(families),
    ]
    lines = [f"stacklens {__version__} on {socket.gethostname()}"]
    lines += [f"{name:<10}  {text}" for name, text in rows]
    return url is not None and collector_up and api_up, lines


def cmd_status(settings: Settings, _: argparse.Namespace) -> int:
    """Print the status; exit 0 when everything runs, else 3."""
    running, lines = status_lines(settings)
    print("\n".join(lines))
    return 0 if running else NOT_RUNNING
