"""Job traffic for the fabric emulator: what running jobs sent, read back from the database.

The hook library stores per-interval deltas per rank; `ranks.host` is each rank's host
(STACKLENS_HOST places ranks on simulated hosts). JobTraffic turns every newly stored
interval into emulator flows:

- MPI point-to-point: p2p_deltas `bytes_sent` from rank r to peer p becomes a flow
  host(r) -> host(p). Ranks on the same host, and hosts that are not in the simulated
  fabric, do not touch the fabric.
- File-system I/O: io_deltas `bytes_written` becomes a flow host -> storage node,
  `bytes_read` storage node -> host, with the file's storage node chosen by a hash of its
  path (a file lives on one storage target, as on a striped-by-file parallel file system).

Exactly once: the rows of one frame are committed together, so a frame is identified by
(run, rank, interval end): a job's runs (launches) each have their own ranks. Each poll
reads, in one snapshot, the rows whose interval ended after a floor, and applies the
frames it has not applied yet. The floor trails the newest interval end seen by
`grace_s`: frames stored later than that (e.g. replayed from a spool long after) are past
traffic and are not emulated. A frame whose peer rank has no `ranks` row yet is left for
the next poll.

Counters count 4-octet words, so each flow carries a multiple of 4 bytes; the remainder of
each (source, destination) pair is carried into that pair's next flow, so over time the
fabric moves exactly the bytes the jobs sent, minus less than 4 bytes per pair.
"""

from __future__ import annotations

import zlib
from collections import defaultdict

import psycopg

from emulator.ibsim import Flow

#: One frame of one rank: (run id, world rank, interval end ns).
FrameKey = tuple[int, int, int]

_P2P = """
SELECT d.run_id, d.world_rank, d.t_end_ns, src.host, dst.host, sum(d.bytes_sent)
FROM p2p_deltas d
JOIN ranks src ON src.run_id = d.run_id AND src.world_rank = d.world_rank
LEFT JOIN ranks dst ON dst.run_id = d.run_id AND dst.world_rank = d.peer
WHERE d.t_end_ns > %s AND d.bytes_sent > 0
GROUP BY 1, 2, 3, 4, 5
"""

_IO = """
SELECT d.run_id, d.world_rank, d.t_end_ns, r.host, d.path,
       sum(d.bytes_read), sum(d.bytes_written)
FROM io_deltas d
JOIN ranks r ON r.run_id = d.run_id AND r.world_rank = d.world_rank
WHERE d.t_end_ns > %s AND (d.bytes_read > 0 OR d.bytes_written > 0)
GROUP BY 1, 2, 3, 4, 5
"""


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
    ):
        self.url = url
        self.hosts = set(hosts)
        self.storage = list(storage)
        self.floor_ns = since_ns
        self.grace_ns = int(grace_s * 1e9)
        self.applied: dict[FrameKey, int] = {}  # frame -> its interval end
        self.carry: dict[tuple[str, str], int] = defaultdict(int)  # bytes below a word
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

    def _read(self) -> tuple[list[tuple], list[tuple]]:
        """The p2p and I/O rows after the floor, from one snapshot."""
        conn = self._connection()
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                p2p = cur.execute(_P2P, (self.floor_ns,)).fetchall()
                io = cur.execute(_IO, (self.floor_ns,)).fetchall()
        except psycopg.Error:
            self.close()  # reconnect next time
            raise
        return p2p, io

    def poll(self) -> list[Flow]:
        """Flows of the frames stored since the last poll (raises psycopg.Error if the
        database is unreachable or not migrated yet; nothing is marked applied then)."""
        p2p, io = self._read()
        pending = {(run, rank, t_end) for run, rank, t_end, _, dst, _ in p2p if dst is None}
        nbytes: dict[tuple[str, str], int] = defaultdict(int)
        seen: set[FrameKey] = set()
        for run, rank, t_end, src, dst, sent in p2p:
            key = (run, rank, t_end)
            if key in self.applied or key in pending:
                continue
            seen.add(key)
            if src != dst and src in self.hosts and dst in self.hosts:
                nbytes[(src, dst)] += int(sent)
        for run, rank, t_end, host, path, read, written in io:
            key = (run, rank, t_end)
            if key in self.applied or key in pending:
                continue
            seen.add(key)
            if host in self.hosts and self.storage:
                node = storage_node(path, self.storage)
                nbytes[(host, node)] += int(written)
                nbytes[(node, host)] += int(read)
        for run, rank, t_end in seen:
            self.applied[(run, rank, t_end)] = t_end
        self._advance()
        return self._flows(nbytes)

    def _flows(self, nbytes: dict[tuple[str, str], int]) -> list[Flow]:
        """Whole words per pair now; the rest waits in the pair's carry."""
        flows = []
        for (src, dst), n in sorted(nbytes.items()):
            total = self.carry[(src, dst)] + n
            self.carry[(src, dst)] = total % 4
            if total >= 4:
                kind = "io" if src in self.storage or dst in self.storage else "mpi_p2p"
                flows.append(Flow(src, dst, total - total % 4, kind))
        return flows

    def _advance(self) -> None:
        """Move the floor to grace_s before the newest interval end; forget older frames."""
        if not self.applied:
            return
        newest = max(self.applied.values())
        self.floor_ns = max(self.floor_ns, newest - self.grace_ns)
        self.applied = {k: t for k, t in self.applied.items() if t > self.floor_ns}
