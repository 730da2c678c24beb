"""Bounds the collector keeps per run and per user whoever sends (issue #24 point 4): the
distinct file names of a run, folded into "<other>" beyond STACKLENS_MAX_RUN_FILES with
every total exact, its distinct communicators, folded into their ops' overflow records
beyond STACKLENS_MAX_RUN_COMMS likewise, its call sites beyond STACKLENS_MAX_RUN_CALLSITES
into the overflow site, and the bytes of frames a user may have stored
per hour. The senders
bypass the hook library (frames built with stacklens.wire.encode_frame); each test failed
on the code before the bound."""

from __future__ import annotations

import asyncio

import psycopg
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from collector.store.partitions import apply_retention
from server.app import create_app
from stacklens import wire
from stacklens.constants import DAY_NS
from stacklens.db import make_engine
from stacklens.mpi_ops import op_names
from tests.collector.test_ingest import T0, exchange
from tests.conftest import query
from tests.identity.conftest import shared_dir, users  # noqa: F401 (fixtures)
from tests.security.test_partition_flood import connect_as, prove, send
from tests.server.test_ingest_and_metrics import AUTH


def io_frame(seq: int, rank: int, paths: list[str], job: str = "names", t0: int = T0) -> bytes:
    """A frame of one rank of a two-rank run, `seq` seconds after `t0`: a POSIX io record
    per path (3 reads of 100 B each, one write of 7 B)."""
    records = [{"layer": 1, "path": p.encode(), "mount": b"/", "fstype": b"ext4", "opens": 1,
                "reads": 3, "bytes_read": 300, "writes": 1, "bytes_written": 7}
               for p in paths]  # fmt: skip
    return wire.encode_frame(
        job_id=job, world_rank=rank, world_size=2, seq=seq, host=f"node{rank}",
        interval_start_ns=t0 + seq * 10**9, interval_end_ns=t0 + (seq + 1) * 10**9,
        token="secret", tables={"io": wire.records("io", records)},
    )  # fmt: skip


def stored_files(pg_url: str) -> dict[str, tuple[int, int, int, int]]:
    """path -> (records, reads, bytes read, bytes written) of the stored io rows."""
    rows = query(
        pg_url,
        "SELECT path, count(*), sum(reads), sum(bytes_read), sum(bytes_written) "
        "FROM io_deltas GROUP BY path",
    )
    return {path: (n, int(r), int(b), int(w)) for path, n, r, b, w in rows}


def test_file_names_beyond_the_run_bound_fold_into_other_with_exact_totals(pg_url):
    # Rank 0 names 60 new files in each of 3 frames, rank 1 60 more in each of 2, and every
    # frame also names /shared: 301 distinct files against a bound of 100.
    frames = [(seq, 0, [f"/r0/{seq}/{i}" for i in range(60)]) for seq in range(3)]
    frames += [(seq, 1, [f"/r1/{seq}/{i}" for i in range(60)]) for seq in range(2)]
    with BackgroundCollector(pg_url, token="secret", max_run_files=100) as collector:
        for seq, rank, paths in frames:
            payload = io_frame(seq, rank, ["/shared", *paths])
            assert exchange(collector.address, payload, 1) == [(wire.Status.COMMITTED, seq)]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
        rows = collector.call(lambda: dict(collector.service.writer.stats.rows))
    # Admitted in the order stored: /shared, then rank 0's first frame (60) and 39 of its
    # second; the other 201 records' files are "<other>", with their counters.
    admitted = {"/shared", *(f"/r0/0/{i}" for i in range(60)), *(f"/r0/1/{i}" for i in range(39))}
    files = stored_files(pg_url)
    assert set(files) == admitted | {"<other>"} and len(admitted) == 100
    assert files["<other>"] == (201, 603, 60_300, 1_407)
    assert files["/shared"] == (5, 15, 1_500, 35)
    assert files["/r0/1/38"] == (1, 3, 300, 7)
    total = [sum(v[i] for v in files.values()) for i in range(4)]
    assert total == [305, 915, 91_500, 2_135]  # 5 frames x 61 records, none lost
    assert folded == {"run_files": 201}
    assert rows["io_deltas"] == 305

    # A collector started afresh reads the run's stored names: a new one is still folded,
    # a stored one keeps its name; another run has a bound of its own.
    with BackgroundCollector(pg_url, token="secret", max_run_files=100) as collector:
        assert exchange(collector.address, io_frame(3, 0, ["/r0/0/5", "/new"]), 1) == [
            (wire.Status.COMMITTED, 3)
        ]
        assert exchange(collector.address, io_frame(0, 0, ["/new"], job="other"), 1) == [
            (wire.Status.COMMITTED, 0)
        ]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
    assert folded == {"run_files": 1}
    files = stored_files(pg_url)
    assert files["<other>"] == (202, 606, 60_600, 1_414)
    assert files["/r0/0/5"] == (2, 6, 600, 14)
    assert files["/new"] == (1, 3, 300, 7)  # the other run's


