"""Fabric writer: topology upserts, fabric events, and port samples with binary COPY.

Synchronous psycopg (the sampler's writer thread calls it). GUIDs become signed bigints
(two's complement). Samples go in one binary COPY per store of one or more sweeps, with
NULL for every unknown delta (first sample, reset) encoded without a per-row Python loop,
into a temporary staging table of the connection; the samples, the newest samples and
the rollups are written from it (several sweeps stored at once cost one upsert per
port and span, not one per sweep).

In the transaction that stores a sweep, the store also keeps:
- each port's newest sample (`fabric_port_latest`);
- the rollups per minute and per 10 s (`fabric_port_minutes`, `fabric_port_10s`): the
  sweep's samples are added to the span their sweep end falls in, so a span's rollup is
  always exactly the sum of its stored samples (a sample is stored once: the samples'
  primary key refuses a second);
- error bursts (`fabric_events` of kind error_burst): a port whose error-counter deltas
  are > 0 opens a burst, or extends its open one (counts summed); its next sweep with
  every error delta known and 0 (or its counter saturated: it shows no more errors)
  closes it (end: the last erroring sweep's end). A port
  that stops answering (`forget_latest`) has its burst closed there too.
Topology events are intervals: a link_down stays open until the link is back (its
link_up closes it), a node_gone until the node is back; a link or node seen for the
first time is a point event (link_up, node_new; end = start).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import psycopg

from collector.fabric.counters import DeltaSweep, RawSweep
from collector.fabric.topology import Change, Topology
from collector.store.copy import binary_copy
from collector.store.partitions import Partitions, day_of
from stacklens.constants import (
    ERROR_COUNTERS,
    MINUTE_NS,
    PORT_COUNTERS,
    RATE_COUNTERS,
    SATURATED_SHIFT,
    TEN_S_NS,
)

_SAMPLE_COLUMNS = (
    ["port_id", "ts_ns", "dt_ns", "flags"] + list(PORT_COUNTERS) + [f"d_{c}" for c in PORT_COUNTERS]
)
#: The staging table of a connection: the samples being stored (emptied at commit).
_STAGE = "fabric_sweep_stage"
_STAGE_CREATE = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGE} (LIKE fabric_port_samples"
    " INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
)
_SAMPLE_COPY = f"COPY {_STAGE} ({', '.join(_SAMPLE_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
_STAGE_STORE = (
    f"INSERT INTO fabric_port_samples ({', '.join(_SAMPLE_COLUMNS)})"
    f" SELECT {', '.join(_SAMPLE_COLUMNS)} FROM {_STAGE}"
)
#: The newest staged sample of each port becomes its newest sample, unless a newer one
#: is there already.
_LATEST_UPSERT = f"""
INSERT INTO fabric_port_latest ({", ".join(_SAMPLE_COLUMNS)})
SELECT DISTINCT ON (port_id) {", ".join(_SAMPLE_COLUMNS)} FROM {_STAGE}
ORDER BY port_id, ts_ns DESC
ON CONFLICT (port_id) DO UPDATE SET
    {", ".join(f"{c} = EXCLUDED.{c}" for c in _SAMPLE_COLUMNS[1:])}
WHERE EXCLUDED.ts_ns >= fabric_port_latest.ts_ns
"""
#: The rollup tables: name, key column (the span's start), span (ns).
ROLLUPS = (
    ("fabric_port_minutes", "minute_ns", MINUTE_NS),
    ("fabric_port_10s", "start_ns", TEN_S_NS),
)
#: Columns of a rollup after its key, and each one's value over a span's samples and its
#: sum with the rollup's (null-aware: the sum of the known deltas, null while none known).
_ROLLUP_VALUES = {
    "samples": ("count(*)", "m.samples + EXCLUDED.samples"),
    "last_ns": ("max(ts_ns)", "greatest(m.last_ns, EXCLUDED.last_ns)"),
    "flags": ("bit_or(flags)", "m.flags | EXCLUDED.flags"),
    **{f"d_{c}": (f"sum(d_{c})", f"coalesce(m.d_{c} + EXCLUDED.d_{c}, m.d_{c}, EXCLUDED.d_{c})")
       for c in PORT_COUNTERS},
    **{f"t_{c}": (f"coalesce(sum(dt_ns) FILTER (WHERE d_{c} IS NOT NULL AND dt_ns > 0), 0)",
                  f"m.t_{c} + EXCLUDED.t_{c}") for c in RATE_COUNTERS},
}  # fmt: skip
#: Per rollup table: the staged samples added to their span's row (one upsert per port
#: and span, however many sweeps are staged).
_ROLLUP_UPSERTS = [
    f"""
