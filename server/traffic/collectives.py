"""Modelled on-wire traffic of MPI collectives: which rank sends how many bytes to which,
from the algorithm an MPI library picks by message and communicator size. Pure.

Each rank's stored collective row (coll_deltas: op, communicator, root, calls, bytes as the
hooks count them, spec `bytes=` modes) is turned into the bytes that rank itself sends to
each peer, so summing every member's rows counts every transfer once. A communicator's
members are the world ranks that reported its id, in world-rank order (its rank i is the
i-th of them): the order MPI_Comm_split with key = world rank gives, and
MPI_COMM_WORLD's. The algorithms and thresholds below follow Open MPI's and MPICH's
defaults roughly; docs/attribution.md states the model and its limits.

Per call the message is m = bytes // calls (the rest, < calls bytes, is not modelled).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

#: Allreduce below this many bytes per rank: recursive doubling; from it on: a ring
#: (reduce-scatter then allgather, 2 (n - 1) / n of the message to the next rank).
ALLREDUCE_RING_FROM = 8192
#: Bcast below this many bytes, or on fewer than BCAST_TREE_BELOW ranks: a binomial tree;
#: else scatter (binomial) then a ring allgather (van de Geijn).
BCAST_TREE_UNDER = 12288
BCAST_TREE_BELOW = 8
#: Allgather with a total (n x m) below this on a power-of-two communicator: recursive
#: doubling; else a ring.
ALLGATHER_RD_UNDER = 81920

Sends = dict[tuple[int, int], int]  # (source world rank, destination world rank) -> bytes


def op_family(name: str) -> str:
    """The blocking, small-count name of an MPI collective (MPI_Iallreduce_c -> allreduce)."""
    base = name.removeprefix("MPI_").removesuffix("_c").lower()
    if base.startswith("i") and base[1:] in _MODELS:
        return base[1:]
    return base


def modelled(name: str) -> bool:
    """Whether the collective `name` has a model here (else its bytes stay unmodelled)."""
    return op_family(name) in _MODELS


def positions(members: Sequence[int]) -> dict[int, int]:
    """Each member's rank in the communicator of world ranks `members` (its index there):
    what `rank_sends` looks up, made once per communicator by a caller that models many
    rows of it (a 1,024-rank communicator's rows each looked up in the list cost seconds)."""
    return {rank: i for i, rank in enumerate(members)}


def rank_sends(name: str, members: Sequence[int], rank: int, root: int, calls: int,
               nbytes: int, position: Mapping[int, int] | None = None) -> Sends:  # fmt: skip
    """What world rank `rank` sends for `calls` calls of collective `name` totalling `nbytes`
    (its stored row) on the communicator of world ranks `members` rooted at world rank
    `root` (-1: none); `position`: `positions(members)` if the caller has it. Empty when
    the op has no model, the rank is not a member, or a root is needed and is not a
    member."""
    model = _MODELS.get(op_family(name))
    n = len(members)
    if model is None or calls <= 0 or nbytes <= 0 or n < 2:
        return {}
    where = positions(members) if position is None else position
    me = where.get(rank)
    if me is None:
        return {}
    at_root = where.get(root, -1)
    per_call: dict[int, int] = defaultdict(int)
    model(per_call, n, me, at_root, nbytes // calls)
    return {(rank, members[i]): b * calls for i, b in per_call.items() if b > 0 and i != me}


Model = Callable[[dict[int, int], int, int, int, int], None]


def _allreduce(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if m < ALLREDUCE_RING_FROM:
        _recursive_doubling(out, n, me, m)
    else:
        out[(me + 1) % n] += 2 * (n - 1) * m // n


def _recursive_doubling(out: dict[int, int], n: int, me: int, m: int) -> None:
    """Exchange m with the partner at distance 2^k, k = 0.. on the largest power of two p
    <= n ranks; the n - p ranks beyond hand theirs to rank i - p first and get the result
    back."""
    p = 1 << (n.bit_length() - 1)
    if me >= p:
        out[me - p] += m
        return
    if me + p < n:
        out[me + p] += m
    k = 1
    while k < p:
        out[me ^ k] += m
        k <<= 1


def _relative(me: int, root: int, n: int) -> int:
    return (me - root) % n


def _bcast(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if root < 0:
        return
    v = _relative(me, root, n)
    if m < BCAST_TREE_UNDER or n < BCAST_TREE_BELOW:
        for child in _children(v, n):
            out[(child + root) % n] += m
        return
    piece = m // n  # scatter: each child gets its subtree's pieces; then a ring allgather
    for child in _children(v, n):
        out[(child + root) % n] += piece * _subtree(child, n)
    out[(me + 1) % n] += (n - 1) * piece


def _children(v: int, n: int) -> list[int]:
    """Children of relative rank v in a binomial tree of n ranks rooted at 0."""
    low = v & -v if v else 1 << n.bit_length()
    out = []
    k = 1
    while k < low and v + k < n:
        out.append(v + k)
        k <<= 1
    return out


def _subtree(v: int, n: int) -> int:
    """Ranks in the binomial subtree of relative rank v (v itself included)."""
    low = v & -v if v else 1 << n.bit_length()
    return min(low, n - v)


def _reduce(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if root < 0:
        return
    v = _relative(me, root, n)
    if v:
        out[(v - (v & -v) + root) % n] += m


def _allgather(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if n & (n - 1) == 0 and n * m < ALLGATHER_RD_UNDER:
        k = 1
        while k < n:
            out[me ^ k] += k * m
            k <<= 1
    else:
        out[(me + 1) % n] += (n - 1) * m


def _alltoall(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    for i in range(n):  # m is what the rank sends in all (count x n): m / n to each
        out[i] += m // n


def _gather(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if root >= 0 and me != root:
        out[root] += m


def _scatter(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if me == root:  # bytes are counted at the root only: count x n
        for i in range(n):
            out[i] += m // n


def _reduce_scatter(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    out[(me + 1) % n] += (n - 1) * (m // n)  # a ring reduce-scatter of the rank's m


def _scan(out: dict[int, int], n: int, me: int, root: int, m: int) -> None:
    if me + 1 < n:  # a linear chain: each rank hands its partial result on
        out[me + 1] += m


_MODELS: dict[str, Model] = {
    "allreduce": _allreduce,
    "bcast": _bcast,
    "reduce": _reduce,
    "allgather": _allgather,
    "allgatherv": _allgather,
    "alltoall": _alltoall,
    "alltoallv": _alltoall,
    "gather": _gather,
    "gatherv": _gather,
    "scatter": _scatter,
    "scatterv": _scatter,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_block": _reduce_scatter,
    "scan": _scan,
    "exscan": _scan,
}
