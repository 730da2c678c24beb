"""`stacklens replay` runs as root in node epilogs over spool directories users can write
to (issue #12): it read and sent a symlinked root-only file, hung on a FIFO and ran out of
memory on /dev/zero. Now it takes only regular files of at most the frame cap, never
through a link, and, as root, only frames whose user owns the file."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

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
    from stacklens_cli.replay import Refused, _read_spool_file

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
        with pytest.raises(Refused, match="cannot be opened safely"):
            _read_spool_file("x.slf", fd, 1 << 20)
    finally:
        os.close(fd)


def replay_all_users(endpoint: str, tmp: Path, timeout: float = 60):
    """`stacklens replay --all-users` as root with TMPDIR=`tmp`; the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(STACKLENS_COLLECTOR=endpoint, STACKLENS_INGEST_TOKEN="secret",
               STACKLENS_INGEST_AUTH="trusted", TMPDIR=str(tmp))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "replay", "--all-users"],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def user_spool(tmp: Path, uid: int) -> Path:
    """The default spool of `uid` under `tmp`, owned by it (as its hooks make it)."""
    spool = tmp / f"stacklens-spool-{uid}"
    spool.mkdir(mode=0o700)
    os.chown(spool, uid, uid)
    return spool


def test_one_users_spool_cannot_stop_the_replay_of_the_others(collector, pg_url, tmp_path):
    """uid 4242's spool holds a directory chain 1,100 levels deep (a recursive walk ran
    out of stack), a file whose `*.rejected` name is a directory (the rename raised), and
    a file of another uid; uid 4243's frame is replayed all the same, 4242's are refused
    with their reasons."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o1777)
    mallory = user_spool(tmp, 4242)
    fd = os.open(mallory, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1100):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    os.close(fd)
    (mallory / "x.slf").write_bytes(b"not a frame at all" * 20)
    (mallory / "x.rejected").mkdir()
    planted = mallory / "y.slf"  # a file of uid 4343 in 4242's spool
    planted.write_bytes(frame(0, user="uid:4343", job="planted"))
    os.chown(planted, 4343, 4343)
    for path in (mallory / "x.slf", mallory / "x.rejected"):
        os.chown(path, 4242, 4242)
    victim = user_spool(tmp, 4243)
    (victim / "v.slf").write_bytes(frame(0, user="uid:4243", job="victim"))
    os.chown(victim / "v.slf", 4243, 4243)
    try:
        result = replay_all_users(collector.endpoint, tmp)
    finally:
        subprocess.run(["rm", "-rf", str(mallory / "d")], check=True)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"replayed 0 frames from {mallory} to {collector.endpoint}; 2 rejected, 0 left",
        f"replayed 1 frames from {victim} to {collector.endpoint}; 0 rejected, 0 left",
        f"replayed the spools of 2 users under {tmp}",
    ]
    reasons = dict(re.findall(r"^  rejected: (\S+) \((.*)\)$", result.stderr, re.M))
    assert reasons == {
        str(mallory / "x.slf"): "bad_magic",
        str(planted): "the file belongs to uid 4343, not to the spool's owner uid 4242",
    }
    assert "directories more than 8 levels deep are not replayed" in result.stderr
    assert f"rejected spool file {mallory / 'x.slf'} not renamed: " in result.stderr
    assert query(pg_url, "SELECT job_key FROM jobs") == [("victim",)]
    assert sorted(p.name for p in mallory.iterdir()) == ["x.rejected", "x.slf", "y.rejected"]


#: Run by the test below in a process of its own (it blocked forever before): a replay of
#: SPOOL whose subdirectory `sub` is swapped for a FIFO right after SPOOL is listed.
SWAP_TO_FIFO = r"""
import os, sys
spool = sys.argv[1]
sub = os.path.join(spool, "sub")
listed = os.scandir
class Listing(list):
    def __enter__(self): return self
    def __exit__(self, *exc): pass
def swap_after_listing(target):
    entries = Listing(listed(target))  # each entry knows its kind from the listing
    if any(e.name == "sub" for e in entries) and os.path.isdir(sub):
        os.rmdir(sub)
        os.mkfifo(sub)
    return entries
os.scandir = swap_after_listing
from stacklens_cli import main
sys.exit(main(["replay", spool]))
"""


def test_a_directory_swapped_for_a_fifo_after_listing_is_not_opened(collector, pg_url, tmp_path):
    spool = tmp_path / "spool"
    (spool / "sub").mkdir(parents=True)
    (spool / "a.slf").write_bytes(frame(0, user="root"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(STACKLENS_COLLECTOR=collector.endpoint, STACKLENS_INGEST_TOKEN="secret",
               STACKLENS_INGEST_AUTH="trusted")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", SWAP_TO_FIFO, str(spool)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "replayed 1 frames" in result.stdout and "0 rejected, 0 left" in result.stdout
    assert stat.S_ISFIFO((spool / "sub").lstat().st_mode)
    assert query(pg_url, "SELECT count(*) FROM received_frames") == [(1,)]


def test_a_user_spool_is_checked_again_once_opened(tmp_path):
    """--all-users lists the spools, then opens each by name relative to their folder: a
    spool replaced by a symbolic link, or no longer its user's, in between is refused."""
    from stacklens_cli.replay import Refused, Spool, user_spools

    linked, moved = user_spool(tmp_path, 4242), user_spool(tmp_path, 4243)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.slf").write_bytes(frame(0, user="uid:4242"))
    os.chown(elsewhere, 4242, 4242)
    root_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listed = user_spools(root_fd)
        assert listed == [(4242, linked.name), (4243, moved.name)]
        linked.rmdir()
        linked.symlink_to(elsewhere)
        os.chown(moved, 4244, 4244)
        with pytest.raises(Refused, match=r"^not a directory \(a symbolic link or another"):
            Spool.open(linked, 4242, root_fd)
        with pytest.raises(Refused, match="^the directory belongs to uid 4244, not to uid 4243$"):
            Spool.open(moved, 4243, root_fd)
    finally:
        os.close(root_fd)
    assert (elsewhere / "x.slf").exists()
