"""Answers shared by every viewer, over a real database, the real fabric store and the
real collector: the groups of parallel links over a window (server/fabric/snapshot.py,
FabricSnapshots.per_window) are computed once and reused while the window's samples stay
as they are, and computed anew when a sweep is stored into the window or when a window of
the same start ends later, past a sample stored before (the minute's rollup version then
unchanged); a job's families and links (server/traffic/service.py,
AttributionCache.per_job) and its row in the job list anew after any frame of the job is
stored."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from collector.service import BackgroundCollector
from server.compression import COMPRESS_FROM_BYTES
from stacklens import wire
from stacklens.constants import MINUTE_NS, PORT_COUNTERS
from tests.collector.test_ingest import T0 as T0_JOB
from tests.collector.test_ingest import exchange, frame
from tests.conftest import route_path

#: 20 s into a minute: the sweeps below all fall into one minute (one rollup row each port).
T0 = 1_700_000_000_000_000_000
S = 10**9
SPINE, LEAF, HOST = 0xF452_1403_0000_0101, 0xF452_1403_0000_0102, 0x0002_C903_0000_0111
#: Two links spine[1] - leaf[3] and spine[2] - leaf[4] (a parallel group, and the leaf's
#: uplinks: host[1] - leaf[1] makes it a leaf), 4 GB/s each.
ENDS = [(SPINE, 1), (SPINE, 2), (LEAF, 3), (LEAF, 4), (LEAF, 1), (HOST, 1)]
CAPACITY = 4_000_000_000


def _topology() -> Topology:
    nodes = {SPINE: Node(SPINE, NodeType.SWITCH, "spine", 36, 1),
             LEAF: Node(LEAF, NodeType.SWITCH, "leaf", 36, 2),
             HOST: Node(HOST, NodeType.CA, "host mlx5_0", 1, 3)}  # fmt: skip
    ports = {end: Port(end[0], end[1], end[0], nodes[end[0]].lid, 4, 5, 2, 4, 0, CAPACITY)
             for end in ENDS}  # fmt: skip
    links = [Link.of((SPINE, 1), (LEAF, 3)), Link.of((SPINE, 2), (LEAF, 4)),
             Link.of((HOST, 1), (LEAF, 1))]  # fmt: skip
    return Topology(nodes=nodes, ports=ports, links=links)


def _sweep(sent: dict[tuple[int, int], int], t_end_ns: int) -> RawSweep:
    """Every port answering, with these PortXmitData values (bytes; 0 when not given)."""
    rows = np.zeros((len(ENDS), len(PORT_COUNTERS)), dtype=np.uint64)
    for i, end in enumerate(ENDS):
        rows[i, PORT_COUNTERS.index("xmit_bytes")] = sent.get(end, 0) // 4
    everyone = np.ones(len(ENDS), dtype=bool)
    return RawSweep.from_words([g for g, _ in ENDS], [p for _, p in ENDS], rows, everyone,
                               everyone, t_end_ns - S // 10, t_end_ns)  # fmt: skip


def _parallel(client: TestClient, to_ns: int, from_ns: int = T0 - 10 * S) -> dict:
    """The parallel group "leaf – spine" over [from_ns, to_ns) in steps of 1 s."""
    params: dict[str, str | int] = {"from": f"{from_ns / 1e9:.1f}", "to": f"{to_ns / 1e9:.1f}",
                                    "step": 1, "kind": "parallel"}  # fmt: skip
    response = client.get(route_path(client, "fabric_groups"), params=params)
    assert response.status_code == 200, response.text
    (group,) = response.json()["groups"]
    assert group["name"] == "leaf – spine"
    return group


def test_groups_follow_the_samples_of_their_window(pg_url, api_client):
    assert T0 // MINUTE_NS == (T0 + 3 * S) // MINUTE_NS  # one minute's rollup rows
    store = FabricStore(pg_url)
    try:
        store.write_topology(_topology(), T0 - 5 * S, [])
        tracker = DeltaTracker()
        # each second: 2 GB to spine -> leaf over the first link, 0.4 GB over the second
        for i, t in enumerate((T0, T0 + S, T0 + 2 * S)):
            store.write_samples(tracker.update(_sweep({(SPINE, 1): i * 2 * 10**9,
                                                       (SPINE, 2): i * 4 * 10**8}, t)))  # fmt: skip
        # [T0 - 10 s, T0 + 1.5 s): one second of deltas: 0.5 and 0.1 of the capacity
        first = _parallel(api_client, T0 + 3 * S // 2)
        assert [m["utilisation"] for m in first["members"]] == [0.5, 0.1]
        assert first["max_mean"] == pytest.approx(0.5 / 0.3)
        assert _parallel(api_client, T0 + 3 * S // 2) == first  # the kept answer
        # ending later, past the sweep at T0 + 2 s (stored before the first answer, in the
        # same minute): that sweep's second counts too
        later = _parallel(api_client, T0 + 5 * S // 2)
        assert [m["a_to_b_bytes"] or m["b_to_a_bytes"] for m in later["members"]] == [
            4 * 10**9, 8 * 10**8,
        ]  # fmt: skip
        assert later["series"]["t_ns"] == [T0, T0 + S, T0 + 2 * S]
        # starting later by whole steps: the same samples, the same answer; past the first
        # sweep (T0), without it
        assert _parallel(api_client, T0 + 5 * S // 2, T0 - 3 * S) == later
        assert _parallel(api_client, T0 + 5 * S // 2, T0 + S)["series"]["t_ns"] == [
            T0 + S, T0 + 2 * S,
        ]  # fmt: skip
        # a sweep stored into the window (and its minute): 1.6 GB more over the second link
        sent = {(SPINE, 1): 4 * 10**9, (SPINE, 2): 24 * 10**8}
        store.write_samples(tracker.update(_sweep(sent, T0 + 21 * S // 10)))
        moved = _parallel(api_client, T0 + 5 * S // 2)
        assert moved["series"]["t_ns"] == [T0, T0 + S, T0 + 2 * S]
        assert moved["series"]["max_mean"][-1] != later["series"]["max_mean"][-1]
        assert [m["b_to_a_bytes"] or m["a_to_b_bytes"] for m in moved["members"]] == [
            4 * 10**9, 24 * 10**8,
        ]  # fmt: skip
        # the page's groups are encoded and compressed once, each answer's window added
        path = route_path(api_client, "fabric_groups")
        plain = api_client.get(path, headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        assert len(plain.content) >= COMPRESS_FROM_BYTES
        with api_client.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as raw:
            assert raw.headers["content-encoding"] == "gzip"
            wire = json.loads(gzip.decompress(b"".join(raw.iter_raw())))
        assert wire["to_ns"] > plain.json()["to_ns"]  # a live window ends at each request
        now = {"from_ns": None, "to_ns": None}  # and starts 15 min before (whole steps)
        assert {**wire, **now} == {**plain.json(), **now}
    finally:
        store.close()


def test_a_jobs_answers_follow_every_frame_stored_even_a_late_one(pg_url, api_client):
    """A job's families, their links, its links and its row in the job list are computed
    once for its viewers and anew after any frame of the job is stored: also one replayed
    late, whose interval ends before the job's last (it moves no time of the job or its
    run)."""
    with BackgroundCollector(pg_url, token="secret") as collector:
        frames = [frame(seq, rank=rank) for seq in range(3) for rank in (0, 1)]
        assert len(exchange(collector.address, b"".join(frames), len(frames))) == len(frames)
        paths = {name: f"/api/jobs/job-A/{name}" for name in ("families", "families/links",
                                                             "links")}  # fmt: skip
        paths["list"] = "/api/jobs"
        first = {name: api_client.get(path).json() for name, path in paths.items()}
        (listed,) = first["list"]["jobs"]
        assert listed["bytes_sent"] == 2 * (1000 + 1001 + 1002)  # both ranks, 3 intervals
        world = _world(first["families"])
        assert world["bytes"] == 640 * 3 * 2  # the op record's bytes: both ranks, 3 intervals
        assert {name: api_client.get(path).json() for name, path in paths.items()} == first
        late = wire.encode_frame(
            job_id="job-A", world_rank=0, world_size=2, seq=7, host="node0", pid=100,
            interval_start_ns=T0_JOB, interval_end_ns=T0_JOB + 10**9, token="secret",
            tables={"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": 5000,
                                                 "msgs_sent": 1, "bytes_recv": 0,
                                                 "msgs_recv": 0}]),
                    "op": wire.records("op", [{"op_id": 4, "calls": 5, "bytes": 640,
                                               "time_ns": 999}])},
        )  # fmt: skip
        assert exchange(collector.address, late, 1) == [(0, 7)]
        assert _world(api_client.get(paths["families"]).json())["bytes"] == world["bytes"] + 640
        (relisted,) = api_client.get(paths["list"]).json()["jobs"]
        assert relisted["bytes_sent"] == listed["bytes_sent"] + 5000


def _world(answer: dict) -> dict:
    (world,) = [f for f in answer["families"] if f["family"] == "world"]
    return world
