"""pyverbs source: device and port attributes of the local HCAs through libibverbs.

pyverbs is optional (`pip install pyverbs`); on a machine without an RDMA device (like the
development machines) `get_device_list()` raises or returns nothing. Both cases, and a
missing pyverbs, become VerbsUnavailable with the reason, never a crash. Counters come
from sysfs (collector/fabric/sysfs.py): verbs has no port-counter query.
"""

from __future__ import annotations

from dataclasses import dataclass


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


def _pyverbs():
    try:
        import pyverbs.device as device  # optional dependency
    except ImportError as exc:
        raise VerbsUnavailable(f"pyverbs is not installed ({exc})") from exc
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
            raise VerbsUnavailable(f"no RDMA device ({exc})") from exc
        if not devices:
            raise VerbsUnavailable("no RDMA device")
        out = []
        for dev in devices:
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            with self._device.Context(name=name) as ctx:
                for port in range(1, ctx.query_device().phys_port_cnt + 1):
                    attr = ctx.query_port(port)
                    out.append(
                        VerbsPort(
                            name,
                            port,
                            attr.state,
                            attr.lid,
                            attr.active_width,
                            attr.active_speed,
                            attr.link_layer,
                        )
                    )
        return out
