"""pyverbs source: device and port attributes of the local HCAs through libibverbs.

pyverbs is optional (`pip install 'stacklens[verbs]'`); on a machine without an RDMA device
(like the development machines) `get_device_list()` raises or returns nothing. Both cases,
and a missing pyverbs, become VerbsUnavailable with the reason, never a crash. Counters come
from sysfs (collector/fabric/sysfs.py): verbs has no port-counter query; where a device
exists, the sysfs source takes the port attributes from here (`port_attributes`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: ibv_port_state codes → the names sysfs uses (`ports/<n>/state`).
PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
#: Physical port states (IBTA PortInfo.PortPhysicalState) → sysfs names (`phys_state`).
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
               5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}  # fmt: skip
#: ibv link layers → sysfs names (`link_layer`).
LINK_LAYERS = {0: "InfiniBand", 1: "InfiniBand", 2: "Ethernet"}
#: ibv active_width codes → lanes.
WIDTHS = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
#: ibv active_speed codes → (name, Gb/s per lane) as the kernel's `rate` file writes them.
SPEEDS = {1: ("SDR", 2.5), 2: ("DDR", 5), 4: ("QDR", 10), 8: ("FDR10", 10), 16: ("FDR", 14),
          32: ("EDR", 25), 64: ("HDR", 50), 128: ("NDR", 100), 256: ("XDR", 200)}  # fmt: skip


class VerbsUnavailable(RuntimeError):
    """pyverbs cannot be used here; the message says why (not installed, no device)."""


@dataclass
class VerbsPort:
    """Attributes of one port as libibverbs reports them (codes as in ibv_port_attr)."""

    device: str
    port: int
    state: int
    lid: int
    active_width: int
    active_speed: int
    link_layer: int
    phys_state: int = 0
    fw_version: str = ""


def rate_text(width: int, speed: int) -> str | None:
    """The data rate as the kernel writes it in sysfs, `100 Gb/sec (4X EDR)`; None for
    codes this table does not know."""
    if width not in WIDTHS or speed not in SPEEDS:
        return None
    name, lane = SPEEDS[speed]
    return f"{WIDTHS[width] * lane:g} Gb/sec ({WIDTHS[width]}X {name})"


def port_attributes(port: VerbsPort) -> dict[str, str | int | None]:
    """A port's attributes in the sysfs source's terms (SysfsPort fields)."""
    return {
        "state": PORT_STATES.get(port.state),
        "phys_state": PHYS_STATES.get(port.phys_state),
        "rate": rate_text(port.active_width, port.active_speed),
        "link_layer": LINK_LAYERS.get(port.link_layer),
        "lid": port.lid,
    }


def _pyverbs():
    try:
        import pyverbs.device as device  # optional dependency
    except ImportError as exc:
        raise VerbsUnavailable(
            f"pyverbs is not installed ({exc}; pip install 'stacklens[verbs]')"
        ) from exc
    return device


class VerbsSource:
    """Port attributes of every local RDMA device through pyverbs."""

    name = "verbs"

    def __init__(self) -> None:
        self._device = _pyverbs()

    def ports(self) -> list[VerbsPort]:
        """Every port of every device; VerbsUnavailable if there is no device."""
        try:
            devices = self._device.get_device_list()
        except Exception as exc:  # pyverbs raises PyverbsRDMAError when there is no device
            raise VerbsUnavailable(f"no RDMA device (pyverbs: {exc})") from exc
        if not devices:
            raise VerbsUnavailable("no RDMA device (pyverbs lists none)")
        out = []
        for dev in devices:
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            with self._device.Context(name=name) as ctx:
                attr = ctx.query_device()
                for port in range(1, attr.phys_port_cnt + 1):
                    p = ctx.query_port(port)
                    out.append(VerbsPort(name, port, p.state, p.lid, p.active_width,
                                         p.active_speed, p.link_layer, p.phys_state,
                                         str(attr.fw_version)))  # fmt: skip
        return out


def optional_verbs() -> VerbsSource | None:
    """A VerbsSource if pyverbs is installed, else None (sysfs alone then)."""
    try:
        return VerbsSource()
    except VerbsUnavailable:
        return None
