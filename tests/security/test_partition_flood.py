"""Floods by an ordinary proven user against every ingest bound (issue #24 finding 3 and
point 4), the read side checked after each.

First the partition flood, scripted as the attack was: user A opens 125 connections to
the collector's Unix socket (the kernel proves A's uid) and sends on each frames of 8
distinct days, 1,000 days back from today. Before the ingest horizon each connection
brought its 8 days: 1,000 partitions per table, and the read side answered 500 (out of
shared memory, max_locks_per_transaction) for everyone. Now no partition is made for a
day outside the horizon (`too_old`, counted), and within it A gets 8 new days per hour
over all its connections together (`partition_limit`, counted): the tables keep today,
the two days made ahead and A's 8; user B's job page, the overview and B's report answer
200 with B's exact figures; the writer's rollup pass still runs.

Then A hits each other bound in turn (a run's file names, its communicators, a poison
run's rollups, the bytes per hour, the bytes in all across a collector restart), and after
each the read side of B and of A answers 200 with exact figures. The tests have a
database of their own, so the partitions they count are only their own.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.access.viewer import Access
from server.app import create_app
from stacklens import wire
from stacklens.constants import DAY_NS, MINUTE_NS
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.settings import Settings
from tests.access.data import token_for
from tests.collector.test_ingest import wait_for
from tests.conftest import query
from tests.identity.conftest import shared_dir, users  # noqa: F401 (fixtures)
from tests.security.test_ingest_bounds import partitions, tcp_frame

CONNECTIONS, DAYS_PER_CONNECTION = 125, 8
HORIZON_DAYS = Settings().ingest_horizon_days  # the default the test holds to


@pytest.fixture(scope="module")
def own_database() -> Iterator[str]:
    """A database of this module's own (the session's keeps other tests' partitions),
    removed afterwards."""
    scratch = Path(tempfile.mkdtemp(prefix="stacklens-flood-", dir="/tmp"))
    database = start_embedded(scratch / "pg")
    migrate(database.url)
    yield database.url
    database.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def connect_as(user, path: Path, count: int) -> list[socket.socket]:
    """`count` connections to the Unix socket `path` made by a child process running as
    `user` (so their peer credentials are the user's), handed to this process."""
    here, there = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child: become the user, connect, pass the sockets, exit
        code = 1
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            socks = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(count)]
            for sock in socks:
                sock.connect(str(path))
            socket.send_fds(there, [b"fds"], [sock.fileno() for sock in socks])
            code = 0
        finally:
            os._exit(code)
    there.close()
    _, fds, _, _ = socket.recv_fds(here, 16, count)
    here.close()
    assert os.waitpid(pid, 0)[1] == 0 and len(fds) == count
    return [socket.socket(fileno=fd) for fd in fds]


def victim_frame(seq: int, end_ns: int) -> bytes:
    """Frame `seq` of B's job "victim": 7 bytes to rank 1, its command at seq 0."""
    tables = {"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": 7, "msgs_sent": 1}])}
    if seq == 0:
        tables["rank_info"] = wire.records("rank_info", [{"command": b"./victim"}])
    return wire.encode_frame(job_id="victim", world_rank=0, world_size=2, seq=seq,
                             interval_start_ns=end_ns - 10**9, interval_end_ns=end_ns,
                             token="secret", tables=tables)  # fmt: skip


def prove(sock: socket.socket, owner: int) -> socket.socket:
    """Begin `sock` with a hello for `owner` (proof: the peer credentials); `sock` once
    the collector accepted it."""
    sock.settimeout(60)
    sock.sendall(wire.Hello(wire.Proof.PEER, owner, secrets.token_bytes(16)).encode())
    welcome = wire.Welcome.decode(sock.recv(wire.WELCOME_SIZE, socket.MSG_WAITALL))
    assert welcome.status == wire.Status.COMMITTED
    return sock


def send(sock: socket.socket, frames: list[bytes]) -> list[tuple[int, int]]:
    """Send `frames` on a proven `sock`, end the stream, read their acks (fewer when the
    collector ends the connection)."""
    with sock:
        sock.sendall(b"".join(frames))
        sock.shutdown(socket.SHUT_WR)
        raw = b""
        while len(raw) < len(frames) * wire.ACK_SIZE and (chunk := sock.recv(65536)):
            raw += chunk
    return [wire.decode_ack(raw[i : i + wire.ACK_SIZE]) for i in range(0, len(raw), wire.ACK_SIZE)]


