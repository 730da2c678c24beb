"""`stacklens up`'s collector in a process of its own, started and supervised by `up`.

The collector scans frames, parses HTTP ingest batches and encodes COPY in its own
interpreter, so no ingest load holds the API's answers back (one interpreter lock each).
`up` (stacklens_cli/services.py) holds a CollectorProcess: it starts
`python -m stacklens_cli.collector_process` in a session of its own (a Ctrl-C at the
terminal reaches only `up`, which stops everything in order), writes it one line on its
standard input (the settings, the database URL, the connection limits and the control
socket's path, as JSON: nothing of it on a command line other users can read) and keeps
that pipe open: the child stops when it closes, so it never outlives `up`, even one killed
by SIGKILL. The child runs a CollectorService with its control channel
(collector/control.py) on a socket in a directory only this user may enter; `up` awaits
its `status` answer before it says it listens, then reads its figures (/metrics) and hands
it the HTTP ingest's batches through it.

Supervision: a child that ends while `up` runs is reported on standard error with how it
ended and started again a second later (hooks resend what was not acknowledged, and
nothing acknowledged is lost: acknowledgements follow COMMIT); /metrics counts it in
`stacklens_collector_restarts`. A child that does not get ready, at the start or after a
restart, ends `up` with exit status 1 (CollectorFailed). On SIGINT/SIGTERM `up` stops the
child (SIGTERM; SIGKILL after STOP_TIMEOUT_S) before the database.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from collector.control import CollectorLink, CollectorStatus, CollectorUnavailable
from stacklens.connguard import ConnectionLimits
from stacklens.settings import Settings

#: Seconds a collector process has to answer on its control socket after it starts.
READY_TIMEOUT_S = 60.0
#: Seconds a collector process has to stop after SIGTERM before it is killed.
STOP_TIMEOUT_S = 20.0
#: Seconds between a collector process's end and its restart.
RESTART_DELAY_S = 1.0
#: How much nicer than `up` the collector process runs: when every CPU of the node is
#: busy, the API's short answers get the CPU first, and ingest (batch work, held back by
#: acknowledgements: the hooks wait or spool) keeps about a quarter of a contended CPU.
NICENESS = 5


#: The control directory's name prefix (mkdtemp adds 8 characters) and the socket's name.
_PREFIX, _SOCKET = "stacklens-collector-", "control.sock"
#: The longest path a Unix socket may have (sun_path holds 108 bytes with its NUL).
_MAX_SOCKET_PATH = 107


def _control_parent() -> str:
    """Where the control directory goes: the temporary directory (TMPDIR), or /tmp when a
    socket under TMPDIR would be too long to bind (a batch system's TMPDIR can be deep)."""
    parent = tempfile.gettempdir()
    if len(f"{parent}/{_PREFIX}12345678/{_SOCKET}".encode()) > _MAX_SOCKET_PATH:
        return "/tmp"
    return parent


class CollectorFailed(Exception):
    """The collector process did not get ready (the reason is the message)."""


def ending(returncode: int) -> str:
    """How a process ended, in words: its exit status or the signal that ended it."""
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


class CollectorProcess:
    """The collector of `up` in a child process: start, supervise, stop (see the module's
    doc). `link` is its control channel, the same across restarts."""

    def __init__(self, settings: Settings, database_url: str, limits: ConnectionLimits):
        self.settings, self.database_url, self.limits = settings, database_url, limits
        self._dir = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=_control_parent()))  # mode 0700
        self.link = CollectorLink(self._dir / _SOCKET)
        self.proc: asyncio.subprocess.Process | None = None
        self._stopping = False

    async def start(self) -> CollectorStatus:
        """Start a collector process and wait until it answers on its control socket;
        CollectorFailed if it ends first or does not answer in READY_TIMEOUT_S."""
        proc = self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "stacklens_cli.collector_process",
            stdin=asyncio.subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        assert proc.stdin is not None
        orders = {
            "settings": self.settings.model_dump(mode="json"),
            "database_url": self.database_url,
            "limits": dataclasses.asdict(self.limits),
            "control_socket": str(self.link.path),
        }
        proc.stdin.write(json.dumps(orders).encode() + b"\n")
        await proc.stdin.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        while proc.returncode is None:
            try:
                status = await self.link.status(refresh=True)
                if status.pid == proc.pid:
                    return status
            except CollectorUnavailable:
                pass
            if loop.time() > deadline:
                await self._end(proc)
                raise CollectorFailed(
                    f"the collector process did not answer in {READY_TIMEOUT_S:g} s"
                )
            await asyncio.sleep(0.05)
        raise CollectorFailed(
            f"the collector process ended ({ending(proc.returncode)}) before it was ready"
        )

    async def supervise(self) -> None:
        """Until `stop`: start the collector process again whenever it ends (said on
        standard error); CollectorFailed if a restarted one does not get ready."""
        while True:
            assert self.proc is not None, "start() first"
            code = await self.proc.wait()
            if self._stopping:
                return
            print(f"stacklens up: collector: its process ended ({ending(code)}); starting "
                  "it again", file=sys.stderr, flush=True)  # fmt: skip
            await asyncio.sleep(RESTART_DELAY_S)
            status = await self.start()
            self.link.restarts += 1
            print(f"stacklens up: collector: listening again on {self.settings.collector_host}:"
                  f"{status.port} (process {status.pid})", file=sys.stderr, flush=True)  # fmt: skip

    async def stop(self) -> None:
        """Stop the collector process (it finishes what it is writing) and remove its
        control directory."""
        self._stopping = True
        if self.proc is not None:
            await self._end(self.proc)
        shutil.rmtree(self._dir, ignore_errors=True)

    @staticmethod
    async def _end(proc: asyncio.subprocess.Process) -> None:
        """SIGTERM `proc`, SIGKILL it after STOP_TIMEOUT_S, and reap it."""
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
        await proc.wait()


class _Lifeline(asyncio.Protocol):
    """The read end of the pipe from `up`: its end (`up` gone) sets `gone`."""

    def __init__(self, gone: asyncio.Event):
        self.gone = gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone.set()


async def _run(orders: dict) -> None:
    """The child's life: the collector with its control channel, until SIGTERM, SIGINT
    or the end of standard input."""
    from collector.service import CollectorService

    settings = Settings.model_validate(orders["settings"])
    collector = CollectorService(
        orders["database_url"], settings, ConnectionLimits(**orders["limits"]),
        control_socket=Path(orders["control_socket"]),
    )  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await loop.connect_read_pipe(lambda: _Lifeline(stop), sys.stdin)
    await collector.start()
    try:
        await stop.wait()
    finally:
        await collector.stop()


def main() -> int:
    """Entry point of the collector process: its orders are the first line of standard
    input (see the module's doc)."""
    import uvloop

    from stacklens_cli import configure_logging

    configure_logging()
    os.nice(NICENESS)
    orders = json.loads(sys.stdin.buffer.readline())
    try:
        uvloop.run(_run(orders))
    except OSError as exc:  # a port or socket it cannot listen on: one line, `up` goes on
        print(f"stacklens up: collector: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
