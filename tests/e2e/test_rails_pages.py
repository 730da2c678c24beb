# tests/e2e/test_rails_pages.py — rails and groups by skew on the Fabric and job pages.
"""End to end (issue #27 point 3): a multi-rail fabric written by the real FabricStore and a
4-rank job sent through the real collector, the API and dashboard served by uvicorn, the
pages in Chromium.

    spine[1] - leaf1[3]     leaf1: hostA mlx5_0 (port 1), hostB mlx5_0 (port 2)
    spine[2] - leaf2[3]     leaf2: hostA mlx5_1 (port 1), hostB mlx5_1 (port 2)

Every port 4 GB/s. In the second sweep's second, hostA sends 3.2 GB on mlx5_0 and nothing
on mlx5_1 (utilisations 80 % and 0 %: skew 2, CV 1); hostB 1.6 GB on each (skew 1, CV 0).
The Fabric page over that window lists the two groups "rails of hostA" then "rails of
hostB" (highest skew first), their skew, CV, busiest link and loads as a person reads them.

The job: ranks 0, 1 on hostA, 2, 3 on hostB; rank 1 started with UCX_NET_DEVICES=mlx5_0:1
(pinned), the others bound by local rank (0 and 2 on mlx5_0, 3 on mlx5_1); rank r sends
(r + 1) MB to rank (r + 2) mod 4. The job page's "Hosts and links" card shows its rails
table: per rail the ranks bound (pinned marked) and the bytes sent and received between
hosts, exactly. Neither page shows a raw epoch (the Fabric page wrote a window from its URL
as epoch seconds in its captions before); no console errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest
from playwright.sync_api import expect

from collector.fabric.counters import DeltaTracker, RawSweep
from collector.fabric.store import FabricStore
from collector.fabric.topology import Link, Node, NodeType, Port, Topology
from stacklens import wire
from stacklens.constants import PORT_COUNTERS
from stacklens.db import make_engine
from stacklens_cli.site import create_site
from tests.collector.test_ingest import exchange
from tests.conftest import chromium_page, free_port, serving
from tests.e2e.test_jobs_page import grid_rows

T0 = 1_700_000_000_000_000_000
S = 10**9
SPINE, LEAF1, LEAF2 = 0xF452_1403_0000_0001, 0xF452_1403_0000_0002, 0xF452_1403_0000_0003
A0, A1, B0, B1 = (0x0002_C903_0000_0010 + i for i in range(4))
NAMES = {SPINE: "spine", LEAF1: "leaf1", LEAF2: "leaf2", A0: "hostA mlx5_0",
         A1: "hostA mlx5_1", B0: "hostB mlx5_0", B1: "hostB mlx5_1"}  # fmt: skip
CABLES = [((LEAF1, 3), (SPINE, 1)), ((LEAF2, 3), (SPINE, 2)), ((A0, 1), (LEAF1, 1)),
          ((B0, 1), (LEAF1, 2)), ((A1, 1), (LEAF2, 1)), ((B1, 1), (LEAF2, 2))]  # fmt: skip
ENDS = sorted(end for cable in CABLES for end in cable)
#: Bytes each HCA sent in the second sweep's second (received by its leaf's port).
SENT = {(A0, 1): 3_200_000_000, (A1, 1): 0, (B0, 1): 1_600_000_000, (B1, 1): 1_600_000_000}
JOB = "rails-e2e"
MB = 1_000_000


def _sweep(second: int, loaded: bool) -> RawSweep:
    """Every port's counters at T0 + `second` s: zero, or the sends above (in words)."""
    rows = np.zeros((len(ENDS), len(PORT_COUNTERS)), dtype=np.uint64)
    peer = {x: y for a, b in CABLES for x, y in ((a, b), (b, a))}
    for i, end in enumerate(ENDS):
        if loaded and end in SENT:
            rows[i, PORT_COUNTERS.index("xmit_bytes")] = SENT[end] // 4
        if loaded and peer[end] in SENT:
            rows[i, PORT_COUNTERS.index("rcv_bytes")] = SENT[peer[end]] // 4
    ones = np.ones(len(ENDS), dtype=bool)
    t_end = T0 + second * S
    return RawSweep.from_words([g for g, _ in ENDS], [p for _, p in ENDS], rows, ones, ones,
                               t_end - S // 10, t_end)  # fmt: skip


def write_rails_fabric(url: str) -> None:
    """The fabric above at T0, swept at T0 + 1 s (nothing) and T0 + 2 s (the sends)."""
    nodes = {
        g: Node(g, NodeType.SWITCH if g in (SPINE, LEAF1, LEAF2) else NodeType.CA, name,
                36 if g in (SPINE, LEAF1, LEAF2) else 1, i + 1)
        for i, (g, name) in enumerate(NAMES.items())
    }  # fmt: skip
    ports = {end: Port(end[0], end[1], end[0], nodes[end[0]].lid, 4, 5, 2, 4, 0, 4_000_000_000)
             for end in ENDS}  # fmt: skip
    topology = Topology(nodes=nodes, ports=ports, links=[Link.of(a, b) for a, b in CABLES])
    store = FabricStore(url)
    try:
        store.write_topology(topology, T0, [])
        tracker = DeltaTracker()
        store.write_samples(tracker.update(_sweep(1, loaded=False)))
        store.write_samples(tracker.update(_sweep(2, loaded=True)))
    finally:
        store.close()


def _frame(rank: int) -> bytes:
    """Rank `rank`'s one frame (T0 .. T0 + 2 s): its exchange with rank (rank + 2) mod 4."""
    peer = (rank + 2) % 4
    info = {"command": b"./trainer", "user": b"alice"}
    if rank == 1:
        info["net_devices"] = b"UCX_NET_DEVICES=mlx5_0:1"
    sent = {"peer": peer, "bytes_sent": (rank + 1) * MB, "msgs_sent": 1,
            "bytes_recv": (peer + 1) * MB, "msgs_recv": 1}  # fmt: skip
    tables = {"rank_info": wire.records("rank_info", [info]), "p2p": wire.records("p2p", [sent])}
    return wire.encode_frame(job_id=JOB, world_rank=rank, world_size=4, seq=0,
                             host="hostA" if rank < 2 else "hostB", pid=100 + rank,
                             interval_start_ns=T0, interval_end_ns=T0 + 2 * S, token="secret",
                             frame_type=wire.FrameType.INTERVAL, tables=tables)  # fmt: skip


@pytest.fixture
def served(collector, pg_url) -> Iterator[str]:
    """The fabric and the job stored, the API and dashboard on HTTP; the base URL."""
    write_rails_fabric(pg_url)
    frames = [_frame(r) for r in range(4)]
    assert [s for s, _ in exchange(collector.address, b"".join(frames), acks=4)] == [0] * 4
    engine = make_engine(pg_url)
    port = free_port()
    try:
        with serving(create_site(engine, api_base_url=f"http://127.0.0.1:{port}",
                                 refresh_ms=1000), port=port):  # fmt: skip
            yield f"http://127.0.0.1:{port}"
    finally:
        engine.dispose()


#: A raw epoch in ns or s (19 or 10 digits starting like T0's) anywhere in a page's text.
RAW_EPOCH = re.compile(r"\b1700\d{6}(\d{9})?\b")


def test_the_fabric_page_lists_rail_groups_by_skew(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/fabric?from={T0 // S}&to={T0 // S + 5}")
        caption = page.locator("#fabric-groups-caption")
        # the window in words, never as the URL's epoch seconds
        expect(caption).to_have_text(
            "2 groups of parallel links, from 2023-11-14 22:13:20 UTC to 2023-11-14 22:13:25 "
            "UTC, highest skew first. Skew: the busiest link's utilisation over the group's "
            "mean (1 = even; 2 = all on one of two links); CV: standard deviation over the "
            "mean; blank = fewer than two links with a load.",
            timeout=20_000,
        )
        expect(page.locator("#fabric-groups-grid .ag-row")).to_have_count(2, timeout=20_000)
        rows = grid_rows(page, "fabric-groups-grid")
        columns = ("name", "kind", "members", "skew", "cv", "busiest", "loads")
        assert [[r[c] for c in columns] for r in rows] == [
            ["rails of hostA", "rails", "2", "2", "1",
             "hostA mlx5_0[1] – leaf1[1] (80.0 %)", "80.0 % / 0.0 %"],
            ["rails of hostB", "rails", "2", "1", "0",
             "hostB mlx5_0[1] – leaf1[2] (40.0 %)", "40.0 % / 40.0 %"],
        ]  # fmt: skip
        assert [m.group(0) for m in RAW_EPOCH.finditer(page.inner_text("body"))] == []
        assert errors == []


def test_the_job_page_shows_its_rails(served):
    with chromium_page() as (page, errors):
        page.goto(f"{served}/jobs/{JOB}")
        rails = page.locator("#jv-placement-rails")
        expect(rails).to_contain_text(
            "4 rails on 2 hosts: a rank sends and receives on the devices its MPI was told to "
            "use (pinned: UCX_NET_DEVICES and the like), else on rail (local rank mod rails).",
            timeout=20_000,
        )
        rows = [[c.inner_text().strip() for c in r.locator("td").all()]
                for r in rails.locator("tbody tr").all()]  # fmt: skip
        assert rows == [
            ["hostA", "0 mlx5_0", "0–1 (pinned: 1)", "2.86 MiB", "6.68 MiB",
             "routed 2.86 MiB sent, 6.68 MiB received"],
            ["hostA", "1 mlx5_1", "—", "0 B", "0 B", "—"],
            ["hostB", "0 mlx5_0", "2", "2.86 MiB", "976.56 KiB",
             "routed 2.86 MiB sent, 976.56 KiB received"],
            ["hostB", "1 mlx5_1", "3", "3.81 MiB", "1.91 MiB",
             "routed 3.81 MiB sent, 1.91 MiB received"],
        ]  # fmt: skip
        assert [m.group(0) for m in RAW_EPOCH.finditer(page.inner_text("body"))] == []
        assert errors == []
