"""Bounds at ingest, probed as an attacker would (issue #12): the clock-skew window, the
partition flood, ids that cannot be stored faithfully, and the world-size bound; over the
TCP port and the HTTP JSON ingest alike. Each test failed on the code before the fix."""

from __future__ import annotations

import time

from stacklens import wire
from tests.collector.test_ingest import exchange, wait_for
from tests.conftest import query
from tests.server.test_ingest_and_metrics import AUTH, app_client, json_frame  # noqa: F401

DAY_NS = 86_400 * 10**9
#: 2020-01-01, 2018-01-01 and 2019-01-01 00:00 UTC: far from today; each flood test has its own
#: days (partitions outlive the tables' truncation between tests).
Y2020 = 1_577_836_800 * 10**9
Y2018 = 1_514_764_800 * 10**9
Y2019 = 1_546_300_800 * 10**9


def tcp_frame(seq: int, end_ns: int, job: str = "bounds", token: str = "secret", **header) -> bytes:
    """A one-record frame with its interval ending at `end_ns`."""
    return wire.encode_frame(
        job_id=job, world_rank=0, world_size=2, seq=seq, interval_start_ns=end_ns - 10**9,
        interval_end_ns=end_ns, token=token,
        tables={"p2p": wire.records("p2p", [{"peer": 1, "bytes_sent": 7, "msgs_sent": 1}])},
        **header,
    )  # fmt: skip


def partitions(pg_url: str) -> int:
    """Partitions of every partitioned table (their indexes' partitions not counted)."""
    return query(
        pg_url,
        "SELECT count(*) FROM pg_inherits JOIN pg_class ON pg_class.oid = inhrelid "
        "WHERE relkind = 'r'",
    )[0][0]


def test_a_frame_from_the_future_is_refused_with_its_reason(collector, pg_url):
    now = time.time_ns()
    ahead_23h = tcp_frame(0, now + 23 * 3600 * 10**9)
    assert exchange(collector.address, ahead_23h, 1) == [(wire.Status.OUT_OF_RANGE, 0)]
    assert collector.call(lambda: dict(collector.service.ingest.stats.rejected)) == {
        "clock_skew": 1
    }
    ahead_4min = tcp_frame(1, now + 4 * 60 * 10**9)
    assert exchange(collector.address, ahead_4min, 1) == [(wire.Status.COMMITTED, 1)]
    assert query(pg_url, "SELECT seq FROM received_frames") == [(1,)]


def test_the_clock_skew_window_is_a_setting(pg_url):
    from collector.service import BackgroundCollector

    with BackgroundCollector(pg_url, token="secret", max_clock_skew_s=60) as collector:
        two_min = tcp_frame(0, time.time_ns() + 120 * 10**9)
        assert exchange(collector.address, two_min, 1) == [(wire.Status.OUT_OF_RANGE, 0)]
        assert collector.call(lambda: collector.service.ingest.stats.rejected["clock_skew"]) == 1


def test_the_horizon_is_the_shorter_of_its_days_and_the_retention(pg_url):
    from collector.service import BackgroundCollector

    now = time.time_ns()
    with BackgroundCollector(pg_url, token="secret", ingest_horizon_days=3,
                             retention_days=2) as collector:  # fmt: skip
        assert exchange(collector.address, tcp_frame(0, now - 2 * DAY_NS - 60 * 10**9), 1) == [
            (wire.Status.OUT_OF_RANGE, 0)
        ]
        assert exchange(collector.address, tcp_frame(1, now - 2 * DAY_NS + 60 * 10**9), 1) == [
            (wire.Status.COMMITTED, 1)
        ]
        rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert rejected == {"too_old": 1}


def test_a_json_frame_older_than_the_horizon_is_counted_too_old(app_client):  # noqa: F811
    client, service = app_client
    old = json_frame(0, interval_start_ns=DAY_NS, interval_end_ns=DAY_NS + 1)  # 1970-01-02
    response = client.post("/api/ingest/frames", json={"frames": [old]}, headers=AUTH)
    assert response.status_code == 422
    assert response.json()["detail"] == [f"frame 0: {wire.TOO_OLD_REASON} [OUT_OF_RANGE]"]
    assert dict(service.ingest.stats.rejected) == {"too_old": 1}
    metrics = client.get("/metrics").text
    assert 'stacklens_ingest_frames_rejected_total{reason="too_old"} 1.0' in metrics


def test_partition_flood_over_http_is_refused_whole(app_client, pg_url):  # noqa: F811
    client, service = app_client
    wait_for(service.maintained.is_set)  # today's partitions made ahead, not by the flood
    before = partitions(pg_url)
    days = [json_frame(i, interval_start_ns=Y2020 + i * DAY_NS, interval_end_ns=Y2020 + i * DAY_NS
                       + 1) for i in range(1000)]  # fmt: skip
    response = client.post("/api/ingest/frames", json={"frames": days}, headers=AUTH)
    assert response.status_code == 422, response.text
    assert "STACKLENS_MAX_NEW_DAYS_PER_HOUR" in response.json()["detail"][0]
    assert partitions(pg_url) == before
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(0,)]
    assert service.ingest.stats.rejected["partition_limit"] == 1000 - 8
    metrics = client.get("/metrics").text
    assert 'stacklens_ingest_frames_rejected_total{reason="partition_limit"} 992.0' in metrics
    # Eight days are stored; then the user's hour is spent, over HTTP and TCP alike.
    batch = {"frames": days[:8]}
    assert client.post("/api/ingest/frames", json=batch, headers=AUTH).status_code == 200
    batch = {"frames": days[8:16]}
    assert client.post("/api/ingest/frames", json=batch, headers=AUTH).status_code == 422
    ninth = tcp_frame(8, Y2020 + 8 * DAY_NS + 1, job="json-job")
    assert exchange(("127.0.0.1", service.port), ninth, 1) == [(wire.Status.UNAVAILABLE, 8)]
    # An hour later, eight more.
    service.ingest.new_days.clock = lambda: time.monotonic() + 3601
    assert client.post("/api/ingest/frames", json=batch, headers=AUTH).status_code == 200
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(16,)]


