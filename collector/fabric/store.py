"""Fabric writer: topology upserts, topology events, and port samples with binary COPY.

Synchronous psycopg (the sampler calls it from a worker thread). GUIDs become signed
bigints (two's complement). Samples go in one binary COPY per sweep, with NULL for every
unknown delta (first sample, reset) encoded without a per-row Python loop.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg

from collector.fabric.counters import DeltaSweep, RawSweep
from collector.fabric.topology import Change, Topology
from collector.store.copy import binary_copy
from collector.store.partitions import Partitions, day_of
from stacklens.constants import PORT_COUNTERS

_SAMPLE_COLUMNS = (
    ["port_id", "ts_ns", "dt_ns", "flags"] + list(PORT_COUNTERS) + [f"d_{c}" for c in PORT_COUNTERS]
)
_SAMPLE_COPY = f"COPY fabric_port_samples ({', '.join(_SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
#: The sweep just copied (its rows share ts_ns) becomes each port's newest sample, unless
#: a newer one is there already.
_LATEST_UPSERT = f"""
INSERT INTO fabric_port_latest ({", ".join(_SAMPLE_COLUMNS)})
SELECT {", ".join(_SAMPLE_COLUMNS)} FROM fabric_port_samples WHERE ts_ns = %s
ON CONFLICT (port_id) DO UPDATE SET
    {", ".join(f"{c} = EXCLUDED.{c}" for c in _SAMPLE_COLUMNS[1:])}
WHERE EXCLUDED.ts_ns >= fabric_port_latest.ts_ns
"""


def signed64(value: int) -> int:
    """A 64-bit unsigned GUID as the signed bigint PostgreSQL stores."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned64(value: int) -> int:
    """The GUID back from its stored signed bigint."""
    return value + (1 << 64) if value < 0 else value