ALLREDUCE, SEND = op_names().index("MPI_Allreduce"), op_names().index("MPI_Send")


def comm_frame(seq: int, comms: list[int], job: str = "comms", t0: int = T0) -> bytes:
    """A frame of rank 0 of a two-rank run, `seq` seconds after `t0`, naming each
    communicator of `comms` (size 2) in an MPI_Allreduce record (1 call, 8 B, 5 ns), an
    MPI_Send record to rank 1 (1 message, 4 B, 3 ns) and its description (a split)."""
    coll = [{"op_id": ALLREDUCE, "comm_id": c, "comm_size": 2, "root": wire.BOUNDS["no_rank"],
             "calls": 1, "bytes": 8, "time_ns": 5} for c in comms]  # fmt: skip
    cp2p = [{"comm_id": c, "op_id": SEND, "peer": 1, "msgs": 1, "bytes": 4, "time_ns": 3}
            for c in comms]  # fmt: skip
    made = [{"comm_id": c, "parent_id": 1, "family_id": 9, "made": 2, "comm_size": 2,
             "name": f"c{c}".encode()} for c in comms]  # fmt: skip
    return wire.encode_frame(
        job_id=job, world_rank=0, world_size=2, seq=seq, host="node0",
        interval_start_ns=t0 + seq * 10**9, interval_end_ns=t0 + (seq + 1) * 10**9,
        token="secret", tables={"coll": wire.records("coll", coll),
                                "comm_p2p": wire.records("comm_p2p", cp2p),
                                "comm": wire.records("comm", made)},
    )  # fmt: skip


def stored_comms(pg_url: str, job: str = "comms") -> tuple[dict, dict, set]:
    """comm id -> (records, calls, bytes, time) of the stored collectives, comm id ->
    (records, peers, messages, bytes) of the stored communicator messages, and the comm ids
    described, of the job `job`."""
    coll = query(pg_url, "SELECT comm_id, count(*), sum(calls), sum(bytes), sum(time_ns), "
                 "min(comm_size), min(root) FROM coll_deltas c JOIN jobs j ON j.id = c.job_id "
                 "WHERE j.job_key = %s GROUP BY 1", (job,))  # fmt: skip
    cp2p = query(pg_url, "SELECT comm_id, count(*), array_agg(DISTINCT peer), sum(msgs), "
                 "sum(bytes) FROM comm_p2p_deltas c JOIN jobs j ON j.id = c.job_id "
                 "WHERE j.job_key = %s GROUP BY 1", (job,))  # fmt: skip
    made = query(pg_url, "SELECT comm_id FROM comm_made c JOIN jobs j ON j.id = c.job_id "
                 "WHERE j.job_key = %s", (job,))  # fmt: skip
    return (
        {c: (n, int(calls), int(b), int(t), size, root) for c, n, calls, b, t, size, root in coll},
        {c: (n, peers, int(m), int(b)) for c, n, peers, m, b in cp2p},
        {c for (c,) in made},
    )


def test_communicators_beyond_the_run_bound_fold_into_the_overflow_record_with_exact_totals(
    pg_url,
):
    # A sender bypassing the hooks names 10 new communicators in each of 5 frames: 50
    # against a bound of 16.
    overflow = wire.BOUNDS["overflow_comm"]
    with BackgroundCollector(pg_url, token="secret", max_run_comms=16) as collector:
        for seq in range(5):
            comms = [100 + 10 * seq + i for i in range(10)]
            assert exchange(collector.address, comm_frame(seq, comms), 1) == [
                (wire.Status.COMMITTED, seq)
            ]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
    # Admitted in the order stored: the first frame's 10 and 6 of the second's; the other
    # 34 records of each table are their op's overflow record, with their counters.
    admitted = set(range(100, 116))
    coll, cp2p, made = stored_comms(pg_url)
    assert set(coll) == set(cp2p) == admitted | {overflow}
    assert coll[overflow] == (34, 34, 272, 170, 0, -1)
    assert coll[115] == (1, 1, 8, 5, 2, -1)
    assert cp2p[overflow] == (34, [-1], 34, 136)
    assert cp2p[100] == (1, [1], 1, 4)
    assert made == admitted  # a folded communicator's description is not stored
    assert sum(v[1] for v in coll.values()) == 50 and sum(v[2] for v in cp2p.values()) == 50
    assert folded == {"run_comms": 68, "run_comm_descriptions": 34}

    # A collector started afresh reads the run's stored communicators: a stored one keeps
    # its id, a new one is folded; another run has a bound of its own.
    with BackgroundCollector(pg_url, token="secret", max_run_comms=16) as collector:
        assert exchange(collector.address, comm_frame(5, [105, 999]), 1) == [
            (wire.Status.COMMITTED, 5)
        ]
        assert exchange(collector.address, comm_frame(0, [999], job="other"), 1) == [
            (wire.Status.COMMITTED, 0)
        ]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
    assert folded == {"run_comms": 2, "run_comm_descriptions": 1}
    coll, cp2p, made = stored_comms(pg_url)
    assert coll[overflow][:2] == (35, 35) and coll[105][:2] == (2, 2) and 999 not in coll
    assert cp2p[overflow][2] == 35 and made == admitted
    assert stored_comms(pg_url, "other")[0] == {999: (1, 1, 8, 5, 2, -1)}