INSERT INTO {table} AS m (port_id, {key}, {", ".join(_ROLLUP_VALUES)})
SELECT port_id, ts_ns / {span} * {span}, {", ".join(v for v, _ in _ROLLUP_VALUES.values())}
FROM {_STAGE} GROUP BY 1, 2
ON CONFLICT (port_id, {key}) DO UPDATE SET
    {", ".join(f"{c} = {add}" for c, (_, add) in _ROLLUP_VALUES.items())}
"""
    for table, key, span in ROLLUPS
]
_ERROR_COLUMNS = np.array([PORT_COUNTERS.index(c) for c in ERROR_COUNTERS])
#: Per rollup table: its rows of the spans in [lo, hi) recomputed from the stored samples.
_ROLLUP_REBUILDS = [
    (
        f"DELETE FROM {table} WHERE {key} >= %(lo)s AND {key} < %(hi)s",
        f"""
INSERT INTO {table} (port_id, {key}, {", ".join(_ROLLUP_VALUES)})
SELECT port_id, ts_ns / {span} * {span}, {", ".join(v for v, _ in _ROLLUP_VALUES.values())}
FROM fabric_port_samples WHERE ts_ns >= %(lo)s AND ts_ns < %(hi)s
GROUP BY 1, 2
""",
    )
    for table, key, span in ROLLUPS
]


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
        #: port id -> the id of the up link it is an end of, and its `name[port]`
        self.link_of_port: dict[int, int] = {}
        self.port_names: dict[int, str] = {}
        #: port id -> its open error burst (read from the database at the first sweep)
        self.bursts: dict[int, _Burst] | None = None
        #: the connection whose staging table exists
        self._stage_of: psycopg.Connection | None = None

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
            self.port_names = {i: _describe(topo, end) for end, i in self.port_ids.items()}
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
                RETURNING id, a_guid, a_port, b_guid, b_port
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
            self.link_of_port = {
                self.port_ids[end]: link_id
                for link_id, ag, ap, bg, bp in cur.fetchall()
                for end in ((unsigned64(ag), ap), (unsigned64(bg), bp))
                if end in self.port_ids
            }
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
            for change in changes:
                _store_change(cur, ts_ns, change)

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
            self._close_bursts(cur, ids)
            cur.execute("DELETE FROM fabric_port_latest WHERE port_id = ANY(%s)", (ids,))
            return cur.rowcount

    def write_samples(self, sweep: DeltaSweep) -> int:
        """Store one sweep's samples (write_sweeps); row count."""
        return self.write_sweeps([sweep])

    def write_sweeps(self, sweeps: list[DeltaSweep]) -> int:
        """COPY these sweeps' samples (in time order; ports without a known port id are
        skipped), make the newest of each port its newest sample (fabric_port_latest), add
        them to the rollups and track the error bursts sweep after sweep, in one
        transaction; row count."""
        staged = [part for part in map(self._staged, sweeps) if part is not None]
        if not staged:
            return 0
        columns = []
        for c, (kind, _, _) in enumerate(staged[0].columns):
            nulls = [null for part in staged if (null := part.columns[c][2]) is not None]
            values = np.concatenate([part.columns[c][1] for part in staged])
            columns.append((kind, values, np.concatenate(nulls) if nulls else None))
        conn = self._connection()
        self.partitions.ensure_sync(conn, sorted({day_of(s.raw.t_end_ns) for s in sweeps}))
        with conn.transaction(), conn.cursor() as cur:
            if self._stage_of is not conn:
                cur.execute(_STAGE_CREATE)
            with cur.copy(_SAMPLE_COPY) as copy:
                copy.write(binary_copy(columns))
            cur.execute(_STAGE_STORE)
            cur.execute(_LATEST_UPSERT)
            for upsert in _ROLLUP_UPSERTS:
                cur.execute(upsert)
            for part in staged:
                self._bursts_of(cur, part)
        self._stage_of = conn
        return sum(len(part.ids) for part in staged)

    def _staged(self, sweep: DeltaSweep) -> _Staged | None:
        """A sweep's samples as COPY columns (None if no port of it has a port id)."""
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
            return None
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
        return _Staged(columns, sweep, sel, ids[sel])

    def _bursts_of(self, cur: psycopg.Cursor, staged: _Staged) -> None:
        """Open, extend and close the error bursts of a staged sweep's ports."""
        sweep, sel, ids = staged.sweep, staged.sel, staged.ids
        known = sweep.known[sel]
        deltas = sweep.deltas[sel]
        errors = np.where(known[:, _ERROR_COLUMNS], deltas[:, _ERROR_COLUMNS], 0)
        erroring = np.asarray((errors > 0).any(axis=1))
        # a saturated counter can show no more errors: it does not keep a burst open
        saturated = (sweep.flags[sel, None] >> (SATURATED_SHIFT + _ERROR_COLUMNS)) & 1
        quiet = (known[:, _ERROR_COLUMNS] | (saturated == 1)).all(axis=1) & ~erroring
        self._track_bursts(cur, sweep.raw.t_end_ns, ids, sweep.dt_ns[sel], errors, erroring)
        self._close_bursts(cur, ids[quiet].tolist())

    def rebuild_rollups(self, lo_ns: int, hi_ns: int) -> int:
        """Recompute the rollups (per minute, per 10 s) of the whole minutes in [lo_ns,
        hi_ns) from the stored samples (samples loaded in bulk, a repair); rows written."""
        assert lo_ns % MINUTE_NS == 0 and hi_ns % MINUTE_NS == 0, "whole minutes only"
        conn = self._connection()
        rows = 0
        with conn.transaction(), conn.cursor() as cur:
            for clear, rebuild in _ROLLUP_REBUILDS:
                cur.execute(clear, {"lo": lo_ns, "hi": hi_ns})
                cur.execute(rebuild, {"lo": lo_ns, "hi": hi_ns})
                rows += cur.rowcount
        return rows

    def _open_bursts(self, cur: psycopg.Cursor) -> dict[int, _Burst]:
        """The open error bursts by port id (read from the database once)."""
        if self.bursts is None:
            cur.execute(
                "SELECT port_id, id, start_ns, details FROM fabric_events"
                " WHERE kind = 'error_burst' AND end_ns IS NULL AND port_id IS NOT NULL"
            )
            self.bursts = {
                port: _Burst(event, start, [int(d["counts"].get(c, 0)) for c in ERROR_COUNTERS],
                             int(d["sweeps"]), int(d["last_ns"]))
                for port, event, start, d in cur.fetchall()
            }  # fmt: skip
        return self.bursts

    def _track_bursts(
        self,
        cur: psycopg.Cursor,
        ts_ns: int,
        ids: np.ndarray,
        dt_ns: np.ndarray,
        errors: np.ndarray,
        erroring: np.ndarray,
    ) -> None:
        """Open or extend the error burst of every port with error deltas > 0 in this sweep."""
        bursts = self._open_bursts(cur)
        for i in np.flatnonzero(erroring):
            port, counts = int(ids[i]), [int(v) for v in errors[i]]
            burst = bursts.get(port)
            if burst is None:
                start = ts_ns - int(dt_ns[i])  # the start of the interval that erred
                burst = _Burst(0, start, counts, 1, ts_ns)
                cur.execute(
                    "INSERT INTO fabric_events (start_ns, kind, subject, link_id, port_id,"
                    " details) VALUES (%s, 'error_burst', %s, %s, %s, %s) RETURNING id",
                    (start, self.port_names.get(port, f"port {port}"),
                     self.link_of_port.get(port), port, json.dumps(burst.details())),
                )  # fmt: skip
                row = cur.fetchone()
                assert row is not None  # RETURNING of an insert
                burst.event_id = row[0]
                bursts[port] = burst
            else:
                burst.counts = [a + b for a, b in zip(burst.counts, counts, strict=True)]
                burst.sweeps += 1
                burst.last_ns = ts_ns
                cur.execute(
                    "UPDATE fabric_events SET details = %s WHERE id = %s",
                    (json.dumps(burst.details()), burst.event_id),
                )

    def _close_bursts(self, cur: psycopg.Cursor, ports: list[int]) -> None:
        """Close the open error bursts of these ports at their last erroring sweep."""
        bursts = self._open_bursts(cur)
        closing = [bursts.pop(p) for p in ports if p in bursts]
        if closing:
            cur.executemany(
                "UPDATE fabric_events SET end_ns = %s WHERE id = %s",
                [(b.last_ns, b.event_id) for b in closing],
            )


