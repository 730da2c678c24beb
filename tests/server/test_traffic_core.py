"""The pure attribution core (server/traffic): routes over forwarding tables in the three
path modes, a group split by measured bytes, `other` unclamped, the collective models and
the storage placement, on small hand-made fabrics with exact expected figures."""

from __future__ import annotations

import zlib

from server.traffic import collectives
from server.traffic.attribution import (
    Attribution,
    Rail,
    Transfer,
    attribute,
    flows,
    grouped_with,
    other,
    split,
    storage_shares,
)
from server.traffic.routing import RouteLink, Router
from stacklens.rails import Binding

# Two switches (S1 = 1, S2 = 2) joined by two parallel links (ids 10, 11: S1 ports 3, 4 to
# S2 ports 3, 4); HCA h1 (101) on S1 port 1, h2 (102) on S2 port 1, h3 (103) on S1 port 2.
LINKS = [
    RouteLink(1, (1, 1), (101, 1)),
    RouteLink(2, (2, 1), (102, 1)),
    RouteLink(3, (1, 2), (103, 1)),
    RouteLink(10, (1, 3), (2, 3)),
    RouteLink(11, (1, 4), (2, 4)),
]
LIDS = {(101, 1): 5, (102, 1): 6, (103, 1): 7}


def _table(entries: dict[int, int]) -> bytes:
    table = bytearray(16)
    for lid, port in entries.items():
        table[lid] = port
    return bytes(table)


LFTS = {1: _table({5: 1, 6: 4, 7: 2}), 2: _table({5: 3, 6: 1, 7: 3})}


def _router(mode: str) -> Router:
    return Router({1, 2}, LINKS, LIDS, LFTS, mode)


def test_routes_in_each_path_mode():
    assert _router("fixed").path(101, 102) == [
        ((1, "b_to_a"),), ((11, "a_to_b"),), ((2, "a_to_b"),)
    ]  # fmt: skip
    assert _router("fixed").path(102, 103) == [
        ((2, "b_to_a"),), ((10, "b_to_a"),), ((3, "a_to_b"),)
    ]  # fmt: skip
    both = ((10, "a_to_b"), (11, "a_to_b"))
    assert _router("parallel").path(101, 102) == [((1, "b_to_a"),), both, ((2, "a_to_b"),)]
    assert _router("adaptive").path(101, 102) == [((1, "b_to_a"),), both, ((2, "a_to_b"),)]
    assert _router("parallel").path(101, 103) == [((1, "b_to_a"),), ((3, "a_to_b"),)]


def test_a_group_is_split_by_measured_bytes_and_other_is_not_clamped():
    transfers = [
        Transfer(7, "mpi_p2p", "routed", "h1", "h2", 1000),
        Transfer(7, "io", "routed", "h1", "h1", 64),
        Transfer(8, "mpi_coll", "modelled", "h1", "nowhere", 32),
    ]
    hcas = {h: [Rail(guid, "")] for h, guid in (("h1", 101), ("h2", 102), ("h3", 103))}
    measured = {(10, "a_to_b"): 300, (11, "a_to_b"): 100, (1, "b_to_a"): 900}
    result = attribute(_router("parallel"), transfers, hcas, measured)
    assert result.shares[(10, "a_to_b")] == {(7, "mpi_p2p", "routed", "group"): 750.0}
    assert result.shares[(11, "a_to_b")] == {(7, "mpi_p2p", "routed", "group"): 250.0}
    assert result.shares[(1, "b_to_a")] == {(7, "mpi_p2p", "routed", "fixed"): 1000}
    assert dict(result.left_out) == {"intra_host": 64, "off_fabric": 32}
    assert other(900, result.attributed((1, "b_to_a"))) == -100
    assert other(None, 5) is None
    fixed = attribute(_router("fixed"), transfers[:1], hcas, measured)
    assert (10, "a_to_b") not in fixed.shares
    assert fixed.shares[(11, "a_to_b")] == {(7, "mpi_p2p", "routed", "fixed"): 1000}


def test_one_link_alone_gets_the_whole_fabric_figures():
    transfers = [
        Transfer(7, "mpi_p2p", "routed", "h1", "h2", 1000),
        Transfer(7, "mpi_rma", "routed", "h2", "h3", 333),
        Transfer(8, "io", "routed", "h3", "h2", 77),
        Transfer(8, "mpi_coll", "modelled", "h1", "h3", 5),
    ]
    hcas = {h: [Rail(guid, "")] for h, guid in (("h1", 101), ("h2", 102), ("h3", 103))}
    measured = {(10, "a_to_b"): 300, (11, "a_to_b"): 100, (10, "b_to_a"): 7, (11, "b_to_a"): 0}
    for mode in ("fixed", "parallel", "adaptive"):
        whole = attribute(_router(mode), transfers, hcas, measured)
        for link in LINKS:
            only = {(link.id, "a_to_b"), (link.id, "b_to_a")}
            alone = Attribution()
            pairs = flows(transfers, hcas, alone)
            needed = grouped_with(_router(mode), pairs, only)
            split(_router(mode), pairs, {c: measured.get(c) for c in needed}, alone, only)
            assert alone.shares == {c: f for c, f in whole.shares.items() if c in only}
            grouped = mode != "fixed" and link.id in (10, 11)
            assert needed == ({(i, d) for i in (10, 11) for d in ("a_to_b", "b_to_a")}
                              if grouped else only & set(whole.shares))  # fmt: skip