def site_frame(seq: int, rank: int, sites: list[int], job: str = "sites") -> bytes:
    """A frame of rank `rank` of a two-rank run, `seq` seconds after T0, with one
    MPI_Allreduce callsite record per site id of `sites` (1 call, 8 B, 5 ns) and the site's
    one frame (module /bin/app, offset 0x1000 + id)."""
    records = [{"site_id": s, "layer": 0, "op_id": ALLREDUCE, "comm_id": 1, "bucket": 3,
                "calls": 1, "bytes": 8, "time_ns": 5} for s in sites]  # fmt: skip
    frames = [{"site_id": s, "frame": 0, "depth": 1, "site_offset": 0x1000 + s,
               "build_id": b"ab" * 20, "module": b"/bin/app"} for s in sites]  # fmt: skip
    return wire.encode_frame(
        job_id=job, world_rank=rank, world_size=2, seq=seq, host=f"node{rank}",
        interval_start_ns=T0 + seq * 10**9, interval_end_ns=T0 + (seq + 1) * 10**9,
        token="secret", tables={"callsite": wire.records("callsite", records),
                                "callsite_frame": wire.records("callsite_frame", frames)},
    )  # fmt: skip


def stored_sites(pg_url: str, job: str = "sites") -> tuple[dict, set]:
    """(rank, site id) -> (records, calls, bytes) of the stored callsite rows, and the
    (rank, site id) pairs with a stored frame, of the job `job`."""
    rows = query(pg_url, "SELECT world_rank, site_id, count(*), sum(calls), sum(bytes) "
                 "FROM callsite_deltas c JOIN jobs j ON j.id = c.job_id WHERE j.job_key = %s "
                 "GROUP BY 1, 2", (job,))  # fmt: skip
    paths = query(pg_url, "SELECT world_rank, site_id FROM callsite_paths c JOIN jobs j "
                  "ON j.id = c.job_id WHERE j.job_key = %s", (job,))  # fmt: skip
    return {(r, s): (n, int(c), int(b)) for r, s, n, c, b in rows}, set(paths)


def test_call_sites_beyond_the_run_bound_fold_into_the_overflow_site_with_exact_totals(pg_url):
    # A sender bypassing the hooks names 200 sites on each of two ranks, in two frames each
    # (the same site ids: a site is a rank's own), against a bound of 256 per run.
    overflow = wire.BOUNDS["overflow_site"]
    with BackgroundCollector(pg_url, token="secret", max_run_callsites=256) as collector:
        for seq in range(2):
            for rank in range(2):
                sites = list(range(100 * seq, 100 * seq + 100))
                assert exchange(collector.address, site_frame(seq, rank, sites), 1) == [
                    (wire.Status.COMMITTED, seq)
                ]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
    # Admitted in the order stored: rank 0's and rank 1's first 100, rank 0's next 56;
    # rank 0's last 44 and rank 1's last 100 count under the overflow site, calls kept.
    rows, paths = stored_sites(pg_url)
    admitted = {(0, s) for s in range(156)} | {(1, s) for s in range(100)}
    assert set(rows) == admitted | {(0, overflow), (1, overflow)}
    assert rows[(0, overflow)] == (44, 44, 352) and rows[(1, overflow)] == (100, 100, 800)
    assert rows[(1, 99)] == (1, 1, 8)
    assert paths == admitted  # a folded site's frames are not stored
    assert sum(v[1] for v in rows.values()) == 400
    assert folded == {"run_callsites": 144, "run_callsite_frames": 144}

    # A collector started afresh reads the run's stored sites: a stored one keeps its id, a
    # new one is folded; another run has a bound of its own.
    with BackgroundCollector(pg_url, token="secret", max_run_callsites=256) as collector:
        assert exchange(collector.address, site_frame(2, 1, [5, 150]), 1) == [
            (wire.Status.COMMITTED, 2)
        ]
        assert exchange(collector.address, site_frame(0, 1, [150], job="other"), 1) == [
            (wire.Status.COMMITTED, 0)
        ]
        folded = collector.call(lambda: dict(collector.service.writer.stats.names_folded))
    assert folded == {"run_callsites": 1, "run_callsite_frames": 1}
    rows, paths = stored_sites(pg_url)
    assert rows[(1, 5)] == (2, 2, 16) and rows[(1, overflow)] == (101, 101, 808)
    assert (1, 150) not in rows and paths == admitted
    assert stored_sites(pg_url, "other") == ({(1, 150): (1, 1, 8)}, {(1, 150)})


