"""Job traffic for the fabric emulator: what running jobs sent, read back from the database.

The hook library stores per-interval deltas per rank; `ranks.host` is each rank's host
(STACKLENS_HOST places ranks on simulated hosts). JobTraffic turns every newly stored
interval into emulator flows:

- Rails: on a multi-rail host (`rails`), a rank's flows leave and arrive on the HCAs it is
  bound to (stacklens/rails.py: the devices its MPI was told, else local rank
  round-robin), exactly as the attribution places them.
- MPI point-to-point: p2p_deltas `bytes_sent` from rank r to peer p becomes a flow
  host(r) -> host(p). Ranks on the same host, and hosts that are not in the simulated
  fabric, do not touch the fabric.
- File-system I/O: io_deltas `bytes_written` becomes a flow host -> storage node,
  `bytes_read` storage node -> host, with the file's storage node chosen by a hash of its
  path (a file lives on one storage target, as on a striped-by-file parallel file system).
- One-sided (RMA): rma_deltas `bytes` of rank r on target t moves as the MPI call moves
  data: a put or an accumulate host(r) -> host(t), a get host(t) -> host(r), a
  get-accumulate, fetch-and-op or compare-and-swap both ways.
- Collectives, where the MPI monitored its traffic (monitored_deltas, Open MPI's
  monitoring component): what rank r sent to peer p in an interval beyond the
  point-to-point bytes it sent p in it (the MPI's own messages: collective internals)
  becomes a flow host(r) -> host(p). The hooks count a message's point-to-point bytes
  no later than its monitored bytes (mpi_pmpi_hooks/src/frame.c), so one posted while a
  frame was read can have the first in that frame and the second in the next: the
  point-to-point bytes of a frame beyond its monitored bytes are owed by the pair's next
  frames (`owed`), and each message moves once. A run without monitored traffic has no
  per-peer collective data: its collectives move nothing.

Exactly once: the rows of one frame are committed together, so a frame is identified by
(run, rank, interval end): a job's runs (launches) each have their own ranks. Each poll
reads, in one snapshot, the rows whose interval ended after a floor, and applies the
frames it has not applied yet. The floor trails the newest interval end seen by
`grace_s`: frames stored later than that (e.g. replayed from a spool long after) are past
traffic and are not emulated. A frame whose peer rank has no `ranks` row yet is left for
the next poll.

Counters count 4-octet words, so each flow carries a multiple of 4 bytes; the remainder of
each (source, destination, kind) is carried into its next flow, so over time the
fabric moves exactly the bytes the jobs sent, minus less than 4 bytes per pair.
"""

from __future__ import annotations

import zlib
from collections import defaultdict

import psycopg

from emulator.ibsim import Flow
from stacklens.mpi_ops import op_names
from stacklens.rails import UNBOUND, Binding, bindings, device_of, rail_key
from stacklens.rails import lanes as rail_lanes
from stacklens.rails import split as rail_split

#: One frame of one rank: (run id, world rank, interval end ns).
FrameKey = tuple[int, int, int]


def _to_peers(view: str, nbytes: str, peer: str = "peer", key: str = "peer") -> str:
    """Per frame of a rank and (peer, `key`) of a per-peer delta view: the rank's host, the
    peer's host, the peer, `key` and the sum of `nbytes`, for frames ending after the bound
    parameter."""
    return f"""
SELECT d.run_id, d.world_rank, d.t_end_ns, src.host, dst.host, d.{peer}, d.{key},
       sum(d.{nbytes})
FROM {view} d
JOIN ranks src ON src.run_id = d.run_id AND src.world_rank = d.world_rank
LEFT JOIN ranks dst ON dst.run_id = d.run_id AND dst.world_rank = d.{peer}
WHERE d.t_end_ns > %s AND d.{nbytes} > 0
GROUP BY 1, 2, 3, 4, 5, 6, 7
"""


_P2P = _to_peers("p2p_deltas", "bytes_sent")

