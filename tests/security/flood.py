"""Idle and slow connections held open against a server, as an attacker holds them.

`Flood` keeps `idle` connections that send nothing and `slow` ones that send one byte per
second (of `slow_bytes`, over and over) to one address, from the given loopback source
addresses; a connection the server closes is opened again at the next round (every
`round_s`), so the load stays for as long as the flood runs. It runs on its own thread,
stops by itself after `max_s` seconds and counts what the server closed.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import selectors
import socket
import threading
import time


class Flood:
    """Idle and slow connections to `address`; use as a context manager."""

    def __init__(
        self,
        address: tuple[str, int],
        idle: int,
        slow: int = 0,
        slow_bytes: bytes = b"\0" * 239,
        sources: tuple[str, ...] = ("127.0.0.1",),
        round_s: float = 0.5,
        max_s: float = 300.0,
    ):
        self.address, self.slow_bytes, self.round_s, self.max_s = (
            address, slow_bytes, round_s, max_s)  # fmt: skip
        self._wanted = [("idle", None)] * idle + [("slow", 0)] * slow
        self._sources = itertools.cycle(sources)
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.opened = 0
        self.closed_by_server = 0
        self.open_now = 0

    def __enter__(self) -> Flood:
        self._thread.start()
        deadline = time.monotonic() + 60
        while self.opened < len(self._wanted):
            assert time.monotonic() < deadline, f"flood opened {self.opened} connections only"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def _open(self, kind: str) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind((next(self._sources), 0))
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            return
        self._selector.register(sock, selectors.EVENT_READ, [kind, 0])
        self.opened += 1
        self.open_now += 1

    def _run(self) -> None:
        started = time.monotonic()
        missing = [kind for kind, _ in self._wanted]
        next_round = next_byte = 0.0
        try:
            while not self._stop.is_set() and time.monotonic() - started < self.max_s:
                now = time.monotonic()
                if now >= next_round:
                    for kind in missing:
                        self._open(kind)
                    missing, next_round = [], now + self.round_s
                if now >= next_byte:  # one more byte on every slow connection
                    next_byte = now + 1.0
                    for key in list(self._selector.get_map().values()):
                        if key.data[0] == "slow":
                            i = key.data[1] % len(self.slow_bytes)
                            with contextlib.suppress(OSError):
                                key.fileobj.send(self.slow_bytes[i : i + 1])
                            key.data[1] += 1
                for key, _ in self._selector.select(0.1):
                    try:
                        data = key.fileobj.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:  # closed by the server: open another next round
                        self._selector.unregister(key.fileobj)
                        key.fileobj.close()
                        self.closed_by_server += 1
                        self.open_now -= 1
                        missing.append(key.data[0])
        finally:
            for key in list(self._selector.get_map().values()):
                key.fileobj.close()
            self._selector.close()