def big_frame(seq: int, job: str, t0: int = T0) -> bytes:
    """A frame of about 100 KB: 200 io records of distinct files of 200-byte paths."""
    return io_frame(seq, 0, [f"/{seq}/{i}/" + "p" * 190 for i in range(200)], job=job, t0=t0)


def test_a_user_beyond_the_storage_budget_is_told_to_resend_later_and_others_are_stored(
    pg_url,
    shared_dir,  # noqa: F811
    users,  # noqa: F811
):
    a, b = users
    sock_path = shared_dir / "storage.sock"
    size = len(big_frame(0, "a"))
    fit = (1 << 20) // size  # frames of A that fit in its MiB of this hour
    assert 90_000 < size < 110_000 and fit == 1_048_576 // size
    with BackgroundCollector(pg_url, token="secret", ingest_auth="proven",
                             collector_socket=str(sock_path), admin_uids="0",
                             max_mb_per_hour=1) as collector:  # fmt: skip
        first = [big_frame(seq, "a") for seq in range(fit + 3)]
        acks = send(prove(connect_as(a, sock_path, 1)[0], a.pw_uid), first)
        # A new connection of A gets nothing more this hour: the budget is the user's.
        again = send(prove(connect_as(a, sock_path, 1)[0], a.pw_uid), [big_frame(50, "a")])
        b_acks = send(prove(connect_as(b, sock_path, 1)[0], b.pw_uid),
                      [big_frame(seq, "b") for seq in range(3)])  # fmt: skip
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    committed, unavailable = wire.Status.COMMITTED, wire.Status.UNAVAILABLE
    assert acks == [(committed, seq) for seq in range(fit)] + [(unavailable, fit)]
    assert again == [(unavailable, 50)]
    assert b_acks == [(committed, seq) for seq in range(3)]
    assert rejected == {"storage_limit": 2}
    stored = query(pg_url, "SELECT j.job_key, count(*) FROM received_frames f "
                   "JOIN jobs j ON j.id = f.job_id GROUP BY 1 ORDER BY 1")  # fmt: skip
    assert stored == [("a", fit), ("b", 3)]


def test_an_http_batch_beyond_the_storage_budget_is_answered_503_and_stores_nothing(
    pg_url, control_socket
):
    # Trusted mode: every frame is the collector user's, over TCP and HTTP alike.
    paths = [{"layer": 1, "path": f"/{i}/" + "p" * 190, "reads": 1} for i in range(200)]
    batch = [{"job": "http", "run_id": 5, "world_rank": 0, "world_size": 2, "seq": seq,
              "interval_start_ns": T0 + seq, "interval_end_ns": T0 + seq + 1,
              "tables": {"io": paths}} for seq in range(12)]  # fmt: skip
    engine = make_engine(pg_url)
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket,
                             max_mb_per_hour=1) as running:  # fmt: skip
        app = create_app(engine, collector=running.link)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            whole = client.post("/api/ingest/frames", json={"frames": batch}, headers=AUTH)
            assert whole.status_code == 503, whole.text
            assert "STACKLENS_MAX_MB_PER_HOUR" in whole.text
            part = client.post("/api/ingest/frames", json={"frames": batch[:3]}, headers=AUTH)
            assert (part.status_code, part.json()) == (200, {"stored": 3})
            metrics = client.get("/metrics").text
    engine.dispose()
    # 10 frames of about 100 KB fit in the MiB: the 2 beyond are counted, the batch refused
    assert 'stacklens_ingest_frames_rejected_total{reason="storage_limit"} 2.0' in metrics
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(3,)]


