"""`stacklens replay`: spooled frames reach the collector exactly once; bad ones are kept."""

from __future__ import annotations

import getpass
import json
import os
import tracemalloc
from pathlib import Path

from stacklens.settings import Settings
from tests.collector import test_ingest
from tests.conftest import free_port, query, stacklens_replay


def frame(seq: int, **options) -> bytes:
    """A frame of tests.collector.test_ingest whose rank information names the user running
    the tests: the owner of the files they spool (replay checks it when run as root)."""
    return test_ingest.frame(seq, user=getpass.getuser(), **options)


def spool(directory: Path, name: str, raw: bytes) -> Path:
    """Write one spool file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.slf"
    path.write_bytes(raw)
    return path


def test_replay_delivers_every_frame_once(collector, pg_url, tmp_path):
    for seq in (2, 0, 1):  # file order does not matter: replay sorts by (job, rank, seq)
        spool(tmp_path / "job-A" / "0", f"s{seq}", frame(seq))
    spool(tmp_path / "job-A" / "1", "s0", frame(0, rank=1))
    result = stacklens_replay(collector.endpoint, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "replayed 4 frames" in result.stdout and "0 rejected, 0 left" in result.stdout
    assert list(tmp_path.rglob("*.slf")) == []
    assert query(
        pg_url, "SELECT world_rank, sum(bytes_sent) FROM p2p_deltas GROUP BY 1 ORDER BY 1"
    ) == [(0, 1000 + 1001 + 1002), (1, 1000)]

    spool(tmp_path / "again", "s1", frame(1))  # already stored: acknowledged, not re-added
    assert stacklens_replay(collector.endpoint, tmp_path).returncode == 0
    assert query(pg_url, "SELECT sum(bytes_sent) FROM p2p_deltas") == [(4003,)]


def test_rejected_frames_are_kept_and_the_rest_delivered(collector, pg_url, tmp_path):
    spool(tmp_path, "a-good", frame(0))
    spool(tmp_path, "b-garbage", b"not a frame at all" * 20)
    spool(tmp_path, "c-wrong-token", frame(1, token="guess", job="job-Z"))
    result = stacklens_replay(collector.endpoint, tmp_path)
    assert result.returncode == 1
    assert "replayed 1 frames" in result.stdout and "2 rejected, 0 left" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "b-garbage.rejected",
        "c-wrong-token.rejected",
    ]
    assert "bad_magic" in result.stderr and "bad_token" in result.stderr
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(1,)]


def test_collector_down_keeps_the_spool(tmp_path):
    path = spool(tmp_path, "s0", frame(0))
    result = stacklens_replay(f"127.0.0.1:{free_port()}", tmp_path)
    assert result.returncode == 1
    assert "replayed 0 frames" in result.stdout and "1 left" in result.stdout
    assert path.read_bytes() == frame(0)


def test_files_deleted_by_their_sender_meanwhile_are_skipped(
    collector, pg_url, tmp_path, monkeypatch
):
    """A rank that delivers live deletes its spool file on the ack, possibly while a
    replay (a node epilog) runs: a file gone before it is listed, or between its listing
    and its reading (replay reads each file as it sends it), is skipped, neither failing
    the replay nor counted."""
    from stacklens_cli.replay import Spool, replay

    spool(tmp_path, "gone-before-read", frame(0)).unlink()
    (tmp_path / "dangling.slf").symlink_to(tmp_path / "deleted-target")
    late = spool(tmp_path, "gone-before-send", frame(1))
    kept = spool(tmp_path, "kept", frame(2))
    with Spool.open(tmp_path) as opened:
        listed = opened.frames()
        assert [opened.path_of(f) for f in listed] == [late, kept]
        late.unlink()  # the sender's own ack deleted it after the replay listed it
        monkeypatch.setattr(opened, "frames", lambda *_: listed)
        settings = Settings(collector=collector.endpoint, ingest_auth="trusted")
        result = replay(opened, settings)
    assert (result.delivered, result.rejected, result.remaining) == (1, [], 0)
    assert query(pg_url, "SELECT sum(bytes_sent) FROM p2p_deltas") == [(1002,)]


def test_a_spool_larger_than_the_in_flight_bound_is_streamed(collector, pg_url, tmp_path):
    """Replay reads each file as it sends it and keeps at most `in_flight` bytes sent and
    unacknowledged: a 20 MB spool replayed with a bound of 1 MiB is delivered whole while
    the replay's memory (traced in a child process, the collector's allocations apart)
    stays under 3 MiB; it held the whole spool, twice, before (40 MB)."""
    from stacklens_cli.replay import Spool, replay
    from tests.security.test_run_bounds import big_frame

    frames = [big_frame(seq, "streamed") for seq in range(210)]
    for seq, raw in enumerate(frames):
        spool(tmp_path / str(seq % 7), f"s{seq}", raw)
    total = sum(len(raw) for raw in frames)
    assert total > 20 * 10**6
    settings = Settings(collector=collector.endpoint, ingest_auth="trusted",
                        ingest_token="secret")  # fmt: skip
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the replay, in a child: only its own allocations are traced
        code = 1
        try:
            tracemalloc.start()
            with Spool.open(tmp_path) as opened:
                result = replay(opened, settings, in_flight=1 << 20)
            peak = tracemalloc.get_traced_memory()[1]
            os.write(write, json.dumps([result.delivered, len(result.rejected),
                                        result.remaining, peak]).encode())  # fmt: skip
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        delivered, rejected, remaining, peak = json.loads(answer.read())
    assert os.waitpid(pid, 0)[1] == 0
    assert (delivered, rejected, remaining) == (210, 0, 0)
    assert peak < 3 << 20, peak
    assert list(tmp_path.rglob("*.slf")) == []
    assert query(pg_url, "SELECT count(*), sum(bytes_read) FROM io_deltas") == [
        (210 * 200, 210 * 200 * 300)
    ]
