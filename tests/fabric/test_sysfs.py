"""sysfs reader against a fixture tree written from the kernel's documented layout."""

from __future__ import annotations

from pathlib import Path

from collector.fabric.sysfs import SysfsSource, parse_rate, read_all

FIXTURE = Path(__file__).parent / "fixtures" / "sysfs"
GUID = 0x0C42A1030049B8F6


def test_ports_attributes_and_counters():
    p1, p2 = read_all(FIXTURE)
    assert (p1.device, p1.port, p1.node_guid) == ("mlx5_0", 1, GUID)
    assert (p1.state, p1.phys_state, p1.link_layer, p1.lid) == (
        "ACTIVE",
        "LinkUp",
        "InfiniBand",
        42,
    )
    assert p1.rate == "100 Gb/sec (4X EDR)" and p1.rate_bytes_per_s == 12_500_000_000
    assert p1.counters == {
        "xmit_bytes": 4_000_000,
        "rcv_bytes": 10_000_000,
        "xmit_pkts": 7000,
        "rcv_pkts": 9000,
        "xmit_wait": 123,
        "symbol_errors": 1,
        "link_error_recovery": 0,
        "link_downed": 2,
        "rcv_errors": 3,
        "xmit_discards": 4,
        "vl15_dropped": 0,
    }
    assert p1.hw_counters == {"out_of_buffer": 17, "rx_write_requests": 5}
    assert (p2.state, p2.phys_state, p2.rate_bytes_per_s) == ("DOWN", "Disabled", 1_250_000_000)
    assert p2.counters["xmit_bytes"] == 4 * 4294967295
    assert p2.counters["xmit_wait"] is None  # absent file: unknown, not 0
    assert p2.hw_counters == {}


def test_sweep_keeps_only_complete_ports():
    s = SysfsSource(FIXTURE).sweep()
    assert s.guids.tolist() == [GUID] and s.ports.tolist() == [1]
    assert s.value(GUID, 1, "rcv_bytes") == 10_000_000
    assert s.value(GUID, 1, "xmit_wait") == 123


def test_no_device_tree(tmp_path: Path):
    assert read_all(tmp_path / "absent") == []
    assert len(SysfsSource(tmp_path / "absent").sweep()) == 0


def test_parse_rate():
    assert parse_rate("56 Gb/sec (4X FDR)") == 7_000_000_000
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 312_500_000
    assert parse_rate("garbage") is None and parse_rate(None) is None