def test_a_user_beyond_its_stored_quota_is_refused_also_after_a_restart_until_retention(
    pg_url,
    shared_dir,  # noqa: F811
    users,  # noqa: F811
):
    a, b = users
    sock_path = shared_dir / "quota.sock"
    size = len(big_frame(0, "a"))
    fit = (1 << 20) // size  # frames of A that fit in the MiB it may have stored
    proven = {"token": "secret", "ingest_auth": "proven", "collector_socket": str(sock_path),
              "admin_uids": "0", "max_stored_mb": 1}  # fmt: skip
    committed, unavailable = wire.Status.COMMITTED, wire.Status.UNAVAILABLE
    with BackgroundCollector(pg_url, **proven) as collector:
        acks = send(prove(connect_as(a, sock_path, 1)[0], a.pw_uid),
                    [big_frame(seq, "a") for seq in range(fit + 3)])  # fmt: skip
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert acks == [(committed, seq) for seq in range(fit)] + [(unavailable, fit)]
    assert rejected == {"storage_quota": 1}
    # What A stored is in the database, per day: exactly its committed frames.
    assert query(pg_url, "SELECT owner_uid, frames, bytes FROM owner_storage") == [
        (a.pw_uid, fit, fit * size)
    ]

    # The collector restarts (the hourly budget, in memory, starts afresh): A is still over
    # its quota, on any connection; B's frames are stored.
    with BackgroundCollector(pg_url, **proven) as collector:
        again = send(prove(connect_as(a, sock_path, 1)[0], a.pw_uid), [big_frame(fit, "a")])
        b_acks = send(prove(connect_as(b, sock_path, 1)[0], b.pw_uid),
                      [big_frame(seq, "b") for seq in range(3)])  # fmt: skip
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
        # Retention drops the day A's frames lie in: the next maintenance pass reads what A
        # has stored again, and A's frame is stored.
        day_after = (T0 // DAY_NS + 1) * DAY_NS
        asyncio.run_coroutine_threadsafe(_retention(collector, day_after),
                                         collector.loop).result(60)  # fmt: skip
        later = send(prove(connect_as(a, sock_path, 1)[0], a.pw_uid), [big_frame(fit, "a")])
    assert again == [(unavailable, fit)]
    assert b_acks == [(committed, seq) for seq in range(3)]
    assert rejected == {"storage_quota": 1}
    assert later == [(committed, fit)]
    assert query(pg_url, "SELECT owner_uid, frames FROM owner_storage ORDER BY 1") == [
        (a.pw_uid, 1)
    ]


async def _retention(collector: BackgroundCollector, cutoff_ns: int) -> None:
    """Apply retention at `cutoff_ns` and read what users have stored, as the collector's
    maintenance pass does."""
    service = collector.service
    async with await psycopg.AsyncConnection.connect(service.database_url) as conn:
        await apply_retention(conn, service.writer.partitions, cutoff_ns)
        await service.ingest.quota.refresh(conn)


def test_an_http_batch_beyond_the_stored_quota_is_answered_503_and_stores_nothing(
    pg_url, control_socket
):
    paths = [{"layer": 1, "path": f"/{i}/" + "p" * 190, "reads": 1} for i in range(200)]
    batch = [{"job": "http", "run_id": 5, "world_rank": 0, "world_size": 2, "seq": seq,
              "interval_start_ns": T0 + seq, "interval_end_ns": T0 + seq + 1,
              "tables": {"io": paths}} for seq in range(12)]  # fmt: skip
    engine = make_engine(pg_url)
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket,
                             max_stored_mb=1) as running:  # fmt: skip
        app = create_app(engine, collector=running.link)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            part = client.post("/api/ingest/frames", json={"frames": batch[:3]}, headers=AUTH)
            assert (part.status_code, part.json()) == (200, {"stored": 3})
            rest = client.post("/api/ingest/frames", json={"frames": batch[3:]}, headers=AUTH)
            assert rest.status_code == 503, rest.text
            assert "STACKLENS_MAX_STORED_MB" in rest.text
            jobs = client.get("/api/jobs/http")
            metrics = client.get("/metrics").text
    engine.dispose()
    # 10 frames of about 100 KB fit in the MiB: 3 stored, 7 of the 9 more would fit, 2 not
    assert 'stacklens_ingest_frames_rejected_total{reason="storage_quota"} 2.0' in metrics
    assert jobs.status_code == 200, jobs.text
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(3,)]
    assert query(pg_url, "SELECT frames FROM owner_storage") == [(3,)]
