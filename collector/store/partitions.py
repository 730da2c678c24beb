"""Daily range partitions of the time series tables: created ahead and on demand, dropped
for retention.

Every delta table is `PARTITION BY RANGE (t_end_ns)`, fabric_port_samples by `ts_ns`;
the partition for UTC day D is `<table>_pYYYYMMDD` and holds [D 00:00, D+1 00:00) in ns.
Creating partitions is idempotent and safe when several collectors race; retention drops
whole partitions (no row-by-row DELETE) and then the jobs that ended before the cutoff.
Ingest bounds the days that can get partitions: frames outside the horizon (the retention
or STACKLENS_INGEST_HORIZON_DAYS back, the clock skew ahead) are rejected, and within it
each user may bring a few days without partitions per hour (`new_days_fit`, applied per
owner by collector/ingest/budget.py), so timestamps from many distinct days cannot make
thousands of partitions.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
import psycopg

from collector.store.rollups import ROLLED_PER_FIVE, ROLLED_PER_RANK, ROLLED_PER_SECOND
from collector.store.tables import DELTA_TABLES
from stacklens.constants import DAY_NS, FIVE_NS

log = logging.getLogger(__name__)

_SUFFIX = re.compile(r"_p(\d{8})$")

#: Errors of a CREATE that raced with the same CREATE elsewhere.
_RACE = (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation)

#: Partitioned tables that are not per-rank delta tables (partitioned by their ns column).
OTHER_PARTITIONED = ("fabric_port_samples",)

#: Storage of the array tables' partitions: rows up to 8 KiB stay uncompressed (pglz on
#: every insert costs 4-5x the COPY time; migration 0005 explains the layout).
_STORAGE = {t.sql: " WITH (toast_tuple_target = 8160)" for t in DELTA_TABLES if t.arrays}

_LIST_PARTITIONS = """
SELECT child.relname FROM pg_inherits
JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
JOIN pg_class child ON child.oid = pg_inherits.inhrelid
WHERE parent.relname = %s
"""


def day_of(ns: int) -> int:
    """Day number (days since the Unix epoch, UTC) of a ns timestamp."""
    return ns // DAY_NS


def partition_name(table: str, day: int) -> str:
    """Name of `table`'s partition for day number `day`."""
    return f"{table}_p{datetime.fromtimestamp(day * 86_400, UTC):%Y%m%d}"


def _day_of_name(name: str) -> int | None:
    match = _SUFFIX.search(name)
    if match is None:
        return None
    date = datetime.strptime(match[1], "%Y%m%d").replace(tzinfo=UTC)
    return int(date.timestamp()) // 86_400


#: The tables a Partitions object manages unless told otherwise: every delta table and the
#: other day-partitioned tables.
DEFAULT_TABLES = (*(t.sql for t in DELTA_TABLES), *OTHER_PARTITIONED)


