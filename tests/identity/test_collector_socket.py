"""The collector's Unix socket is made only where nobody else can swap its name (issue #24,
"What must be true" point 3: privileged file operations on descriptors).

The collector (root) bound its socket by path, then `chmod 0666` by path. With
STACKLENS_COLLECTOR_SOCKET in a directory another user owns, that user (here with
inotify) renames the fresh socket away and puts a symlink to a root-only file at its
name: root's chmod made the file writable by everyone. Now the directory is opened once
and must belong to root (or the collector's user) and be writable by nobody else, or be
sticky like /tmp; binding, the mode and the removal at stop go through its descriptor.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import time
from pathlib import Path

from collector.service import BackgroundCollector
from stacklens.sender import open_connection
from stacklens.settings import Settings
from tests.identity.attacker import start_attacker

#: Runs as the directory's owner: once a socket appears at NAME in DIR, renames it away and
#: puts a symlink to TARGET in its place.
ATTACKER = r"""
directory, name, target = sys.argv[1:4]
wait(directory, IN_CREATE, lambda created: created == name.encode())
path = os.path.join(directory, name)
try:
    os.rename(path, path + ".moved")
    os.symlink(target, path)
    print("swapped", flush=True)
except OSError as exc:
    print("refused:", exc.strerror, flush=True)
"""


def start_with_attacker(tmp: Path, directory: Path, owner, munge_socket: str, pg_url: str,
                        monkeypatch) -> tuple[BackgroundCollector, str]:  # fmt: skip
    """Start a proven collector with its socket `directory`/ingest.sock while `owner` runs
    the attacker on `directory`; the collector (entered) and what the attacker said. The
    collector waits after creating its socket until the attacker has acted: the race
    made certain."""
    target = tmp / "root-only"
    attacker = start_attacker(owner.pw_name, tmp / "attacker.py", ATTACKER, str(directory),
                              "ingest.sock", str(target))  # fmt: skip
    loop_class = type(asyncio.new_event_loop())
    listen = loop_class.create_unix_server

    async def listen_then_wait(self, *args, **kwargs):
        server = await listen(self, *args, **kwargs)
        deadline = time.monotonic() + 10
        while attacker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the attacker's moment, between the socket and its mode
        return server

    monkeypatch.setattr(loop_class, "create_unix_server", listen_then_wait)
    collector = BackgroundCollector(
        pg_url, ingest_auth="proven", collector_socket=str(directory / "ingest.sock"),
        munge_socket=munge_socket, admin_uids="0",
    ).__enter__()  # fmt: skip
    attacker.kill()
    said = attacker.communicate()[0]
    return collector, said


def root_only(tmp: Path) -> Path:
    """A file only root may write (what the attacker aims root's chmod at)."""
    target = tmp / "root-only"
    target.write_text("root's\n")
    target.chmod(0o600)
    return target


def test_a_socket_directory_of_another_user_is_refused(
    pg_url, shared_dir, munge_socket, users, monkeypatch, caplog
):
    a, _ = users
    tmp = shared_dir / "socket-theirs"
    tmp.mkdir(mode=0o755)
    target = root_only(tmp)
    theirs = tmp / "run"  # the socket's directory, A's
    theirs.mkdir(mode=0o755)
    os.chown(theirs, a.pw_uid, a.pw_gid)
    caplog.set_level(logging.WARNING, logger="collector.ingest.server")
    collector, said = start_with_attacker(tmp, theirs, a, munge_socket, pg_url, monkeypatch)
    collector.__exit__(None, None, None)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # was 0o666: root's chmod followed
    assert target.read_text() == "root's\n"
    assert said == ""  # no socket was ever made there
    assert list(theirs.iterdir()) == []
    warned = [r.getMessage() for r in caplog.records if "no Unix socket" in r.getMessage()]
    assert warned == [
        f"no Unix socket for the hooks at {theirs / 'ingest.sock'} ({theirs} belongs to uid "
        f"{a.pw_uid}, not to root or the collector's user): local hooks use TCP and need MUNGE"
    ]


def test_in_a_sticky_directory_the_socket_cannot_be_swapped(
    pg_url, shared_dir, munge_socket, users, monkeypatch
):
    a, _ = users
    tmp = shared_dir / "socket-sticky"
    tmp.mkdir(mode=0o755)
    target = root_only(tmp)
    sticky = tmp / "tmp"  # like /tmp
    sticky.mkdir()
    sticky.chmod(0o1777)
    collector, said = start_with_attacker(tmp, sticky, a, munge_socket, pg_url, monkeypatch)
    try:
        assert said == "refused: Operation not permitted\n"
        path = sticky / "ingest.sock"
        status = path.lstat()
        assert stat.S_ISSOCK(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o666
        settings = Settings(collector=collector.endpoint, collector_socket=str(path))
        with open_connection(settings, owner_uid=0, timeout=30) as sock:
            assert sock.family == socket.AF_UNIX  # the hooks' way in works
    finally:
        collector.__exit__(None, None, None)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert list(sticky.iterdir()) == []  # removed at stop
