"""The incident detectors against injected faults on mixed normal load: five simulated
minutes of bench/incidents.py's scripted hour (the real fabric store, collector, database
and detector service on a simulated clock; a 32-host fat tree, six jobs of four ranks with
their noise, bursts under the thresholds, a job that ends and one that starts) with one
fault of each kind. Every fault is found within its documented bound, with the exact
latency the script gives, and no incident is false. CI's guard of `bench.incidents`."""

from __future__ import annotations

from bench.incidents import make_script, run, score
from server.incidents.detect import Thresholds

S = 10**9
T0 = 1_700_000_000 * S


def test_each_fault_found_within_its_bound_and_nothing_else(collector, pg_url):
    script = make_script(hosts=32, seconds=300, repeat=1)
    assert [(f.kind, f.start_s, f.length_s) for f in script.faults] == [
        ("congestion", 30, 19), ("link_errors", 64, 3), ("late_rank", 98, 19),
        ("congestion", 132, 19), ("link_flap", 166, 12), ("io_stall", 200, 19),
        ("saturated", 234, 19),
    ]  # fmt: skip
    th = Thresholds()
    out = run(script, pg_url, collector.address, th, T0, token="secret")
    result = score(script, out, th)
    found = {kind: (row["injected"], row["found"], row["in_bound"], row["max_latency_s"])
             for kind, row in result["rows"].items()}  # fmt: skip
    assert found == {
        "congestion": (2, 2, 2, 5.25),  # held STACKLENS_INCIDENT_MIN_S, seen 0.25 s later
        "victim_collectives": (1, 1, 1, 5.25),  # named when the congestion is reported
        "victim_p2p": (1, 1, 1, 5.25),
        "saturated": (1, 1, 1, 5.25),
        "link_errors": (1, 1, 1, 1.25),  # the sweep they are counted in
        "link_flap": (1, 1, 1, 0.25),  # at its second down/up event
        "io_stall": (1, 1, 1, 7.75),
        "late_rank": (1, 1, 1, 7.75),
    }
    assert result["false"] == [] and result["incidents"] == 7
    assert (result["precision"], result["recall"]) == (1.0, 1.0)
