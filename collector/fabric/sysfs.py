"""Sysfs source: the local HCAs' port counters and attributes from /sys/class/infiniband.

Pure parsing over a directory tree (tests use fixture trees): for each device and port,
`ports/<n>/{state,phys_state,rate,link_layer,lid}` and the files under `counters/` and
`hw_counters/`. An absent file is None, never 0. port_xmit_data/port_rcv_data count
4-octet words (the kernel's documented unit) and become bytes here, once.

Where pyverbs and an RDMA device exist, the port attributes (state, physical state, rate,
link layer, LID) are libibverbs' (collector/fabric/verbs.py); the counters stay sysfs'.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from collector.fabric.counters import RawSweep
from collector.fabric.verbs import VerbsPort, VerbsSource, VerbsUnavailable, port_attributes
from stacklens.constants import PORT_COUNTERS
from stacklens.port_counters import PORT_COUNTER_TABLE

log = logging.getLogger(__name__)

SYSFS_ROOT = Path("/sys/class/infiniband")

#: counters/ file → (stacklens counter, multiplier to bytes/packets/ticks), from
#: contract/port_counters.def.
COUNTER_FILES = {c.sysfs: (c.name, c.scale) for c in PORT_COUNTER_TABLE}


@dataclass
class SysfsPort:
    """One local port: attributes and counters (None = file absent or unreadable)."""

    device: str
    port: int
    state: str | None
    phys_state: str | None
    rate: str | None
    rate_bytes_per_s: int | None
    link_layer: str | None
    lid: int | None
    node_guid: int | None
    counters: dict[str, int | None] = field(default_factory=dict)
    raw_counters: dict[str, int | None] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def parse_rate(text: str | None) -> int | None:
    """`100 Gb/sec (4X EDR)` → 12_500_000_000 bytes/s (the kernel reports the data rate)."""
    if not text:
        return None
    m = re.match(r"\s*([\d.]+)\s*Gb/sec", text)
    return int(float(m.group(1)) * 1e9) // 8 if m else None


def _state(text: str | None) -> str | None:
    """`4: ACTIVE` → `ACTIVE`."""
    return text.split(":", 1)[1].strip() if text and ":" in text else text


def read_port(root: Path, device: str, port: int) -> SysfsPort:
    """Parse one port directory of one device."""
    pdir = root / device / "ports" / str(port)
    guid = _read(root / device / "node_guid")
    raw: dict[str, int | None] = {name: None for name in PORT_COUNTERS}
    counters: dict[str, int | None] = dict(raw)
    for fname, (name, mult) in COUNTER_FILES.items():
        value = _int(_read(pdir / "counters" / fname))
        raw[name] = value
        counters[name] = value * mult if value is not None else None
    hw: dict[str, int] = {}
    hw_dir = pdir / "hw_counters"
    if hw_dir.is_dir():
        for f in sorted(hw_dir.iterdir()):
            value = _int(_read(f))
            if value is not None:
                hw[f.name] = value
    rate = _read(pdir / "rate")
    return SysfsPort(
        device=device,
        port=port,
        state=_state(_read(pdir / "state")),
        phys_state=_state(_read(pdir / "phys_state")),
        rate=rate,
        rate_bytes_per_s=parse_rate(rate),
        link_layer=_read(pdir / "link_layer"),
        lid=_int(_read(pdir / "lid")),
        node_guid=int(guid.replace(":", ""), 16) if guid else None,
        counters=counters,
        raw_counters=raw,
        hw_counters=hw,
    )


def read_all(root: Path = SYSFS_ROOT) -> list[SysfsPort]:
    """Every port of every device under `root` (empty if there is no RDMA device)."""
    if not root.is_dir():
        return []
    out = []
    for dev in sorted(p.name for p in root.iterdir()):
        ports_dir = root / dev / "ports"
        if ports_dir.is_dir():
            for port in sorted(int(p.name) for p in ports_dir.iterdir() if p.name.isdigit()):
                out.append(read_port(root, dev, port))
    return out


def with_verbs_attributes(ports: list[SysfsPort], verbs: list[VerbsPort]) -> list[SysfsPort]:
    """`ports` with the attributes libibverbs reports for the same (device, port); counters
    and node GUID stay sysfs'. A port verbs does not list keeps its sysfs attributes."""
    by_port = {(v.device, v.port): v for v in verbs}
    return [
        dataclasses.replace(p, **_rated(port_attributes(by_port[(p.device, p.port)])))
        if (p.device, p.port) in by_port
        else p
        for p in ports
    ]


