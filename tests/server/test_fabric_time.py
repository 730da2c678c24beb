"""The fabric over time, exactly: a seeded port history with known counters
(tests/server/fabric_history.py) written by the real FabricStore into the real database,
read back through the API. Every window's sums equal the sums of its samples, the
per-minute rollups equal the raw sums, an empty window is empty, an error burst is one
event with its start, end and counts, and a port that stopped answering has no rate."""

from __future__ import annotations

import csv
import io

import numpy as np
import psycopg
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from stacklens.constants import ERROR_COUNTERS, PORT_COUNTERS, RATE_COUNTERS
from tests.conftest import query, route_path
from tests.server.fabric_data import HOST1, HOST2, LEAF1, SECOND, SPINE1, topology
from tests.server.fabric_history import (
    BURSTS,
    ENDS,
    SILENT_FROM,
    START,
    SWEEPS,
    History,
    increment,
    write_history,
)

MINUTE = 60 * SECOND
#: Link 1: spine1[1] (a) - leaf1[3] (b); link 2: host1[1] (a) - leaf1[1] (b); link 3: host2[1]
#: (a) - leaf1[2] (b), as tests/server/fabric_data.py's topology stores them.
CAPACITY = {1: 4e9, 2: 4e9, 3: 2e9}  # host2's end is unknown (0): leaf1[2]'s
LINK_ENDS = {1: ((SPINE1, 1), (LEAF1, 3)), 2: ((HOST1, 1), (LEAF1, 1)), 3: ((HOST2, 1), (LEAF1, 2))}


@pytest.fixture
def history(pg_url: str) -> History:
    return write_history(pg_url)


