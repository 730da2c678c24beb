"""Another Unix user's attack on a race, as the identity tests stage it: a script that
watches a directory with inotify and, the moment a file it waits for appears or is opened
there, acts (renames, swaps in a symlink) before root's next step.

`start_attacker(user, script, action, *args)` writes `WATCH` followed by `action` (Python
that calls `wait(directory, mask, matches)` and then acts, reading its arguments from
sys.argv) to `script` and runs it as `user`, returning once the watch is in place.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.identity.daemons import as_user

#: The watch every attack starts with: `wait` returns at the first inotify event of `mask`
#: in `directory` whose file name (bytes) `matches`; "watching" is printed once the watch
#: is in place.
WATCH = r"""
import ctypes, os, struct, sys

IN_OPEN, IN_CREATE = 0x20, 0x100


def wait(directory, mask, matches):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0 or libc.inotify_add_watch(fd, directory.encode(), mask) < 0:
        sys.exit("inotify: errno %d" % ctypes.get_errno())
    print("watching", flush=True)
    while True:
        events = os.read(fd, 1 << 16)
        while events:
            _, _, _, length = struct.unpack_from("iIII", events)
            if matches(events[16 : 16 + length].rstrip(b"\0")):
                return
            events = events[16 + length :]

"""


def start_attacker(user: str, script: Path, action: str, *args: str) -> subprocess.Popen[str]:
    """Runs `WATCH` + `action` as `user` with `args` (its stdout a pipe of text) and waits
    until its watch is in place."""
    script.write_text(WATCH + action)
    script.chmod(0o644)
    attacker = subprocess.Popen(
        as_user(user) + ["/usr/bin/python3", str(script), *args], stdout=subprocess.PIPE, text=True
    )
    assert attacker.stdout is not None and attacker.stdout.readline() == "watching\n"
    return attacker