def _rated(attributes: dict) -> dict:
    """Verbs attributes plus the rate in bytes/s parsed as sysfs' rate text is."""
    return {**attributes, "rate_bytes_per_s": parse_rate(attributes["rate"])}


class SysfsSource:
    """Counter source over the local HCAs (no topology: only this host's ports); port
    attributes from `verbs` when it is given and finds the devices."""

    name = "sysfs"

    def __init__(self, root: Path = SYSFS_ROOT, verbs: VerbsSource | None = None):
        self.root = Path(root)
        self.verbs = verbs
        self._verbs_failed = False

    def ports(self) -> list[SysfsPort]:
        """The local ports, parsed now."""
        ports = read_all(self.root)
        if self.verbs is None or not ports:
            return ports
        try:
            return with_verbs_attributes(ports, self.verbs.ports())
        except VerbsUnavailable as exc:
            if not self._verbs_failed:  # said once; sysfs' attributes meanwhile
                log.warning("port attributes from sysfs: %s", exc)
                self._verbs_failed = True
            return ports

    def discover(self) -> None:
        """No fabric topology from this source (local/recorded counters only)."""
        return None

    def sweep(self) -> RawSweep:
        """One sweep of the local ports; ports missing any standard counter are left out.

        sysfs counters are the kernel's 64-bit values (extended counters where the HCA has
        them), so they are marked extended; a counter file missing makes the port absent.
        """
        t0 = time.time_ns()
        ports = self.ports()
        t1 = time.time_ns()
        complete = [p for p in ports if all(p.counters[c] is not None for c in PORT_COUNTERS)]
        words = np.array(
            [[p.raw_counters[c] for c in PORT_COUNTERS] for p in complete], dtype=np.uint64
        ).reshape(len(complete), len(PORT_COUNTERS))
        return RawSweep.from_words(
            guids=[p.node_guid or 0 for p in complete],
            ports=[p.port for p in complete],
            values=words,
            extended=np.ones(len(complete), dtype=bool),
            answered=np.ones(len(complete), dtype=bool),
            t_start_ns=t0,
            t_end_ns=t1,
        )


def describe_local_hcas(root: Path = SYSFS_ROOT) -> list[str]:
    """What `stacklens status` says of this node's RDMA devices: one line per port (its
    attributes from libibverbs where pyverbs finds the device, else from sysfs, saying
    why), or one line saying there is none."""
    try:
        verbs = VerbsSource().ports()
    except VerbsUnavailable as exc:
        verbs, reason = [], str(exc)
    if verbs:
        return [f"{_port_line(v.device, v.port, port_attributes(v))}, firmware {v.fw_version}"
                for v in verbs]  # fmt: skip
    ports = read_all(root)
    if not ports:
        return [f"{reason}, none in {root}: the local-HCA sampler has nothing to read here"]
    return [
        f"{_port_line(p.device, p.port, dataclasses.asdict(p))} (from sysfs: {reason})"
        for p in ports
    ]


def _port_line(device: str, port: int, a: dict) -> str:
    """`mlx5_0 port 1: ACTIVE, LinkUp, LID 0x2a, 100 Gb/sec (4X EDR), InfiniBand`."""
    lid = f"{a['lid']:#x}" if a["lid"] is not None else "?"
    return (f"{device} port {port}: {a['state']}, {a['phys_state']}, LID {lid}, {a['rate']}, "
            f"{a['link_layer']}")  # fmt: skip