class Partitions:
    """Creates and drops the daily partitions of a set of tables (caches what exists)."""

    def __init__(self, tables: Iterable[str] = DEFAULT_TABLES) -> None:
        self.tables = tuple(tables)
        self._known: set[int] = set()

    async def load(self, conn: psycopg.AsyncConnection) -> None:
        """Learn the days every table already has a partition for (at start)."""
        days: set[int] | None = None
        for table in self.tables:
            rows = await (await conn.execute(_LIST_PARTITIONS, (table,))).fetchall()
            have = {day for (name,) in rows if (day := _day_of_name(name)) is not None}
            days = have if days is None else days & have
        self._known |= days or set()

    def new_days_fit(self, t_end_ns: np.ndarray, limit: int, brought: set[int]) -> int:
        """How many leading frames (by interval end) a sender may store when it may bring
        at most `limit` days without a partition, `brought` being those it brought before
        (updated with the new days of the frames that fit)."""
        ends = t_end_ns.tolist()  # a read's few dozen frames: quicker than numpy's min, max
        first, last = min(ends) // DAY_NS, max(ends) // DAY_NS
        if first == last and (first in self._known or first in brought):
            return len(t_end_ns)  # the usual case: one day, its partitions made ahead
        days = np.asarray(t_end_ns, dtype=np.uint64) // DAY_NS
        known = np.fromiter(self._known | brought, np.uint64, len(self._known | brought))
        fresh = ~np.isin(days, known)
        new, first_of_new = np.unique(days[fresh], return_index=True)
        room = max(limit - len(brought), 0)
        if len(new) <= room:
            brought.update(new.tolist())
            return len(days)
        # The frame that brings one new day too many, in frame order, ends the fit.
        order = np.sort(first_of_new)
        brought.update(days[fresh][order[:room]].tolist())
        return int(np.flatnonzero(fresh)[order[room]])

    def _missing(self, days: Iterable[int]) -> list[tuple[int, list[str]]]:
        """CREATE statements per day not known to exist yet."""
        return [
            (
                day,
                [
                    f"CREATE TABLE IF NOT EXISTS {partition_name(table, day)} PARTITION OF "
                    f"{table} FOR VALUES FROM ({day * DAY_NS}) TO ({(day + 1) * DAY_NS})"
                    f"{_STORAGE.get(table, '')}"
                    for table in self.tables
                ],
            )
            for day in sorted(set(days) - self._known)
        ]

    async def ensure(self, conn: psycopg.AsyncConnection, days: Iterable[int]) -> None:
        """Make sure every table has a partition for each day (own transactions)."""
        for day, statements in self._missing(days):
            for statement in statements:
                try:
                    async with conn.transaction():
                        await conn.execute(statement)
                except _RACE:
                    pass  # another collector created it at the same moment
            self._known.add(day)

    def ensure_sync(self, conn: psycopg.Connection, days: Iterable[int]) -> None:
        """`ensure` for a synchronous connection (the fabric sampler's)."""
        for day, statements in self._missing(days):
            for statement in statements:
                try:
                    with conn.transaction():
                        conn.execute(statement)
                except _RACE:
                    pass
            self._known.add(day)

    async def drop_before(self, conn: psycopg.AsyncConnection, cutoff_ns: int) -> list[str]:
        """Drop every partition that ends at or before `cutoff_ns`; return their names."""
        dropped = []
        async with conn.transaction():
            for table in self.tables:
                rows = await (await conn.execute(_LIST_PARTITIONS, (table,))).fetchall()
                for (name,) in rows:
                    day = _day_of_name(name)
                    if day is not None and (day + 1) * DAY_NS <= cutoff_ns:
                        await conn.execute(f"DROP TABLE IF EXISTS {name}")
                        dropped.append(name)
                        self._known.discard(day)
        return dropped


async def apply_retention(
    conn: psycopg.AsyncConnection, partitions: Partitions, cutoff_ns: int
) -> tuple[list[str], int]:
    """Drop partitions ending before `cutoff_ns`, then rollups, what users stored on those
    days (owner_storage) and jobs older than it.

    Returns (dropped partition names, number of jobs deleted). The ranks of deleted
    jobs go with them (foreign key cascade), and so does their frame ledger.
    """
    dropped = await partitions.drop_before(conn, cutoff_ns)
    async with conn.transaction():
        for table in ("p2p_minutes", "rollup_dirty", "fabric_port_minutes", *ROLLED_PER_RANK):
            await conn.execute(f"DELETE FROM {table} WHERE minute_ns < %s", (cutoff_ns,))
        for table in ROLLED_PER_FIVE:  # the five minutes that end before the cutoff
            await conn.execute(f"DELETE FROM {table} WHERE minute_ns <= %s", (cutoff_ns - FIVE_NS,))
        for table in ROLLED_PER_SECOND:
            await conn.execute(f"DELETE FROM {table} WHERE second_ns < %s", (cutoff_ns,))
        await conn.execute("DELETE FROM fabric_port_10s WHERE start_ns < %s", (cutoff_ns,))
        # what users have stored on the days dropped (the days drop_before drops)
        await conn.execute("DELETE FROM owner_storage WHERE day < %s", (cutoff_ns // DAY_NS,))
        await conn.execute(
            "DELETE FROM received_frames WHERE job_id IN "
            "(SELECT id FROM jobs WHERE last_seen_ns < %s)",
            (cutoff_ns,),
        )
        cur = await conn.execute("DELETE FROM jobs WHERE last_seen_ns < %s", (cutoff_ns,))
        jobs = cur.rowcount
    if dropped or jobs:
        log.info("retention: dropped %d partitions and %d jobs", len(dropped), jobs)
    return dropped, jobs