def _get(client: TestClient, name: str, **params) -> dict:
    response = client.get(route_path(client, name), params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _s(ns: int) -> str:
    """ns as the API's epoch seconds (exact: 9 decimals)."""
    return f"{ns // SECOND}.{ns % SECOND:09d}"


def _both(a, b):
    return None if a is None or b is None else a + b


def _expected_link(history: History, link: int, lo: int, hi: int) -> dict:
    """What /links over [lo, hi) must say of `link`, from the generated samples alone."""
    a, b = (history.expected(end, lo, hi) for end in LINK_ENDS[link])

    def rate(x: dict, c: str) -> float | None:
        return None if x[c] is None or not x[f"t_{c}"] else x[c] * 1e9 / x[f"t_{c}"]

    rates = [r for r in (rate(a, "xmit_bytes"), rate(b, "xmit_bytes")) if r is not None]
    return {
        "samples": a["samples"] + b["samples"],
        "a_to_b_bytes": a["xmit_bytes"],
        "b_to_a_bytes": b["xmit_bytes"],
        "a_to_b_bytes_per_s": rate(a, "xmit_bytes"),
        "b_to_a_bytes_per_s": rate(b, "xmit_bytes"),
        "utilisation": max(rates) / CAPACITY[link] if rates else None,
        "xmit_wait": _both(a["xmit_wait"], b["xmit_wait"]),
        "xmit_wait_per_s": _both(rate(a, "xmit_wait"), rate(b, "xmit_wait")),
        "errors": {c: _both(a[c], b[c]) for c in ERROR_COUNTERS},
    }


#: Windows: aligned minutes, unaligned spans across minutes, within one minute, one sample,
#: the reset and the bursts, everything, and none.
WINDOWS = [
    (START - 25 * SECOND + MINUTE, START - 25 * SECOND + 3 * MINUTE),
    (START + 7 * SECOND + 300_000, START + 151 * SECOND),
    (START + 40 * SECOND, START + 50 * SECOND),
    (START + 12 * SECOND, START + 12 * SECOND + 1),
    (START + 85 * SECOND, START + 125 * SECOND),
    (START - MINUTE, START + SWEEPS * SECOND + MINUTE),
    (START + 0 * SECOND + 1, START + 1 * SECOND),  # no sweep ended in it
]


@pytest.mark.parametrize("lo, hi", WINDOWS)
def test_window_sums_are_the_sums_of_its_samples(history, api_client, lo, hi):
    page = _get(api_client, "fabric_links", **{"from": _s(lo), "to": _s(hi)})
    assert (page["from_ns"], page["to_ns"], page["page"]["total"]) == (lo, hi, 3)
    loads = {x["id"]: x for x in page["links"]}
    for link in (1, 2, 3):
        got = {k: loads[link][k] for k in _expected_link(history, link, lo, hi)}
        assert got == _expected_link(history, link, lo, hi), (link, lo, hi)
    # the windowed state says the same of every link, in columns
    state = _get(api_client, "fabric_state", **{"from": _s(lo), "to": _s(hi)})
    for i, link in enumerate(state["links"]["id"]):
        assert state["links"]["utilisation"][i] == loads[link]["utilisation"]
        assert state["links"]["errors"][i] == loads[link]["errors_total"]
        assert state["links"]["xmit_wait_per_s"][i] == loads[link]["xmit_wait_per_s"]


def test_known_values_of_a_window(history, api_client):
    """One window worked by hand: sweeps 85..124 (40 samples per end), link 2."""
    lo, hi = START + 85 * SECOND, START + 125 * SECOND
    x = next(x for x in _get(api_client, "fabric_links", **{"from": _s(lo), "to": _s(hi)})["links"]
             if x["id"] == 2)  # fmt: skip
    assert x["samples"] == 80
    # host1[1]'s PortRcvErrors reset at sweep 90 (unknown there); known in the 39 others: 0
    assert x["errors"]["rcv_errors"] == 0
    # leaf1[1]'s symbol errors: the burst at sweep 120 (5)
    assert x["errors"]["symbol_errors"] == BURSTS[120] and x["errors_total"] == 5
    # host1[1] sent these bytes, at 1 s a sample
    assert x["a_to_b_bytes"] == history.expected((HOST1, 1), lo, hi)["xmit_bytes"]
    assert x["a_to_b_bytes_per_s"] == x["a_to_b_bytes"] / 40


def _rollups(pg_url: str) -> dict[str, tuple[list, list]]:
    """Per rollup table: (its rows, the same sums computed from the raw samples)."""
    sums = ", ".join(f"sum(d_{c})" for c in PORT_COUNTERS)
    known = ", ".join(
        f"coalesce(sum(dt_ns) FILTER (WHERE d_{c} IS NOT NULL AND dt_ns > 0), 0)"
        for c in RATE_COUNTERS
    )
    columns = ", ".join([*(f"d_{c}" for c in PORT_COUNTERS), *(f"t_{c}" for c in RATE_COUNTERS)])
    out = {}
    with psycopg.connect(pg_url) as conn:
        for table, key, span in (("fabric_port_minutes", "minute_ns", MINUTE),
                                 ("fabric_port_10s", "start_ns", 10 * SECOND)):  # fmt: skip
            raw = conn.execute(
                f"SELECT port_id, ts_ns / {span} * {span}, count(*), max(ts_ns), bit_or(flags), "
                f"{sums}, {known} FROM fabric_port_samples GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()
            rolled = conn.execute(
                f"SELECT port_id, {key}, samples, last_ns, flags, {columns} FROM {table} "
                "ORDER BY 1, 2"
            ).fetchall()
            out[table] = (rolled, raw)
    return out


def test_minute_rollups_equal_the_raw_sums(history, pg_url):
    kept = _rollups(pg_url)
    for table, (rolled, raw) in kept.items():
        assert rolled == raw, table
    # six ports; the 200 sweeps from :25 fall in four UTC minutes and 21 spans of 10 s
    assert [len(raw) for _, raw in kept.values()] == [6 * 4, 6 * 21]
    # rebuilt from the samples (as after a bulk load), they are the same
    store = FabricStore(pg_url)
    try:
        rows = store.rebuild_rollups(START - 25 * SECOND, START - 25 * SECOND + 5 * MINUTE)
    finally:
        store.close()
    assert rows == 6 * 4 + 6 * 21
    assert _rollups(pg_url) == kept
    # and the generated values: leaf1[1]'s symbol errors per minute
    minutes = {}
    for (end, _), s in history.samples.items():
        if end == (LEAF1, 1) and s["deltas"]["symbol_errors"]:
            minute = s["ts"] // MINUTE * MINUTE
            minutes[minute] = minutes.get(minute, 0) + s["deltas"]["symbol_errors"]
    with psycopg.connect(pg_url) as conn:
        stored = conn.execute(
            "SELECT minute_ns, d_symbol_errors FROM fabric_port_minutes m JOIN fabric_ports p "
            "ON p.id = m.port_id WHERE p.guid = %s AND p.port = 1 AND d_symbol_errors > 0",
            (LEAF1 - (1 << 64),),
        ).fetchall()
    assert dict(stored) == minutes


def test_a_sweep_written_in_two_parts_is_rolled_up_once(pg_url):
    """Two writes with one sweep end (ports answering in two parts): each part's samples are
    added to the rollups once (the second write had added the first part's again)."""
    ends = ENDS
    store = FabricStore(pg_url)
    try:
        store.write_topology(topology(), START - 10 * SECOND, [])
        tracker = DeltaTracker()
        values = np.zeros((len(ends), len(PORT_COUNTERS)), dtype=np.uint64)
        halves = [np.arange(len(ends)) < 3, np.arange(len(ends)) >= 3]
        for ts, answered in ((START, halves[0] | halves[1]), (START + SECOND, halves[0]),
                             (START + SECOND, halves[1])):  # fmt: skip
            values += np.uint64(1000)
            store.write_samples(tracker.update(RawSweep.from_words(
                [g for g, _ in ends], [p for _, p in ends], values.copy(),
                np.ones(len(ends), dtype=bool), answered, ts - SECOND // 10, ts,
            )))  # fmt: skip
    finally:
        store.close()
    for table, (rolled, raw) in _rollups(pg_url).items():
        assert rolled == raw, table
        assert sum(row[2] for row in rolled) == 2 * len(ends), table


def _series(client: TestClient, **params) -> dict:
    return _get(client, "fabric_series", **params)


def test_series_steps_add_up_to_the_window(history, api_client):
    lo = START - 25 * SECOND  # a whole minute
    hi = lo + 4 * MINUTE + 17 * SECOND  # and a partial one
    whole = _expected_link(history, 1, lo, hi)
    for step, resolution in ((60, "minutes"), (1, "samples"), (7, "samples"), (120, "minutes"),
                             (10, "10 s"), (30, "10 s")):  # fmt: skip
        answer = _series(api_client, link=1, step=step, **{"from": _s(lo), "to": _s(hi)})
        assert (answer["resolution"], answer["step_ns"]) == (resolution, step * SECOND)
        assert answer["metrics"][:3] == ["samples", "a_to_b_bytes", "b_to_a_bytes"]
        cols = answer["columns"]
        assert sum(cols["samples"]) == whole["samples"]
        for metric in ("a_to_b_bytes", "b_to_a_bytes", "xmit_wait"):
            assert sum(v for v in cols[metric] if v is not None) == whole[metric]
        # each step equals the window of that step
        for i, t in enumerate(answer["t_ns"]):
            one = _expected_link(history, 1, t, min(t + step * SECOND, hi))
            assert {m: cols[m][i] for m in ("samples", "a_to_b_bytes", "a_to_b_bytes_per_s",
                    "utilisation", "xmit_wait")} == {m: one[m] for m in ("samples",
                    "a_to_b_bytes", "a_to_b_bytes_per_s", "utilisation", "xmit_wait")}  # fmt: skip
    # 1 s steps are the samples themselves: one step per sweep that ended in the window
    raw = _series(api_client, link=1, step=1, **{"from": _s(lo), "to": _s(hi)})
    assert raw["t_ns"] == [history.ts(i) for i in range(SWEEPS) if lo <= history.ts(i) < hi]


def test_port_and_node_series(history, api_client):
    lo, hi = START, START + 100 * SECOND
    leaf = f"{LEAF1:#018x}"
    port = _series(api_client, guid=leaf, port=1, step=10, **{"from": _s(lo), "to": _s(hi)})
    assert (port["subject"], port["name"], port["port"]) == ("port", "leaf1[1]", 1)
    mine = history.expected((LEAF1, 1), lo, hi)
    assert sum(v for v in port["columns"]["xmit_bytes"] if v) == mine["xmit_bytes"]
    assert sum(port["columns"]["symbol_errors"]) == mine["symbol_errors"] == 6
    node = _series(api_client, guid=leaf, step=100, **{"from": _s(lo), "to": _s(hi)})
    ends = [(LEAF1, 1), (LEAF1, 2), (LEAF1, 3)]
    assert node["subject"] == "node" and node["t_ns"] == [lo]
    assert node["columns"]["samples"] == [sum(history.expected(e, lo, hi)["samples"] for e in ends)]
    assert node["columns"]["rcv_bytes"] == [
        sum(history.expected(e, lo, hi)["rcv_bytes"] or 0 for e in ends)
    ]
    assert node["capacity_bytes_per_s"] == 10_000_000_000  # 4 + 2 + 4 GB/s


def test_an_empty_window_is_empty(history, api_client):
    empty = {"from": "1600000000", "to": "1600000060"}
    assert _series(api_client, link=1, **empty)["t_ns"] == []
    assert _series(api_client, link=1, **empty)["columns"]["samples"] == []
    loads = _get(api_client, "fabric_links", **empty)["links"]
    assert {(x["samples"], x["a_to_b_bytes"], x["utilisation"], x["xmit_wait"]) for x in loads} == {
        (0, None, None, None)
    }
    state = _get(api_client, "fabric_state", **empty)
    assert state["links"]["utilisation"] == [None, None, None] and state["ts_ns"] is None
    assert _get(api_client, "fabric_events", **empty)["events"] == []


def test_an_error_burst_is_one_event_with_start_and_end(history, api_client):
    everything = {"from": _s(START - MINUTE), "to": _s(START + SWEEPS * SECOND)}
    bursts = _get(api_client, "fabric_events", kind="error_burst", **everything)["events"]
    # newest first: the one-sweep burst at 120, then the one over sweeps 50..52
    assert [(b["subject"], b["link_id"], b["start_ns"], b["end_ns"]) for b in bursts] == [
        ("leaf1[1]", 2, history.ts(119), history.ts(120)),
        ("leaf1[1]", 2, history.ts(49), history.ts(52)),
    ]
    assert bursts[1]["details"] == {
        "counts": {**dict.fromkeys(ERROR_COUNTERS, 0), "symbol_errors": 6},
        "sweeps": 3,
        "last_ns": history.ts(52),
    }
    assert bursts[0]["details"]["counts"]["symbol_errors"] == 5
    # a window inside the first burst finds it; one between the two finds neither
    inside = {"from": _s(history.ts(51)), "to": _s(history.ts(51) + 1)}
    assert [b["id"] for b in _get(api_client, "fabric_events", **inside)["events"]] == [
        bursts[1]["id"]
    ]
    between = {"from": _s(history.ts(60)), "to": _s(history.ts(100))}
    assert _get(api_client, "fabric_events", link=2, **between)["events"] == []


def test_events_are_paged(history, api_client):
    everything = {"from": _s(START - MINUTE), "to": _s(START + SWEEPS * SECOND)}
    first = _get(api_client, "fabric_events", limit=1, **everything)
    assert first["page"]["total"] == 2 and len(first["events"]) == 1
    second = _get(api_client, "fabric_events", limit=1, cursor=first["page"]["next_cursor"],
                  **everything)  # fmt: skip
    assert second["page"]["next_cursor"] is None
    assert [first["events"][0]["start_ns"], second["events"][0]["start_ns"]] == [
        history.ts(119), history.ts(49)
    ]  # fmt: skip


def test_a_port_that_stopped_answering_has_no_rate(history, api_client):
    """host2[1] answered no sweep of the last 4 (its newest sample is 4 s older than the last
    sweep: over the 3 intervals of staleness): its link has no current rate, the others do;
    the data, years old, is stale."""
    loads = {x["id"]: x for x in _get(api_client, "fabric_links")["links"]}
    assert loads[3]["a_to_b_bytes_per_s"] is None and loads[3]["a_sample"] is None
    assert loads[3]["b_to_a_bytes_per_s"] == 4 * _last_gain(history, (LEAF1, 2))
    assert loads[1]["a_to_b_bytes_per_s"] is not None
    state = _get(api_client, "fabric_state")
    assert state["freshness"] == {
        "last_sweep_ns": history.ts(SWEEPS - 1), "sweep_interval_ns": SECOND,
        "stale_after_ns": 3 * SECOND, "stale": True,
    }  # fmt: skip
    i = state["links"]["id"].index(3)
    assert state["links"]["bytes_per_s"][i] == loads[3]["b_to_a_bytes_per_s"]
    assert history.ts(SILENT_FROM - 1) < history.ts(SWEEPS - 1) - 3 * SECOND


def _last_gain(history: History, end: tuple[int, int]) -> float:
    return history.samples[(end, SWEEPS - 1)]["deltas"]["xmit_bytes"] / 4


def test_files_and_refusals(history, api_client):
    url = api_client.app.url_path_for("fabric_series")
    window = {"from": _s(START), "to": _s(START + 10 * SECOND), "link": 1}
    text = api_client.get(url, params={**window, "format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 10 and int(rows[0]["t_ns"]) == START
    assert int(rows[1]["a_to_b_bytes"]) == history.samples[((SPINE1, 1), 1)]["deltas"]["xmit_bytes"]
    parquet = api_client.get(url, params={**window, "format": "parquet"}).content
    table = pq.read_table(io.BytesIO(parquet))
    assert table.num_rows == 10 and table.column("samples").to_pylist() == [2] * 10
    for name, params in (
        ("fabric_series", {"link": 1, "since": "1"}),
        ("fabric_series", {}),
        ("fabric_series", {"link": 1, "guid": "0x1"}),
        ("fabric_series", {"guid": "leaf1"}),
        ("fabric_series", {"link": 1, "step": "0.001", "from": "0", "to": "1000"}),
        ("fabric_links", {"window": "1h"}),
        ("fabric_links", {"from": "yesterday"}),
        ("fabric_state", {"from": "10", "to": "5"}),
        ("fabric_topology", {"since": "0"}),
        ("fabric_events", {"kind": "storm"}),
    ):
        response = api_client.get(api_client.app.url_path_for(name), params=params)
        assert response.status_code == 422, (name, params, response.text)
    for name, params in (
        ("fabric_series", {"link": 99}),
        ("fabric_series", {"guid": "0x1", "port": 1}),
        ("fabric_links", {"cursor": "eyJ4Ijp9"}),
    ):
        response = api_client.get(api_client.app.url_path_for(name), params=params)
        assert response.status_code == 404, (name, params, response.text)


def test_topology_of_a_window(history, pg_url, api_client):
    """The topology then: host2's link was up during the sweeps; after its unplugging it is
    down in every window ending later."""
    from tests.server.fabric_data import topology

    later = START + (SWEEPS + 10) * SECOND
    store = FabricStore(pg_url)
    try:
        store.write_topology(topology(False), later, topology().diff(topology(False)))
    finally:
        store.close()
    then = _get(api_client, "fabric_topology", **{"from": _s(START), "to": _s(START + SECOND)})
    assert [lk["state"] for lk in then["links"]] == ["up", "up", "up"]
    assert [n["gone"] for n in then["nodes"]] == [False] * 4
    after = _get(api_client, "fabric_topology", **{"from": _s(later), "to": _s(later + 1)})
    assert [(lk["state"], lk["down_ns"]) for lk in after["links"]][2] == ("down", later)
    assert _get(api_client, "fabric_topology")["links"][2]["state"] == "down"


def test_reading_every_port_by_time_gives_the_same_answers(history, pg_url, api_client,
                                                           monkeypatch):  # fmt: skip
    """Above MAX_PORTS_PROBED ports a query reads every port's rows of its time range: a
    port of no link (an earlier fabric's, with big deltas) changes nothing."""
    from server.fabric import history as fabric_history

    with psycopg.connect(pg_url) as conn:
        ghost = conn.execute(
            "INSERT INTO fabric_ports (guid, port, port_guid, lid, state, phys_state, width, "
            "speed, speed_ext, capacity_bytes_per_s, updated_ns) VALUES "
            "(77, 1, 77, 9, 4, 5, 2, 4, 0, 0, 0) RETURNING id"
        ).fetchone()[0]
        counters = ", ".join(["1000000000"] * (2 * len(PORT_COUNTERS)))
        conn.execute(
            f"INSERT INTO fabric_port_samples SELECT {ghost}, ts_ns, dt_ns, 0, {counters} "
            "FROM fabric_port_samples WHERE port_id = 1"
        )
        conn.execute(
            "INSERT INTO fabric_port_minutes SELECT %s, minute_ns, samples, last_ns, 0, "
            f"{', '.join(['10'] * (len(PORT_COUNTERS) + len(RATE_COUNTERS)))} "
            "FROM fabric_port_minutes WHERE port_id = 1",
            (ghost,),
        )
    windows = [{"from": _s(lo), "to": _s(hi)} for lo, hi in WINDOWS[:3]]
    leaf = {"guid": f"{LEAF1:#018x}", "step": 10, **windows[0]}
    before = [_get(api_client, "fabric_links", **w) for w in windows]
    before.append(_series(api_client, **leaf))
    monkeypatch.setattr(fabric_history, "MAX_PORTS_PROBED", 0)
    after = [_get(api_client, "fabric_links", **w) for w in windows]
    after.append(_series(api_client, **leaf))
    assert after == before


def test_a_window_is_summed_once_until_its_samples_change(history, pg_url, api_client,
                                                          monkeypatch):  # fmt: skip
    """The links' sums over a window are made once and shared by both orders and every page
    of /links and by the state over it, with the exact values of the samples; a sample
    stored late into the window (host2[1]'s at sweep 197, which it missed) sums it again,
    and the answers then count that sample, exactly."""
    from server.fabric import repository

    summed = []
    window_columns = repository.window_columns

    def counted(*args):
        summed.append(args[2:4])
        return window_columns(*args)

    monkeypatch.setattr(repository, "window_columns", counted)
    lo, hi = START + 130 * SECOND + SECOND // 2, START + 200 * SECOND
    window = {"from": _s(lo), "to": _s(hi)}

    def answers() -> tuple[dict, list, dict]:
        whole = _get(api_client, "fabric_links", **window)
        pages, cursor = [], None
        while True:
            page = _get(api_client, "fabric_links", sort="errors", limit=2, **window,
                        **({"cursor": cursor} if cursor else {}))  # fmt: skip
            pages += page["links"]
            cursor = page["page"]["next_cursor"]
            if cursor is None:
                return whole, pages, _get(api_client, "fabric_state", **window)

    def check(whole: dict, pages: list, state: dict) -> None:
        loads = {x["id"]: x for x in whole["links"]}
        for link in (1, 2, 3):
            got = {k: loads[link][k] for k in _expected_link(history, link, lo, hi)}
            assert got == _expected_link(history, link, lo, hi), link
        assert pages == sorted(whole["links"], key=lambda x: repository.rank_key(x, "errors"))
        assert state["links"]["id"] == [1, 2, 3]
        assert state["links"]["utilisation"] == [loads[i]["utilisation"] for i in (1, 2, 3)]

    first = answers()
    check(*first)
    assert answers() == first and summed == [(lo, hi)]  # summed once for 2 + 4 answers

    _store_late_sample(history, pg_url)
    later = answers()
    assert summed == [(lo, hi), (lo, hi)]
    check(*later)
    link3 = {x["id"]: x for x in later[0]["links"]}[3]
    assert link3["samples"] == {x["id"]: x for x in first[0]["links"]}[3]["samples"] + 1


def _store_late_sample(history: History, pg_url: str) -> None:
    """host2[1]'s sample of sweep 197 (which it missed), stored late by the real store
    half a second after that sweep's end (the store adds the samples stored at a sweep's
    end to the rollups: no other port's) with the deltas since sweep 195, and added to
    the oracle."""
    host2 = ENDS.index((HOST2, 1))
    late = history.ts(197) + SECOND // 2

    def values(i: int) -> np.ndarray:
        """host2[1]'s counters (words) after sweep i."""
        gains = [[increment(host2, c, j) for c in range(len(PORT_COUNTERS))]
                 for j in range(1, i + 1)]  # fmt: skip
        return np.array([np.sum(gains, axis=0, dtype=np.uint64)], dtype=np.uint64)

    def sweep(i: int, end: int) -> RawSweep:
        one = np.ones(1, dtype=bool)
        return RawSweep.from_words([HOST2], [1], values(i), one, one, end - SECOND // 10,
                                   end)  # fmt: skip

    tracker = DeltaTracker()
    tracker.update(sweep(SILENT_FROM - 1, history.ts(SILENT_FROM - 1)))
    store = FabricStore(pg_url)
    try:
        store.ensure_ports(sweep(197, late), late)  # the store learns the port's id
        assert store.write_samples(tracker.update(sweep(197, late))) == 1
    finally:
        store.close()
    deltas = {c: sum(increment(host2, k, j) for j in (196, 197))
                 * (4 if c in ("xmit_bytes", "rcv_bytes") else 1)
              for k, c in enumerate(PORT_COUNTERS)}  # fmt: skip
    dt = late - history.ts(SILENT_FROM - 1)
    history.samples[((HOST2, 1), 197)] = {"ts": late, "dt": dt, "deltas": deltas}


def test_windows_with_the_same_whole_minutes_share_their_sums(history, pg_url, api_client,
                                                              monkeypatch):  # fmt: skip
    """Two windows 1 ms apart with the same whole minute (sweeps 155-214's): its sums are
    made once, each window adds its own partial minutes, exactly; a sample stored late into
    that minute sums it again."""
    from server.fabric import repository

    summed = []
    window_minutes = repository.window_minutes

    def counted(*args):
        summed.append(args[2:4])
        return window_minutes(*args)

    monkeypatch.setattr(repository, "window_minutes", counted)
    lo, hi = START + 150 * SECOND + SECOND // 2, START + 216 * SECOND
    minute = (START + 155 * SECOND, START + 215 * SECOND)
    assert minute[0] % MINUTE == 0 and minute[1] - minute[0] == MINUTE

    def check() -> None:
        for shift in (0, 10**6):
            window = {"from": _s(lo + shift), "to": _s(hi + shift)}
            loads = {x["id"]: x for x in _get(api_client, "fabric_links", **window)["links"]}
            for link in (1, 2, 3):
                expected = _expected_link(history, link, lo + shift, hi + shift)
                assert {k: loads[link][k] for k in expected} == expected, (link, shift)

    check()
    assert summed == [minute]
    _store_late_sample(history, pg_url)
    check()
    assert summed == [minute, minute]


def test_the_time_index_summarizes_each_block_range_as_it_fills(history, pg_url):
    """The samples' time index (a BRIN) of every day partition the store made has
    autosummarize on (migration 0023): a block range is summarized once filled, not only
    when autovacuum vacuums the partition (until then a raw read by time rechecks every
    row of every range without a summary)."""
    rows = query(
        pg_url,
        "SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'ix_fabric_port_samples_time_brin'::regclass",
    )
    assert rows and [options for _, options in rows] == [["autosummarize=on"]] * len(rows)