class FabricStore:
    """Writes fabric topology, events and samples to the stacklens database."""

    def __init__(self, url: str):
        self._url = url
        self._conn: psycopg.Connection | None = None
        self.port_ids: dict[tuple[int, int], int] = {}
        self.partitions = Partitions(["fabric_port_samples"])

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._url)
        return self._conn

    def close(self) -> None:
        """Close the database connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def write_topology(self, topo: Topology, ts_ns: int, changes: list[Change]) -> None:
        """Upsert the fabric's identity, and its nodes, ports, links and LFTs seen at
        `ts_ns` (tagged with the fabric); mark the fabric's missing ones; add events."""
        conn = self._connection()
        with conn.transaction(), conn.cursor() as cur:
            prefix, sm_guid = topo.identity()
            cur.execute(
                """
                INSERT INTO fabrics (subnet_prefix, sm_guid, first_seen_ns, last_seen_ns)
                VALUES (%s, %s, %s, %s)
                ON CONFLICT (subnet_prefix, sm_guid)
                    DO UPDATE SET last_seen_ns = EXCLUDED.last_seen_ns
                RETURNING id
                """,
                (signed64(prefix), signed64(sm_guid), ts_ns, ts_ns),
            )
            row = cur.fetchone()
            assert row is not None  # RETURNING of an upsert
            fabric_id = row[0]
            nodes = list(topo.nodes.values())
            cur.execute(
                """
                INSERT INTO fabric_nodes
                    (guid, type, description, nports, lid, first_seen_ns, last_seen_ns,
                     fabric_id)
                SELECT g, t, d, n, l, %s, %s, %s
                FROM unnest(%s::bigint[], %s::smallint[], %s::text[], %s::smallint[],
                            %s::int[]) AS u(g, t, d, n, l)
                ON CONFLICT (guid) DO UPDATE SET type = EXCLUDED.type,
                    description = EXCLUDED.description, nports = EXCLUDED.nports,
                    lid = EXCLUDED.lid, last_seen_ns = EXCLUDED.last_seen_ns, gone_ns = NULL,
                    fabric_id = EXCLUDED.fabric_id
                """,
                (
                    ts_ns,
                    ts_ns,
                    fabric_id,
                    [signed64(n.guid) for n in nodes],
                    [int(n.type) for n in nodes],
                    [n.description for n in nodes],
                    [n.nports for n in nodes],
                    [n.lid for n in nodes],
                ),
            )
            cur.execute(
                "UPDATE fabric_nodes SET gone_ns = %s"
                " WHERE gone_ns IS NULL AND last_seen_ns < %s AND fabric_id = %s",
                (ts_ns, ts_ns, fabric_id),
            )
            ports = list(topo.ports.values())
            cur.execute(
                """
                INSERT INTO fabric_ports (guid, port, port_guid, lid, state, phys_state, width,
                                          speed, speed_ext, capacity_bytes_per_s, updated_ns)
                SELECT *, %s FROM unnest(%s::bigint[], %s::smallint[], %s::bigint[], %s::int[],
                    %s::smallint[], %s::smallint[], %s::smallint[], %s::smallint[],
                    %s::smallint[], %s::bigint[])
                ON CONFLICT (guid, port) DO UPDATE SET port_guid = EXCLUDED.port_guid,
                    lid = EXCLUDED.lid, state = EXCLUDED.state,
                    phys_state = EXCLUDED.phys_state, width = EXCLUDED.width,
                    speed = EXCLUDED.speed, speed_ext = EXCLUDED.speed_ext,
                    capacity_bytes_per_s = EXCLUDED.capacity_bytes_per_s,
                    updated_ns = EXCLUDED.updated_ns
                RETURNING guid, port, id
                """,
                (
                    ts_ns,
                    [signed64(p.guid) for p in ports],
                    [p.port for p in ports],
                    [signed64(p.port_guid) for p in ports],
                    [p.lid for p in ports],
                    [p.state for p in ports],
                    [p.phys_state for p in ports],
                    [p.width for p in ports],
                    [p.speed for p in ports],
                    [p.speed_ext for p in ports],
                    [p.capacity_bytes_per_s for p in ports],
                ),
            )
            self.port_ids = {(unsigned64(g), p): i for g, p, i in cur.fetchall()}
            links = topo.links
            cur.execute(
                """
                INSERT INTO fabric_links (a_guid, a_port, b_guid, b_port, first_seen_ns,
                                          last_seen_ns, fabric_id)
                SELECT *, %s, %s, %s FROM unnest(%s::bigint[], %s::smallint[], %s::bigint[],
                                                %s::smallint[])
                ON CONFLICT (a_guid, a_port, b_guid, b_port) DO UPDATE
                    SET last_seen_ns = EXCLUDED.last_seen_ns, down_ns = NULL,
                        fabric_id = EXCLUDED.fabric_id
                """,
                (
                    ts_ns,
                    ts_ns,
                    fabric_id,
                    [signed64(lk.a[0]) for lk in links],
                    [lk.a[1] for lk in links],
                    [signed64(lk.b[0]) for lk in links],
                    [lk.b[1] for lk in links],
                ),
            )
            cur.execute(
                "UPDATE fabric_links SET down_ns = %s"
                " WHERE down_ns IS NULL AND last_seen_ns < %s AND fabric_id = %s",
                (ts_ns, ts_ns, fabric_id),
            )
            for guid, lft in topo.lfts.items():
                cur.execute(
                    """
                    INSERT INTO fabric_lfts (guid, ports, updated_ns) VALUES (%s, %s, %s)
                    ON CONFLICT (guid) DO UPDATE
                        SET ports = EXCLUDED.ports, updated_ns = EXCLUDED.updated_ns
                    """,
                    (signed64(guid), lft.tobytes(), ts_ns),
                )
            if changes:
                cur.executemany(
                    "INSERT INTO fabric_events (ts_ns, kind, subject, details)"
                    " VALUES (%s, %s, %s, %s)",
                    [(ts_ns, c.kind, c.subject, json.dumps(c.details)) for c in changes],
                )

    def ensure_ports(self, sweep: RawSweep, ts_ns: int) -> None:
        """Register the ports of a sweep from a source without topology (sysfs, replay).

        Their attributes are unknown to such a source and are stored as 0 (= unknown code).
        """
        keys = {(int(g), int(p)) for g, p in zip(sweep.guids, sweep.ports, strict=True)}
        missing = sorted(keys - self.port_ids.keys())
        if not missing:
            return
        conn = self._connection()
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                """
                INSERT INTO fabric_ports (guid, port, port_guid, lid, state, phys_state, width,
                                          speed, speed_ext, capacity_bytes_per_s, updated_ns)
                SELECT g, p, g, 0, 0, 0, 0, 0, 0, 0, %s
                FROM unnest(%s::bigint[], %s::smallint[]) AS u(g, p)
                ON CONFLICT (guid, port) DO UPDATE SET updated_ns = EXCLUDED.updated_ns
                RETURNING guid, port, id
                """,
                (ts_ns, [signed64(g) for g, _ in missing], [p for _, p in missing]),
            )
            self.port_ids.update({(unsigned64(g), p): i for g, p, i in cur.fetchall()})

    def forget_latest(self, ends: list[tuple[int, int]]) -> int:
        """Drop the newest sample of these ports (GUID, port) from fabric_port_latest: they
        stopped answering, so their last load is no longer current (the history stays).
        Rows removed."""
        ids = [self.port_ids[e] for e in ends if e in self.port_ids]
        if not ids:
            return 0
        conn = self._connection()
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("DELETE FROM fabric_port_latest WHERE port_id = ANY(%s)", (ids,))
            return cur.rowcount

    def write_samples(self, sweep: DeltaSweep) -> int:
        """COPY one sweep's samples (ports without a known port id are skipped) and make
        them the ports' newest (fabric_port_latest), in one transaction; row count."""
        raw = sweep.raw
        ids = np.array(
            [
                self.port_ids.get((int(g), int(p)), -1)
                for g, p in zip(raw.guids, raw.ports, strict=True)
            ],
            dtype=np.int64,
        )
        sel = ids >= 0
        n = int(sel.sum())
        if not n:
            return 0
        columns: list[tuple[str, np.ndarray, np.ndarray | None]] = [
            ("int4", ids[sel], None),
            ("int8", np.full(n, raw.t_end_ns, dtype=np.int64), None),
            ("int8", sweep.dt_ns[sel], sweep.dt_ns[sel] == 0),
            ("int4", sweep.flags[sel], None),
        ]
        values = np.minimum(raw.values[sel], np.uint64(2**63 - 1)).astype(np.int64)
        columns += [("int8", values[:, c], None) for c in range(len(PORT_COUNTERS))]
        known = sweep.known[sel]
        columns += [
            ("int8", sweep.deltas[sel][:, c], ~known[:, c]) for c in range(len(PORT_COUNTERS))
        ]
        conn = self._connection()
        self.partitions.ensure_sync(conn, [day_of(raw.t_end_ns)])
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(_SAMPLE_COPY) as copy:
                copy.write(binary_copy(columns))
            cur.execute(_LATEST_UPSERT, (raw.t_end_ns,))
        return n