def _all(name: str, members: list[int], root: int, nbytes: int) -> dict:
    out: dict = {}
    for rank in members:
        out.update(collectives.rank_sends(name, members, rank, root, 1, nbytes))
    return out


def test_collective_models():
    ring = _all("MPI_Allreduce", [0, 2, 4, 6], -1, 80_000)
    assert ring == {(0, 2): 120_000, (2, 4): 120_000, (4, 6): 120_000, (6, 0): 120_000}
    rd = _all("MPI_Iallreduce", [0, 1, 2, 3, 4], -1, 100)  # rank 4 beyond the power of two
    pairs = [(4, 0), (0, 4), (0, 1), (1, 0), (0, 2), (2, 0), (1, 3), (3, 1), (2, 3), (3, 2)]
    assert rd == dict.fromkeys(pairs, 100)
    assert sum(rd.values()) == 100 * (2 + 4 * 2)
    tree = _all("MPI_Bcast_c", [10, 11, 12, 13, 14], 12, 64)
    assert tree == {(12, 13): 64, (12, 14): 64, (12, 11): 64, (14, 10): 64}
    assert _all("MPI_Reduce", [0, 1, 2, 3], 0, 8) == {(1, 0): 8, (2, 0): 8, (3, 2): 8}
    assert _all("MPI_Alltoall", [0, 1, 2], -1, 300) == {
        (a, b): 100 for a in range(3) for b in range(3) if a != b
    }
    assert collectives.rank_sends("MPI_Neighbor_alltoall", [0, 1], 0, -1, 1, 8) == {}
    assert not collectives.modelled("MPI_Neighbor_alltoall")


def test_storage_placement():
    servers = {"/scratch": ["s1", "s2", "s3"], "*": ["nfs"]}
    assert storage_shares("/scratch/a", "/scratch", servers, "stripe", 10) == [
        ("s1", 4), ("s2", 3), ("s3", 3)
    ]  # fmt: skip
    pick = ["s1", "s2", "s3"][zlib.crc32(b"/scratch/a") % 3]
    assert storage_shares("/scratch/a", "/scratch", servers, "file-hash", 10) == [(pick, 10)]
    assert storage_shares("/home/x", "/home", servers, "stripe", 10) == [("nfs", 10)]
    assert storage_shares("/tmp/x", "/tmp", {"/scratch": ["s1"]}, "stripe", 10) == []


def test_ranks_send_from_the_rails_they_are_bound_to():
    # host A has two rails (101 mlx5_0, 103 mlx5_1, both on S1), host B one (102 on S2)
    placed = {"A": [Rail(101, "mlx5_0"), Rail(103, "mlx5_1")], "B": [Rail(102, "mlx5_0")]}
    b0 = Binding(0)
    transfers = [
        Transfer(1, "mpi_p2p", "routed", "A", "B", 1000, Binding(0), b0),  # local rank 0
        Transfer(1, "mpi_p2p", "routed", "A", "B", 600, Binding(1), b0),  # local rank 1
        Transfer(1, "mpi_p2p", "routed", "A", "B", 400, Binding(0, ("mlx5_1",)), b0),  # pinned
        Transfer(1, "mpi_coll", "modelled", "A", "B", 1001,
                 Binding(0, ("mlx5_0", "mlx5_1")), b0),  # striped over both
        Transfer(1, "mpi_p2p", "routed", "B", "A", 80, b0, Binding(3)),  # to local rank 3
        Transfer(1, "mpi_p2p", "routed", "A", "A", 7, Binding(0), Binding(1)),
        Transfer(1, "mpi_p2p", "routed", "A", "B", 9, Binding(0, ("mlx5_9",)), b0),  # absent
    ]  # fmt: skip
    result = attribute(_router("fixed"), transfers, placed, {})
    sent = {c: round(result.attributed(c)) for c in result.shares}
    assert sent[(1, "b_to_a")] == 1000 + 501 + 9  # rail 0: local rank 0, half the stripe + 1
    assert sent[(3, "b_to_a")] == 600 + 400 + 500  # rail 1: local rank 1, pinned, the stripe
    assert sent[(2, "a_to_b")] == 1000 + 600 + 400 + 1001 + 9
    assert sent[(3, "a_to_b")] == 80  # local rank 3 of two rails: rail 1
    assert (1, "a_to_b") not in sent
    assert dict(result.left_out) == {"intra_host": 7}
    shares = result.shares[(3, "b_to_a")]
    assert shares == {(1, "mpi_p2p", "routed", "fixed"): 1000,
                      (1, "mpi_coll", "modelled", "fixed"): 500}  # fmt: skip