_IO = """
SELECT d.run_id, d.world_rank, d.t_end_ns, r.host, d.path,
       sum(d.bytes_read), sum(d.bytes_written)
FROM io_deltas d
JOIN ranks r ON r.run_id = d.run_id AND r.world_rank = d.world_rank
WHERE d.t_end_ns > %s AND (d.bytes_read > 0 OR d.bytes_written > 0)
GROUP BY 1, 2, 3, 4, 5
"""

_RMA = _to_peers("rma_deltas", "bytes", peer="target", key="op_id")

_MONITORED = _to_peers("monitored_deltas", "bytes")

#: Every rank of the runs with a rank seen after the bound parameter, with the devices its
#: MPI was told to use (their binding to rails: stacklens/rails.py).
_RANKS = """
SELECT run_id, world_rank, host, net_devices FROM ranks
WHERE run_id IN (SELECT run_id FROM ranks WHERE last_seen_ns > %s)
"""

#: The runs that monitored their traffic (a monitoring rank stores every frame's row).
_MONITORED_RUNS = "SELECT DISTINCT run_id FROM monitored_frames WHERE t_end_ns > %s"

#: One-sided calls (MPI names without the prefix and the large-count suffix) whose data
#: flows from the target to the origin, and those whose data flows both ways.
FROM_TARGET = frozenset({"get", "rget"})
BOTH_WAYS = frozenset({"get_accumulate", "rget_accumulate", "fetch_and_op",
                       "compare_and_swap"})  # fmt: skip


def rma_ways(op_name: str) -> tuple[bool, bool]:
    """Whether a one-sided call's data goes origin -> target, and target -> origin."""
    call = op_name.removeprefix("MPI_").removesuffix("_c").lower()
    back = call in FROM_TARGET or call in BOTH_WAYS
    return call not in FROM_TARGET, back


def storage_node(path: str, storage: list[str]) -> str:
    """The storage node that holds `path` (a stable hash of the path)."""
    return storage[zlib.crc32(path.encode()) % len(storage)]


