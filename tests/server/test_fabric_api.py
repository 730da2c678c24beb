"""The fabric API over a real database written by the real FabricStore (no simulator needed):
topology with a gone node and a down link, link rates, utilisation, error deltas with unknown
≠ 0, both sort orders and limits, events newest first; the state computed as sweeps land."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from collector.fabric.store import FabricStore
from server.app import create_app
from stacklens.db import make_engine
from tests.conftest import route_path
from tests.server.fabric_data import HOST1 as HOST_GUID
from tests.server.fabric_data import SECOND, T0, relink_host2, write_small_fabric

SPINE1, LEAF1 = "0xf452140300000001", "0xf452140300000002"
HOST1, HOST2 = "0x0002c90300000011", "0x0002c90300000012"
ERRORS = (
    "symbol_errors",
    "link_error_recovery",
    "link_downed",
    "rcv_errors",
    "xmit_discards",
    "vl15_dropped",
)


def _get(api_client: TestClient, name: str, **params) -> Any:
    response = api_client.get(route_path(api_client, name), params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_empty_fabric(pg_url, api_client):
    assert _get(api_client, "fabric_topology") == {"nodes": [], "links": []}
    links = _get(api_client, "fabric_links")
    assert links["links"] == [] and links["page"] == {
        "total": 0,
        "limit": 500,
        "next_cursor": None,
    }
    assert links["freshness"] == {
        "last_sweep_ns": None, "sweep_interval_ns": None, "stale_after_ns": 3 * SECOND,
        "stale": True,
    }  # fmt: skip
    assert _get(api_client, "fabric_events")["events"] == []


def test_topology_nodes_and_links(pg_url, api_client):
    write_small_fabric(pg_url)
    topo = _get(api_client, "fabric_topology")
    node = {"nports": 36, "gone": False, "gone_ns": None, "last_seen_ns": T0 + 3 * SECOND}
    host = {**node, "nports": 1}
    assert topo["nodes"] == [
        {"guid": LEAF1, "name": "leaf1", "type": "switch", "lid": 2, **node},
        {"guid": SPINE1, "name": "spine1", "type": "switch", "lid": 1, **node},
        {"guid": HOST1, "name": "host1", "type": "hca", "lid": 3, **host},
        {
            "guid": HOST2,
            "name": "host2",
            "type": "hca",
            "lid": 4,
            **host,
            "gone": True,
            "gone_ns": T0 + 3 * SECOND,
            "last_seen_ns": T0,
        },
    ]
    up = {"state": "up", "down_ns": None, "capacity_bytes_per_s": 4_000_000_000}
    assert topo["links"] == [
        {
            "id": 1,
            "a": {"guid": SPINE1, "port": 1, "name": "spine1"},
            "b": {"guid": LEAF1, "port": 3, "name": "leaf1"},
            **up,
        },
        {
            "id": 2,
            "a": {"guid": HOST1, "port": 1, "name": "host1"},
            "b": {"guid": LEAF1, "port": 1, "name": "leaf1"},
            **up,
        },
        {
            "id": 3,
            "a": {"guid": HOST2, "port": 1, "name": "host2"},
            "b": {"guid": LEAF1, "port": 2, "name": "leaf1"},
            "state": "down",
            "down_ns": T0 + 3 * SECOND,
            "capacity_bytes_per_s": 2_000_000_000,  # host2's end is unknown (0)
        },
    ]


def _links(api_client: TestClient, **params) -> list:
    return _get(api_client, "fabric_links", **params)["links"]


def _sample(ts_ns: int, dt_ns: int | None, **values) -> dict:
    """A PortSample: every delta 0 unless given (None = unknown), no flags."""
    errors = {c: values.pop(c, 0 if dt_ns else None) for c in ERRORS}
    base = dict.fromkeys(
        ("xmit_bytes", "rcv_bytes", "xmit_pkts", "rcv_pkts", "xmit_wait"), 0 if dt_ns else None
    )
    return {
        "ts_ns": ts_ns,
        "dt_ns": dt_ns,
        **base,
        **values,
        "errors": errors,
        "saturated": [],
        "reset": values.pop("reset", []),
    }


def test_link_loads_rates_utilisation_and_errors(pg_url, api_client):
    write_small_fabric(pg_url)
    t2 = T0 + 2 * SECOND
    no_errors = dict.fromkeys(ERRORS, 0)
    spine_leaf = {
        "id": 1,
        "a": {"guid": SPINE1, "port": 1, "name": "spine1"},
        "b": {"guid": LEAF1, "port": 3, "name": "leaf1"},
        "state": "up",
        "capacity_bytes_per_s": 4_000_000_000,
        "ts_ns": t2,
        "samples": 2,
        "a_to_b_bytes": 2_000_000_000,
        "b_to_a_bytes": 1_000_000_000,
        "a_to_b_bytes_per_s": 2e9,
        "b_to_a_bytes_per_s": 1e9,
        "a_to_b_pkts_per_s": 0.0,
        "b_to_a_pkts_per_s": 0.0,
        "utilisation": 0.5,
        "errors": no_errors,
        "errors_total": 0,
        "saturated": [],
        "unknown": [],
        "xmit_wait": 0,
        "xmit_wait_per_s": 0.0,
        "a_sample": _sample(t2, SECOND, xmit_bytes=2_000_000_000, rcv_bytes=1_000_000_000),
        "b_sample": _sample(t2, SECOND, xmit_bytes=1_000_000_000, rcv_bytes=2_000_000_000),
    }
    host1 = {
        "id": 2,
        "a": {"guid": HOST1, "port": 1, "name": "host1"},
        "b": {"guid": LEAF1, "port": 1, "name": "leaf1"},
        "state": "up",
        "capacity_bytes_per_s": 4_000_000_000,
        "ts_ns": t2,
        "samples": 2,
        "a_to_b_bytes": 0,
        "b_to_a_bytes": 400_000_000,
        "a_to_b_bytes_per_s": 0.0,
        "b_to_a_bytes_per_s": 4e8,
        "a_to_b_pkts_per_s": 0.0,
        "b_to_a_pkts_per_s": 0.0,
        "utilisation": 0.1,
        # host1's PortRcvErrors went from 10 to 4: reset, unknown (not 0, not -6)
        "errors": {**no_errors, "symbol_errors": 3, "link_error_recovery": 1, "rcv_errors": None},
        "errors_total": 4,
        "saturated": [],
        "unknown": ["rcv_errors"],
        "xmit_wait": 77,
        "xmit_wait_per_s": 77.0,
        "a_sample": {
            **_sample(t2, SECOND, rcv_bytes=400_000_000, rcv_errors=None),
            "reset": ["rcv_errors"],
        },
        "b_sample": _sample(
            t2,
            SECOND,
            xmit_bytes=400_000_000,
            xmit_wait=77,
            symbol_errors=3,
            link_error_recovery=1,
        ),
    }
    host2 = {
        "id": 3,
        "a": {"guid": HOST2, "port": 1, "name": "host2"},
        "b": {"guid": LEAF1, "port": 2, "name": "leaf1"},
        "state": "down",
        "capacity_bytes_per_s": 2_000_000_000,
        # down: the last samples of its ends are not its current load (no stale rates)
        "ts_ns": None,
        "samples": 0,
        "a_to_b_bytes": None,
        "b_to_a_bytes": None,
        "a_to_b_bytes_per_s": None,
        "b_to_a_bytes_per_s": None,
        "a_to_b_pkts_per_s": None,
        "b_to_a_pkts_per_s": None,
        "utilisation": None,
        "errors": dict.fromkeys(ERRORS),
        "errors_total": 0,
        "saturated": [],
        "unknown": ["a_to_b_bytes_per_s", "b_to_a_bytes_per_s", *ERRORS, "xmit_wait"],
        "xmit_wait": None,
        "xmit_wait_per_s": None,
        "a_sample": None,
        "b_sample": None,
    }
    assert _links(api_client) == [spine_leaf, host1, host2]
    assert _links(api_client, sort="errors") == [host1, spine_leaf, host2]
    # Pages of one link: the cursor leads through the whole order, page by page.
    first = _get(api_client, "fabric_links", sort="errors", limit=1)
    assert first["links"] == [host1] and first["page"]["total"] == 3
    second = _get(api_client, "fabric_links", sort="errors", limit=1,
                  cursor=first["page"]["next_cursor"])  # fmt: skip
    third = _get(api_client, "fabric_links", sort="errors", limit=1,
                 cursor=second["page"]["next_cursor"])  # fmt: skip
    assert (second["links"], third["links"]) == ([spine_leaf], [host2])
    assert third["page"]["next_cursor"] is None
    wrong = {"sort": "utilisation", "cursor": first["page"]["next_cursor"]}
    assert (
        api_client.get(api_client.app.url_path_for("fabric_links"), params=wrong).status_code == 404
    )
    # Without the per-end samples: the same rows less a_sample and b_sample.
    brief = [
        {k: v for k, v in x.items() if k not in ("a_sample", "b_sample")}
        for x in (spine_leaf, host1, host2)
    ]
    assert _links(api_client, samples="false") == brief
    bad = api_client.get(api_client.app.url_path_for("fabric_links"), params={"sort": "bytes"})
    assert bad.status_code == 422


def test_events_newest_first(pg_url, api_client):
    write_small_fabric(pg_url)
    t3 = T0 + 3 * SECOND
    # leaf1[1]'s symbol errors and link error recovery moved in the second sweep: a burst,
    # still open (no sweep after it)
    burst = {
        "id": 1,
        "kind": "error_burst",
        "subject": "leaf1[1]",
        "start_ns": T0 + SECOND,
        "end_ns": None,
        "link_id": 2,
        "details": {
            "counts": {**dict.fromkeys(ERRORS, 0), "symbol_errors": 3, "link_error_recovery": 1},
            "sweeps": 1,
            "last_ns": T0 + 2 * SECOND,
        },
    }
    gone = {
        "id": 2,
        "kind": "node_gone",
        "subject": "host2",
        "start_ns": t3,
        "end_ns": None,
        "link_id": None,
        "details": {"guid": HOST2},
    }
    down = {
        "id": 3,
        "kind": "link_down",
        "subject": "host2[1] - leaf1[2]",
        "start_ns": t3,
        "end_ns": None,
        "link_id": 3,
        "details": {"a": [HOST2, 1], "b": [LEAF1, 2]},
    }
    # still open: they overlap the default window (the last 15 minutes), years later
    assert _get(api_client, "fabric_events")["events"] == [down, gone, burst]
    assert _get(api_client, "fabric_events", limit=1)["events"] == [down]
    assert _get(api_client, "fabric_events", link=2)["events"] == [burst]
    assert _get(api_client, "fabric_events", kind="node_gone")["events"] == [gone]
    # host2 back: its down and gone events end there
    relink_host2(pg_url)
    t4 = T0 + 4 * SECOND
    then = {"from": str(T0 // SECOND), "to": str(T0 // SECOND + 10)}
    closed = _get(api_client, "fabric_events", **then)["events"]
    assert closed == [{**down, "end_ns": t4}, {**gone, "end_ns": t4}, burst]
    # closed, they are out of the last 15 minutes; the open burst is not
    assert _get(api_client, "fabric_events")["events"] == [burst]
    # a window starting just after the down's end: not in it; at its end: in it
    assert _get(api_client, "fabric_events", kind="link_down", **{"from": "1700000004.000000001"}
                )["events"] == []  # fmt: skip
    assert _get(api_client, "fabric_events", kind="link_down", **{"from": "1700000004"}
                )["events"] == [{**down, "end_ns": t4}]  # fmt: skip
    # a window before any of them: none; one ending at the down's start: the burst only
    before = {"from": "1600000000", "to": "1700000000"}
    assert _get(api_client, "fabric_events", **before)["events"] == []
    assert _get(api_client, "fabric_events", to=str(T0 // SECOND + 3))["events"] == [burst]


def test_state_is_the_links_answer_in_columns(pg_url, api_client):
    """The shared per-sweep state carries, per link, exactly what /links says of it."""
    write_small_fabric(pg_url)
    state = _get(api_client, "fabric_state")
    loads = {x["id"]: x for x in _links(api_client)}
    cols = state["links"]
    assert cols["id"] == [1, 2, 3]
    for i, link_id in enumerate(cols["id"]):
        x = loads[link_id]
        rates = [r for r in (x["a_to_b_bytes_per_s"], x["b_to_a_bytes_per_s"]) if r is not None]
        assert cols["utilisation"][i] == x["utilisation"]
        assert cols["bytes_per_s"][i] == (max(rates) if rates else None)
        assert cols["errors"][i] == x["errors_total"]
        assert cols["xmit_wait_per_s"][i] == x["xmit_wait_per_s"]
    # leaf1[1] waited 77 ticks over the second sweep's 1 s; link 3 is down: unknown
    assert cols["xmit_wait_per_s"] == [0.0, 77.0, None]
    # link 3 is down (1); link 2 has an unknown error delta (4: host1's reset)
    assert cols["flags"] == [0, 4, 1 | 4]
    assert state["summary"] == {
        "nodes": 4, "switches": 2, "hcas": 2, "gone": 1, "links": 3, "down": 1,
        "erroring": 1, "busiest": 0.5,
    }  # fmt: skip
    assert state["ts_ns"] == T0 + 2 * SECOND
    # the last sweep was long ago: stale (3 intervals of the samples' 1 s)
    assert state["freshness"] == {
        "last_sweep_ns": T0 + 2 * SECOND, "sweep_interval_ns": SECOND,
        "stale_after_ns": 3 * SECOND, "stale": True,
    }  # fmt: skip


def test_etags_change_only_with_a_discovery_or_a_sweep(pg_url, api_client):
    write_small_fabric(pg_url)
    topo_url = api_client.app.url_path_for("fabric_topology")
    state_url = api_client.app.url_path_for("fabric_state")
    topo, state = api_client.get(topo_url), api_client.get(state_url)
    assert state.json()["topology_etag"] == topo.headers["etag"]
    for url, first in ((topo_url, topo), (state_url, state)):
        again = api_client.get(url, headers={"If-None-Match": first.headers["etag"]})
        assert (again.status_code, again.content) == (304, b"")
        assert again.headers["etag"] == first.headers["etag"]
    # A sweep: the state changes, the topology does not.
    store = FabricStore(pg_url)
    try:
        store.port_ids = {(HOST_GUID, 1): _port_id(pg_url)}
        store.forget_latest([(HOST_GUID, 1)])
    finally:
        store.close()
    assert api_client.get(state_url).headers["etag"] != state.headers["etag"]
    same = api_client.get(topo_url, headers={"If-None-Match": topo.headers["etag"]})
    assert same.status_code == 304
    # A discovery (host2 back): both change.
    relink_host2(pg_url)
    after = api_client.get(topo_url, headers={"If-None-Match": topo.headers["etag"]})
    assert after.status_code == 200 and after.headers["etag"] != topo.headers["etag"]
    assert api_client.get(state_url).json()["topology_etag"] == after.headers["etag"]
    assert len(after.json()["links"]) == 3


def _port_id(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT id FROM fabric_ports WHERE guid = %s AND port = 1", (HOST_GUID,)
        ).fetchone()[0]


def test_the_watcher_computes_each_sweep_before_any_request(pg_url):
    """With a recheck period, the app's watcher computes the state of a stored sweep by
    itself: it is in memory (no request made it) and the next request gets exactly it."""
    write_small_fabric(pg_url)
    engine = make_engine(pg_url)
    app = create_app(engine, fabric_recheck_s=0.05)
    shared = app.state.fabric_snapshots
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            first = _computed(shared, None)
            assert json.loads(first.body)["ts_ns"] == T0 + 2 * SECOND
            store = FabricStore(pg_url)
            try:  # a sweep (host1's sample retired): computed again, still unasked
                store.port_ids = {(HOST_GUID, 1): _port_id(pg_url)}
                store.forget_latest([(HOST_GUID, 1)])
            finally:
                store.close()
            second = _computed(shared, first.etag)
            answer = client.get(app.url_path_for("fabric_state"))
            assert (answer.content, answer.headers["etag"]) == (second.body, second.etag)
    finally:
        engine.dispose()


def _computed(shared, not_etag: str | None, timeout_s: float = 10.0):
    """The watcher's state once its ETag is not `not_etag` (waits for it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = shared.recent("state")
        if state is not None and state.etag != not_etag:
            return state
        assert time.monotonic() < deadline, "the watcher computed nothing"
        time.sleep(0.02)
