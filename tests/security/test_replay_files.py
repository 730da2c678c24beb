"""`stacklens replay` runs as root in node epilogs over spool directories users can write
to (issue #12): it read and sent a symlinked root-only file, hung on a FIFO and ran out of
memory on /dev/zero. Now it takes only regular files of at most the frame cap, never
through a link, and, as root, only frames whose user owns the file."""

from __future__ import annotations

import os
import re
import stat
import time

import pytest

from stacklens import wire
from tests.collector.test_ingest import frame
from tests.conftest import query, stacklens_replay


def test_links_fifos_and_devices_are_refused_unread(collector, pg_url, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    secret = tmp_path / "root-only"  # a frame only root may read (a real frame, so the
    secret.write_bytes(frame(0, user="root"))  # collector would have stored it)
    secret.chmod(0o600)
    (spool / "a-link.slf").symlink_to(secret)
    (spool / "b-zero.slf").symlink_to("/dev/zero")
    os.mkfifo(spool / "c-fifo.slf")
    os.mknod(spool / "d-zero.slf", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    (spool / "e-linked-dir").symlink_to(tmp_path)  # not followed: root-only is not found
    big = spool / "f-big.slf"
    with big.open("wb") as out:
        out.truncate(17 << 20)  # over the frame cap (16 MiB body + header), sparse
    started = time.monotonic()
    result = stacklens_replay(collector.endpoint, spool)
    assert time.monotonic() - started < 30  # no FIFO or device held it
    assert result.returncode == 1
    assert "replayed 0 frames" in result.stdout and "5 rejected, 0 left" in result.stdout
    reasons = dict(re.findall(r"^  rejected: (\S+) \((.*)\)$", result.stderr, re.M))
    assert reasons == {
        str(spool / "a-link.slf"): "a symbolic link, not a regular file",
        str(spool / "b-zero.slf"): "a symbolic link, not a regular file",
        str(spool / "c-fifo.slf"): "not a regular file (a FIFO, device or socket)",
        str(spool / "d-zero.slf"): "not a regular file (a FIFO, device or socket)",
        str(big): f"{17 << 20} bytes, over the frame cap of {(16 << 20) + wire.HEADER_SIZE}",
    }
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(0,)]
    assert sorted(p.name for p in spool.iterdir()) == [
        "a-link.rejected", "b-zero.rejected", "c-fifo.rejected", "d-zero.rejected",
        "e-linked-dir", "f-big.rejected",
    ]  # fmt: skip
    assert secret.read_bytes() == frame(0, user="root")  # untouched


def test_as_root_a_frame_must_be_its_file_owners(collector, pg_url, tmp_path):
    assert os.geteuid() == 0, "the owner check applies to replays run as root"
    spool = tmp_path / "spool"
    spool.mkdir()
    forged = spool / "forged.slf"  # uid 4242 claims to be root
    forged.write_bytes(frame(0, user="root", job="forged"))
    os.chown(forged, 4242, 4242)
    own = spool / "own.slf"  # uid 4242 as itself (no user name for it on this machine)
    own.write_bytes(frame(0, user="uid:4242", job="own"))
    os.chown(own, 4242, 4242)
    later = spool / "later.slf"  # frames after the first carry no user: not checked
    later.write_bytes(frame(1, user="root", job="own"))
    os.chown(later, 4242, 4242)
    result = stacklens_replay(collector.endpoint, spool)
    assert result.returncode == 1
    assert "replayed 2 frames" in result.stdout and "1 rejected, 0 left" in result.stdout
    assert f"rejected: {forged} (claims user 'root' but the file belongs to uid 4242)" in (
        result.stderr
    )
    assert query(pg_url, "SELECT job_key FROM jobs") == [("own",)]
    assert sorted(p.name for p in spool.iterdir()) == ["forged.rejected"]


def test_a_file_replaced_by_a_link_is_not_followed(tmp_path, monkeypatch):
    """The kind of file is judged without following links, then the file opened is
    checked to be the one judged (a swap in between is refused, not followed)."""
    from stacklens_cli.replay import _read_spool_file, _Refused

    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "x.slf").write_bytes(b"frame")
    real_stat = os.stat

    def swap_after_stat(name, *args, **kwargs):  # the race, made certain
        status = real_stat(name, *args, **kwargs)
        (spool / "x.slf").unlink()
        (spool / "x.slf").symlink_to("/etc/shadow")
        return status

    monkeypatch.setattr(os, "stat", swap_after_stat)
    fd = os.open(spool, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(_Refused, match="cannot be opened safely"):
            _read_spool_file("x.slf", fd, 1 << 20)
    finally:
        os.close(fd)
