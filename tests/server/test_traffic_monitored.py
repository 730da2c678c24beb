"""server/traffic/monitored.py against frames stored by a real collector: monitored bytes per
(src, dst) over a window, exactly; an empty window of a monitored run is {}, a run that
never monitored is None (absent, never 0); the owner filter applies."""

from __future__ import annotations

from sqlalchemy.orm import Session

from server.access.owner import restrict
from server.access.viewer import Viewer
from server.traffic.monitored import monitored_bytes
from stacklens import wire
from stacklens.db import make_engine
from tests.collector.test_ingest import T0, exchange
from tests.conftest import query

S = 10**9


def _frame(job: str, rank: int, seq: int, end: int, records: list[dict] | None) -> bytes:
    """A frame of rank `rank` of 3 ending at T0 + end, with the monitored section of
    `records` (None: no monitored section, an unmonitored rank)."""
    tables = {} if records is None else {"monitored": wire.records("monitored", records)}
    return wire.encode_frame(
        job_id=job, world_rank=rank, world_size=3, seq=seq, interval_start_ns=T0 + end - S,
        interval_end_ns=T0 + end, token="secret", tables=tables,
    )  # fmt: skip


def _ids(pg_url: str, job: str) -> tuple[int, int]:
    [(job_id, run_id)] = query(
        pg_url,
        "SELECT jobs.id, runs.id FROM jobs JOIN runs ON runs.job_id = jobs.id WHERE job_key = %s",
        (job,),
    )
    return job_id, run_id


def test_monitored_bytes_per_pair_and_window(collector, pg_url):
    frames = [
        _frame("monitored", 0, 0, 1 * S, [{"peer": 1, "bytes": 1000, "msgs": 2}]),
        _frame("monitored", 0, 1, 2 * S, [{"peer": 1, "bytes": 24, "msgs": 1},
                                         {"peer": 2, "bytes": 7, "msgs": 1}]),
        _frame("monitored", 1, 0, 2 * S, [{"peer": 0, "bytes": 5, "msgs": 1}]),
        _frame("monitored", 2, 0, 3 * S, []),  # monitored, nothing sent
        _frame("plain", 0, 0, 1 * S, None),
    ]  # fmt: skip
    assert exchange(collector.address, b"".join(frames), acks=5) == [
        (0, 0), (0, 1), (0, 0), (0, 0), (0, 0)
    ]  # fmt: skip
    engine = make_engine(pg_url)
    try:
        with Session(engine) as session:
            job_id, run_id = _ids(pg_url, "monitored")
            every = monitored_bytes(session, job_id, run_id, 0, 2**62)
            assert every == {(0, 1): 1024, (0, 2): 7, (1, 0): 5}
            # an interval counts when its end lies in [from, to)
            first = monitored_bytes(session, job_id, run_id, T0 + S, T0 + 2 * S)
            assert first == {(0, 1): 1000}
            assert monitored_bytes(session, job_id, run_id, T0 + 3 * S, T0 + 4 * S) == {}
            assert monitored_bytes(session, *_ids(pg_url, "plain"), 0, 2**62) is None
        with Session(engine) as session:  # another user's job reads as unmonitored
            restrict(session, Viewer(user="mallory", admin=False, how="token"))
            assert monitored_bytes(session, job_id, run_id, 0, 2**62) is None
    finally:
        engine.dispose()