def test_partition_flood_over_tcp_is_bounded_per_user(collector, pg_url):
    wait_for(collector.service.maintained.is_set)  # today's partitions made ahead
    before = partitions(pg_url)
    tables = len(collector.service.writer.partitions.tables)
    flood = b"".join(tcp_frame(i, Y2018 + i * DAY_NS + 10**9) for i in range(1000))
    acks = exchange(collector.address, flood, 1000)
    # The first 8 days are stored; the frame needing a 9th is asked to come back later.
    assert acks == [(wire.Status.COMMITTED, i) for i in range(8)] + [(wire.Status.UNAVAILABLE, 8)]
    assert partitions(pg_url) == before + 8 * tables
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(8,)]
    # A new connection of the same user (a resend, or a flood's next one) gets no more
    # within the hour: the budget is the user's, not the connection's.
    rest = flood[8 * len(flood) // 1000 :]  # from frame 8 (the frames are of equal size)
    assert exchange(collector.address, rest, 9) == [(wire.Status.UNAVAILABLE, 8)]
    rejected = collector.call(lambda: dict(collector.service.ingest.stats.rejected))
    assert rejected == {"partition_limit": 2}
    budget = collector.service.ingest.new_days
    collector.call(lambda: setattr(budget, "clock", lambda: time.monotonic() + 3601))
    assert exchange(collector.address, rest, 9)[-1] == (wire.Status.UNAVAILABLE, 16)
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(16,)]


def test_an_invalid_frame_after_a_flood_does_not_spare_it_the_budget(collector, pg_url):
    wait_for(collector.service.maintained.is_set)
    flood = [tcp_frame(i, Y2019 + i * DAY_NS + 10**9) for i in range(9)]
    bad = tcp_frame(9, Y2019 + 10**9, token="wrong")
    acks = exchange(collector.address, b"".join(flood) + bad, 10)
    assert acks == [(wire.Status.COMMITTED, i) for i in range(8)] + [(wire.Status.UNAVAILABLE, 8)]
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(8,)]


def test_ids_that_cannot_be_stored_faithfully_are_refused(collector, pg_url):
    now = time.time_ns()
    raw = bytearray(tcp_frame(0, now))
    offset = wire.HEADER_DTYPE.fields["job_id"][1]
    bad_ids = {
        "newline": b"job\nid",
        "NUL inside": b"job\x00id",
        "not UTF-8": b"job\xffid",
        "C1 control": "job\u0085id".encode(),
        "surrogate": b"job\xed\xa0\x80id",
    }
    for case, job in bad_ids.items():
        raw[offset : offset + 64] = job.ljust(64, b"\0")
        assert exchange(collector.address, bytes(raw), 1) == [(wire.Status.OUT_OF_RANGE, 0)], case
    assert collector.call(lambda: dict(collector.service.ingest.stats.rejected)) == {
        "out_of_range": len(bad_ids)
    }
    unicode_ok = tcp_frame(0, now, job="jöb-ü")
    assert exchange(collector.address, unicode_ok, 1) == [(wire.Status.COMMITTED, 0)]
    assert query(pg_url, "SELECT job_key FROM jobs") == [("jöb-ü",)]


def test_world_size_is_bounded(collector):
    now = time.time_ns()
    too_big = tcp_frame(0, now, job="big")
    raw = bytearray(too_big)
    offset = wire.HEADER_DTYPE.fields["world_size"][1]
    raw[offset : offset + 4] = (wire.MAX_WORLD_SIZE + 1).to_bytes(4, "little")
    assert exchange(collector.address, bytes(raw), 1) == [(wire.Status.OUT_OF_RANGE, 0)]
    raw[offset : offset + 4] = wire.MAX_WORLD_SIZE.to_bytes(4, "little")
    assert exchange(collector.address, bytes(raw), 1) == [(wire.Status.COMMITTED, 0)]


def test_json_text_longer_than_its_field_is_refused_never_cut(app_client, pg_url):  # noqa: F811
    client, _ = app_client
    cases = {
        "job": json_frame(0, job="j" * 65),
        "job in UTF-8 bytes": json_frame(0, job="é" * 33),  # 33 characters, 66 bytes
        "host": json_frame(0, host="h" * 65),
        "user": json_frame(0, user="u" * 65),
        "path": json_frame(0, tables={"io": [{"layer": 1, "path": "/" + "p" * 256}]}),
        "NUL in a path": json_frame(0, tables={"io": [{"layer": 1, "path": "/a\u0000b"}]}),
        "newline in a job id": json_frame(0, job="a\nb"),
    }
    for case, item in cases.items():
        response = client.post("/api/ingest/frames", json={"frames": [item]}, headers=AUTH)
        assert response.status_code == 422, (case, response.text)
    fits = json_frame(0, job="j" * 64, host="h" * 64)
    assert client.post("/api/ingest/frames", json={"frames": [fits]}, headers=AUTH).json() == {
        "stored": 1
    }
    assert query(pg_url, "SELECT job_key FROM jobs") == [("j" * 64,)]
