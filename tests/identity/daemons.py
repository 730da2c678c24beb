"""What the identity tests start and remove: a munged of their own and Unix users.

`munged(dir)` runs MUNGE's daemon as the `munge` user with its own key and socket under
`dir` (every directory above the socket open to all, as munged demands); `unix_user()`
creates a user of this session's own with `useradd -M` and removes it afterwards;
`as_user()` is the argv prefix that runs a command as such a user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def munged(root: Path) -> Iterator[str]:
    """A munged with a fresh 1 KiB key under `root`; yields its socket path."""
    munge = pwd.getpwnam("munge")
    base = root / "munge"
    sock_dir, priv = base / "sock.d", base / "priv"
    for d, mode in ((base, 0o755), (sock_dir, 0o755), (priv, 0o700)):
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(mode)
    for parent in [root, *root.parents]:
        parent.chmod(parent.stat().st_mode | 0o111)  # munged wants every parent executable
    key = priv / "key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    for path in (sock_dir, priv, key):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    sock = sock_dir / "sock"
    command = (f"munged --socket={sock} --key-file={key} --pid-file={priv}/pid "
               f"--log-file={priv}/log --seed-file={priv}/seed")  # fmt: skip
    subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", command], check=True, timeout=30)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "munged did not start"
            time.sleep(0.05)
        yield str(sock)
    finally:
        pid = int((priv / "pid").read_text())
        os.kill(pid, 15)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def unix_user(suffix: str) -> Iterator[pwd.struct_passwd]:
    """A Unix user without a home directory, named `sltest-<pid>-<suffix>` so that test
    sessions running at once on one node never share one, removed afterwards (and the
    users of sessions whose process is gone: a killed run's leftovers)."""
    for stale in pwd.getpwall():
        parts = stale.pw_name.split("-")
        gone = len(parts) == 3 and parts[1].isdigit() and not Path(f"/proc/{parts[1]}").exists()
        if parts[0] == "sltest" and gone:
            subprocess.run(["userdel", stale.pw_name], capture_output=True)
    name = f"sltest-{os.getpid()}-{suffix}"
    subprocess.run(["userdel", name], capture_output=True)  # a leftover of a reused pid
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, timeout=30)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=True, timeout=30)


def as_user(name: str) -> list[str]:
    """argv prefix running a command as user `name` (its uid, gid and groups)."""
    return ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups"]