def test_a_partition_flood_leaves_the_read_side_answering(own_database, shared_dir, users):  # noqa: F811
    a, b = users
    url = own_database
    sock_path = shared_dir / "flood.sock"
    now = time.time_ns()
    today = now // DAY_NS
    with BackgroundCollector(url, token="secret", ingest_auth="proven",
                             collector_socket=str(sock_path), admin_uids="0",
                             ingest_horizon_days=HORIZON_DAYS) as collector:  # fmt: skip
        b_frames = [victim_frame(seq, now - (2 - seq) * 10**9) for seq in range(2)]
        assert send(prove(connect_as(b, sock_path, 1)[0], b.pw_uid), b_frames) == [
            (wire.Status.COMMITTED, 0), (wire.Status.COMMITTED, 1)
        ]  # fmt: skip
        wait_for(collector.service.maintained.is_set)  # today and the next two days made
        started = time.monotonic()
        acks = []
        proven = [prove(sock, a.pw_uid) for sock in connect_as(a, sock_path, CONNECTIONS)]
        for c, sock in enumerate(proven):
            days = range(c * DAYS_PER_CONNECTION, (c + 1) * DAYS_PER_CONNECTION)
            # frame k ends 1 s into the day k days before today
            flood = [tcp_frame(k, (today - k) * DAY_NS + 10**9, job="flood") for k in days]
            acks.append(send(sock, flood))
        flooded_s = time.monotonic() - started
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
        rolled = asyncio.run_coroutine_threadsafe(collector.service.roll_up_once(),
                                                  collector.loop).result(60)  # fmt: skip
    # A's budget: 8 new days this hour, over all its connections (today's partition
    # exists): days 0-8 are stored, the 9th new one and the next two connections within
    # the horizon are asked to come back later; every later connection's first frame is
    # older than the horizon (days 31 and more back) and refused.
    committed, unavailable = wire.Status.COMMITTED, wire.Status.UNAVAILABLE
    assert acks[:4] == [[(committed, k) for k in range(8)], [(committed, 8), (unavailable, 9)],
                        [(unavailable, 16)], [(unavailable, 24)]]  # fmt: skip
    assert acks[4:] == [[(wire.Status.OUT_OF_RANGE, 8 * c)] for c in range(4, CONNECTIONS)]
    assert rejected == {"partition_limit": 3, "too_old": CONNECTIONS - 4}
    assert flooded_s < 30
    assert rolled > 0
    # Partitions: today, the two days made ahead and A's 8 new days, per table; never more
    # than the horizon's days and those three, whatever A sends.
    tables = len(collector.service.writer.partitions.tables)
    assert partitions(url) == (3 + 8) * tables <= (HORIZON_DAYS + 3) * tables
    # The read side, for B: the overview, B's job page and B's report, with B's figures.
    engine = make_engine(url)
    app = create_app(engine, access=Access(mode="oidc"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        as_b = {"Authorization": f"Bearer {token_for(engine, b.pw_name)}"}
        overview = client.get("/api/overview", headers=as_b)
        assert overview.status_code == 200, overview.text
        assert [j["job"] for j in overview.json()["jobs"]["jobs"]] == ["victim"]
        job = client.get("/api/jobs/victim", headers=as_b)
        assert job.status_code == 200, job.text
        assert (job.json()["bytes_sent"], job.json()["user"]) == (14, b.pw_name)
        matrix = client.get("/api/jobs/victim/matrix", headers=as_b)
        assert matrix.status_code == 200, matrix.text
        assert matrix.json()["cells"] == [{"src": 0, "dst": 1, "bytes": 14, "messages": 2}]
        report = client.get("/api/reports/jobs/victim", headers=as_b)
        assert report.status_code == 200, report.text
        assert "Job victim" in report.text
    engine.dispose()
    assert query(url, "SELECT count(*) FROM received_frames") == [(2 + 9,)]


def test_after_every_bound_is_hit_the_read_side_answers(own_database, shared_dir, users):  # noqa: F811
    """User A hits, one after the other, the bound on a run's file names, on its
    communicators, on the bytes stored per hour, on the bytes stored in all (across a
    collector restart) and sends a poison run whose rollups are quarantined; after each,
    the overview, the job list, B's job page, matrix and report and A's job pages answer
    200 with exact figures (B's job is "victim", from the test before or sent here)."""
    from tests.security.test_poison import HUGE
    from tests.security.test_poison import frame as p2p_frame
    from tests.security.test_run_bounds import big_frame, comm_frame, io_frame

    a, b = users
    url = own_database
    sock_path = shared_dir / "bounds.sock"
    t0 = (time.time_ns() - 600 * 10**9) // MINUTE_NS * MINUTE_NS  # ten minutes ago
    settings = {"token": "secret", "ingest_auth": "proven", "collector_socket": str(sock_path),
                "admin_uids": "0", "ingest_horizon_days": HORIZON_DAYS, "max_run_files": 100,
                "max_run_comms": 16, "max_mb_per_hour": 1, "max_stored_mb": 2}  # fmt: skip
    committed, unavailable = wire.Status.COMMITTED, wire.Status.UNAVAILABLE
    engine = make_engine(url)
    app = create_app(engine, access=Access(mode="oidc"))
    as_a = {"Authorization": f"Bearer {token_for(engine, a.pw_name)}"}
    as_b = {"Authorization": f"Bearer {token_for(engine, b.pw_name)}"}

    def as_user(user, frames: list[bytes]) -> list[tuple[int, int]]:
        return send(prove(connect_as(user, sock_path, 1)[0], user.pw_uid), frames)

    def read_side_answers(client: TestClient, after: str, a_jobs: list[str]) -> None:
        """Every read of B and of A answers 200 (`after`: the bound just hit)."""
        for path in ("/api/overview", "/api/jobs", "/api/jobs/victim", "/api/jobs/victim/matrix",
                     "/api/jobs/victim/series", "/api/reports/jobs/victim"):  # fmt: skip
            answer = client.get(path, headers=as_b)
            assert answer.status_code == 200, (after, path, answer.text)
        assert client.get("/api/jobs/victim", headers=as_b).json()["bytes_sent"] == 14
        for job in a_jobs:
            for part in ("", "/io", "/collectives", "/families", "/matrix", "/series",
                         "/profile"):  # fmt: skip
                answer = client.get(f"/api/jobs/{job}{part}", headers=as_a)
                assert answer.status_code == 200, (after, job, part, answer.text)
        overview = client.get("/api/overview", headers=as_a)
        assert overview.status_code == 200, (after, overview.text)

    with TestClient(app, base_url="http://127.0.0.1") as client:
        with BackgroundCollector(url, **settings) as collector:
            if not query(url, "SELECT 1 FROM jobs WHERE job_key = 'victim'"):
                now = time.time_ns()
                victim = [victim_frame(seq, now - (2 - seq) * 10**9) for seq in range(2)]
                assert as_user(b, victim) == [(committed, 0), (committed, 1)]
            # 1. file names: 150 distinct files in a run bounded to 100
            names = [io_frame(s, 0, [f"/f/{s}/{i}" for i in range(75)], "names", t0)
                     for s in range(2)]  # fmt: skip
            assert as_user(a, names) == [(committed, 0), (committed, 1)]
            read_side_answers(client, "run_files", ["names"])
            io = client.get("/api/jobs/names/io?limit=500", headers=as_a).json()
            assert sum(f["bytes_read"] for f in io["files"]) == 150 * 300
            # 2. communicators: 30 in a run bounded to 16
            comms = [comm_frame(s, [100 + 15 * s + i for i in range(15)], "comms", t0)
                     for s in range(2)]  # fmt: skip
            assert as_user(a, comms) == [(committed, 0), (committed, 1)]
            read_side_answers(client, "run_comms", ["names", "comms"])
            coll = client.get("/api/jobs/comms/collectives", headers=as_a).json()
            assert sum(c["calls"] for c in coll["communicators"]) == 30
            assert len(coll["communicators"]) == 17  # 16 and the overflow
            # 3. a poison run: its sums do not fit, its rollups are quarantined
            assert as_user(a, [p2p_frame("poison", s, HUGE, t0=t0) for s in range(3)]) == [
                (committed, s) for s in range(3)
            ]
            rolled = asyncio.run_coroutine_threadsafe(collector.service.roll_up_once(),
                                                      collector.loop).result(60)  # fmt: skip
            assert rolled > 0 and collector.service.rollups_quarantined == 1
            read_side_answers(client, "rollups_quarantined", ["names", "comms", "poison"])
            poison = client.get("/api/jobs/poison", headers=as_a).json()
            assert poison["bytes_sent"] == 3 * HUGE
            # 4. bytes per hour: A's MiB of this hour (some spent above) in 100 KB frames,
            # then told to come back later
            size = len(big_frame(0, "big", t0))
            used = collector.call(lambda: collector.service.ingest.storage.used(a.pw_uid))
            fit = ((1 << 20) - used) // size
            acks = as_user(a, [big_frame(s, "big", t0) for s in range(fit + 2)])
            assert acks == [(committed, s) for s in range(fit)] + [(unavailable, fit)]
            read_side_answers(client, "storage_limit", ["names", "comms", "poison", "big"])
            rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
            assert rejected == {"storage_limit": 1}
        # 5. bytes in all: 2 MiB, read from the database by the collector started again
        # (with room for 4 MiB an hour, its hour starting afresh)
        with BackgroundCollector(url, **{**settings, "max_mb_per_hour": 4}) as collector:
            stored = collector.call(lambda: collector.service.ingest.quota.used(a.pw_uid))
            more = ((2 << 20) - stored) // size
            assert stored >= fit * size and more > 0
            acks = as_user(a, [big_frame(s, "big", t0) for s in range(fit, fit + more + 2)])
            assert acks == [(committed, s) for s in range(fit, fit + more)] + [
                (unavailable, fit + more)
            ]
            read_side_answers(client, "storage_quota", ["names", "comms", "poison", "big"])
            rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
            assert rejected == {"storage_quota": 1}
    engine.dispose()
    total = query(url, "SELECT sum(bytes) FROM owner_storage WHERE owner_uid = %s", (a.pw_uid,))
    assert (2 << 20) - size < total[0][0] <= 2 << 20  # what A has stored, in all