class _Staged(NamedTuple):
    """A sweep's samples to store: COPY columns (binary_copy's form) of its rows with a
    port id (`sel`), and their port ids."""

    columns: list[tuple[str, np.ndarray, np.ndarray | None]]
    sweep: DeltaSweep
    sel: np.ndarray
    ids: np.ndarray


@dataclass
class _Burst:
    """An open error burst of a port: its event, start, error counts so far (ERROR_COUNTERS
    order), erroring sweeps and the end of the last one."""

    event_id: int
    start_ns: int
    counts: list[int]
    sweeps: int
    last_ns: int

    def details(self) -> dict[str, Any]:
        """The event's details: counts per error counter, sweeps, the last erroring end."""
        return {
            "counts": dict(zip(ERROR_COUNTERS, self.counts, strict=True)),
            "sweeps": self.sweeps,
            "last_ns": self.last_ns,
        }


def _describe(topo: Topology, end: tuple[int, int]) -> str:
    """`name[port]` of an end of the topology (`0x<guid>[port]` for a node not in it)."""
    node = topo.nodes.get(end[0])
    return f"{node.description if node else f'{end[0]:#018x}'}[{end[1]}]"


def _store_change(cur: psycopg.Cursor, ts_ns: int, change: Change) -> None:
    """A topology change as an event: link_down / node_gone open one; link_up / node_new
    close the open one of that link / node, or are a point of their own (first seen); a
    link_bounce is a link_down from its since_ns to now, closed (it was back by now)."""
    details = change.details
    if change.kind in ("link_down", "link_up", "link_bounce"):
        (ag, ap), (bg, bp) = details["a"], details["b"]
        cur.execute(
            "SELECT id FROM fabric_links WHERE a_guid = %s AND a_port = %s AND b_guid = %s"
            " AND b_port = %s",
            (signed64(int(ag, 16)), ap, signed64(int(bg, 16)), bp),
        )
        row = cur.fetchone()
        key, value, opened = "link_id", None if row is None else row[0], "link_down"
    else:
        key, value, opened = "node_guid", signed64(int(details["guid"], 16)), "node_gone"
    if change.kind == "link_bounce":  # down and back between two sweeps: a closed link_down
        cur.execute(
            "INSERT INTO fabric_events (start_ns, end_ns, kind, subject, link_id, details)"
            " VALUES (%s, %s, 'link_down', %s, %s, %s)",
            (details["since_ns"], ts_ns, change.subject, value, json.dumps(details)),
        )
        return
    if change.kind == opened:
        end = None
    else:
        cur.execute(
            f"UPDATE fabric_events SET end_ns = %s WHERE kind = %s AND {key} = %s"
            " AND end_ns IS NULL",
            (ts_ns, opened, value),
        )
        if cur.rowcount:
            return
        end = ts_ns
    cur.execute(
        f"INSERT INTO fabric_events (start_ns, end_ns, kind, subject, {key}, details)"
        " VALUES (%s, %s, %s, %s, %s, %s)",
        (ts_ns, end, change.kind, change.subject, value, json.dumps(details)),
    )
