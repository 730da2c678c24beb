"""pyverbs as far as this machine allows: it is installed (the `verbs` extra) and loads
libibverbs, which finds no RDMA device here (none can exist on these machines), so the
calls that read a real device's attributes (`VerbsSource.ports` past the device list)
cannot run. What runs: the real pyverbs call that finds no device and the one line that
says so, the translation of libibverbs' attribute codes to sysfs' terms, and the sysfs
source taking a port's attributes from verbs ports (given here as the dataclass
`VerbsSource.ports` returns, since no device can produce them) while its counters stay
sysfs'."""

from __future__ import annotations

import dataclasses
from importlib.metadata import version
from pathlib import Path

import pytest

from collector.fabric.sysfs import (
    SysfsSource,
    describe_local_hcas,
    read_all,
    with_verbs_attributes,
)
from collector.fabric.verbs import (
    VerbsPort,
    VerbsSource,
    VerbsUnavailable,
    optional_verbs,
    port_attributes,
    rate_text,
)

FIXTURE = Path(__file__).parent / "fixtures" / "sysfs"
NO_DEVICE = "no RDMA device (pyverbs: Failed to get devices list)"


def test_pyverbs_is_installed_and_finds_no_device_here():
    assert version("pyverbs") == "56.0rc1"
    source = optional_verbs()
    assert isinstance(source, VerbsSource)
    with pytest.raises(VerbsUnavailable) as caught:
        source.ports()
    assert str(caught.value) == NO_DEVICE
    assert describe_local_hcas() == [
        f"{NO_DEVICE}, none in /sys/class/infiniband: the local-HCA sampler has nothing to "
        "read here"
    ]
    # A node whose sysfs lists devices pyverbs cannot open (or without pyverbs): sysfs' say.
    assert describe_local_hcas(FIXTURE) == [
        f"mlx5_0 port 1: ACTIVE, LinkUp, LID 0x2a, 100 Gb/sec (4X EDR), InfiniBand (from "
        f"sysfs: {NO_DEVICE})",
        f"mlx5_0 port 2: DOWN, Disabled, LID 0x0, 10 Gb/sec (4X SDR), InfiniBand (from "
        f"sysfs: {NO_DEVICE})",
    ]


def test_rates_as_the_kernel_writes_them():
    cases = {
        (2, 32): "100 Gb/sec (4X EDR)",
        (2, 16): "56 Gb/sec (4X FDR)",
        (2, 8): "40 Gb/sec (4X FDR10)",
        (2, 64): "200 Gb/sec (4X HDR)",
        (1, 1): "2.5 Gb/sec (1X SDR)",
        (8, 4): "120 Gb/sec (12X QDR)",
        (16, 128): "200 Gb/sec (2X NDR)",
        (3, 32): None,  # not a width code
        (2, 3): None,  # not a speed code
    }
    assert {key: rate_text(*key) for key in cases} == cases


def test_port_codes_in_sysfs_terms():
    port = VerbsPort("mlx5_0", 1, state=4, lid=7, active_width=2, active_speed=64,
                     link_layer=1, phys_state=5, fw_version="20.31.1014")  # fmt: skip
    assert port_attributes(port) == {"state": "ACTIVE", "phys_state": "LinkUp",
                                     "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand",
                                     "lid": 7}  # fmt: skip
    down = dataclasses.replace(port, state=1, phys_state=3, link_layer=2)
    assert port_attributes(down) | {"rate": None} == {"state": "DOWN", "phys_state": "Disabled",
                                                      "rate": None, "link_layer": "Ethernet",
                                                      "lid": 7}  # fmt: skip


def test_sysfs_ports_take_verbs_attributes_and_keep_sysfs_counters():
    sysfs = read_all(FIXTURE)
    verbs = [VerbsPort("mlx5_0", 1, state=2, lid=9, active_width=2, active_speed=64,
                       link_layer=1, phys_state=5)]  # fmt: skip
    p1, p2 = with_verbs_attributes(sysfs, verbs)
    assert (p1.state, p1.phys_state, p1.rate, p1.rate_bytes_per_s, p1.link_layer, p1.lid) == (
        "INIT", "LinkUp", "200 Gb/sec (4X HDR)", 25_000_000_000, "InfiniBand", 9,
    )  # fmt: skip
    assert (p1.counters, p1.hw_counters, p1.node_guid) == (
        sysfs[0].counters, sysfs[0].hw_counters, sysfs[0].node_guid,
    )  # fmt: skip
    assert p2 == sysfs[1]  # verbs does not list it: sysfs' attributes


def test_sysfs_source_with_real_pyverbs_and_no_device_keeps_sysfs_attributes(caplog):
    source = SysfsSource(FIXTURE, verbs=optional_verbs())
    assert source.ports() == read_all(FIXTURE)
    assert source.ports() == read_all(FIXTURE)
    warnings = [r.getMessage() for r in caplog.records if r.name == "collector.fabric.sysfs"]
    assert warnings == [f"port attributes from sysfs: {NO_DEVICE}"]  # said once