class JobTraffic:
    """Reads jobs' new per-interval traffic from the database and returns it as flows."""

    def __init__(
        self,
        url: str,
        hosts: list[str],
        storage: list[str],
        since_ns: int = 0,
        grace_s: float = 30.0,
        rails: dict[str, list[str]] | None = None,
    ):
        """`rails`: host -> the HCA nodes of its rails (emulator.fattree.FatTree.rails); a
        rank's traffic leaves and arrives on the rails it is bound to (stacklens/rails.py),
        as the attribution places it. A host without rails is its own HCA node."""
        self.url = url
        self.hosts = set(hosts)
        self.storage = list(storage)
        self.rails = {h: sorted(nodes, key=lambda n: rail_key(device_of(n)))
                      for h, nodes in (rails or {}).items()}  # fmt: skip
        self.floor_ns = since_ns
        self.grace_ns = int(grace_s * 1e9)
        self.applied: dict[FrameKey, int] = {}  # frame -> its interval end
        # bytes below a word, per (source, destination, kind)
        self.carry: dict[tuple[str, str, str], int] = defaultdict(int)
        # (run, rank, peer) -> (point-to-point bytes sent not monitored yet, as of frame end)
        self.owed: dict[tuple[int, int, int], tuple[int, int]] = {}
        self._conn: psycopg.Connection | None = None

    def close(self) -> None:
        """Close the database connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def _read(self) -> dict[str, list[tuple]]:
        """The p2p, I/O, RMA and monitored rows and the monitored runs after the floor,
        from one snapshot."""
        conn = self._connection()
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                queries = (("p2p", _P2P), ("io", _IO), ("rma", _RMA),
                           ("monitored", _MONITORED), ("ranks", _RANKS),
                           ("monitored_runs", _MONITORED_RUNS))  # fmt: skip
                rows = {name: cur.execute(sql, (self.floor_ns,)).fetchall()
                        for name, sql in queries}  # fmt: skip
        except psycopg.Error:
            self.close()  # reconnect next time
            raise
        return rows

    def poll(self) -> list[Flow]:
        """Flows of the frames stored since the last poll (raises psycopg.Error if the
        database is unreachable or not migrated yet; nothing is marked applied then)."""
        rows = self._read()
        p2p, rma, monitored = rows["p2p"], rows["rma"], rows["monitored"]
        pending = {(run, rank, t_end) for run, rank, t_end, _, dst, *_ in p2p + rma + monitored
                   if dst is None}  # fmt: skip
        bound = bindings(rows["ranks"])
        nbytes: dict[tuple[str, str, str], int] = defaultdict(int)
        seen: set[FrameKey] = set()

        def new(key: FrameKey) -> bool:
            if key in self.applied or key in pending:
                return False
            seen.add(key)
            return True

        on_fabric = self.hosts | set(self.storage)

        def move(src: str, dst: str, kind: str, n: int,
                 a: Binding = UNBOUND, b: Binding = UNBOUND) -> None:  # fmt: skip
            if src == dst or src not in on_fabric or dst not in on_fabric or n <= 0:
                return
            here, there = self.rails.get(src, [src]), self.rails.get(dst, [dst])
            lanes = (rail_lanes([device_of(x) for x in here], a),
                     rail_lanes([device_of(x) for x in there], b))  # fmt: skip
            for i, j, part in rail_split(*lanes, n):
                nbytes[(here[i], there[j], kind)] += part

        # (run, rank, end, peer) -> (its host, the peer's, p2p sent, monitored)
        pairs: dict[tuple[int, int, int, int], tuple[str, str, int, int]] = {}
        monitoring = {run for (run,) in rows["monitored_runs"]}
        for run, rank, t_end, src, dst, peer, _, sent in p2p:
            if new((run, rank, t_end)):
                move(src, dst, "mpi_p2p", int(sent), bound[(run, rank)], bound[(run, peer)])
                if run in monitoring:
                    pairs[(run, rank, t_end, peer)] = (src, dst, int(sent), 0)
        for run, rank, t_end, src, dst, peer, _, counted in monitored:
            if new((run, rank, t_end)):
                sent = pairs.get((run, rank, t_end, peer), (src, dst, 0, 0))[2]
                pairs[(run, rank, t_end, peer)] = (src, dst, sent, int(counted))
        for (run, rank, t_end, peer), (src, dst, sent, counted) in sorted(pairs.items()):
            owed, _ = self.owed.pop((run, rank, peer), (0, 0))
            beyond = counted - sent - owed
            if beyond < 0:
                self.owed[(run, rank, peer)] = (-beyond, t_end)
            move(src, dst, "mpi_coll", beyond, bound[(run, rank)], bound[(run, peer)])
        names = op_names()
        for run, rank, t_end, src, dst, target, op, n in rma:
            if new((run, rank, t_end)):
                there, back = rma_ways(names[op] if op < len(names) else "")
                me, it = bound[(run, rank)], bound[(run, target)]
                if there:
                    move(src, dst, "mpi_rma", int(n), me, it)
                if back:
                    move(dst, src, "mpi_rma", int(n), it, me)
        for run, rank, t_end, host, path, read, written in rows["io"]:
            if new((run, rank, t_end)) and self.storage:
                node = storage_node(path, self.storage)
                move(host, node, "io", int(written), a=bound[(run, rank)])
                move(node, host, "io", int(read), b=bound[(run, rank)])
        for run, rank, t_end in seen:
            self.applied[(run, rank, t_end)] = t_end
        self._advance()
        return self._flows(nbytes)

    def _flows(self, nbytes: dict[tuple[str, str, str], int]) -> list[Flow]:
        """Whole words per pair and kind now; the rest waits in its carry."""
        flows = []
        for (src, dst, kind), n in sorted(nbytes.items()):
            total = self.carry[(src, dst, kind)] + n
            self.carry[(src, dst, kind)] = total % 4
            if total >= 4:
                flows.append(Flow(src, dst, total - total % 4, kind))
        return flows

    def _advance(self) -> None:
        """Move the floor to grace_s before the newest interval end; forget older frames
        (and bytes owed since before it: their frames will never come)."""
        if not self.applied:
            return
        newest = max(self.applied.values())
        self.floor_ns = max(self.floor_ns, newest - self.grace_ns)
        self.applied = {k: t for k, t in self.applied.items() if t > self.floor_ns}
        self.owed = {k: v for k, v in self.owed.items() if v[1] > self.floor_ns}
