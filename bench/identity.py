"""Cost of proven senders (docs/identity.md): MUNGE credentials and connection proofs.

Starts a munged of its own (as the tests do; run as root) and an embedded PostgreSQL with
a collector in proven mode, then prints per-operation times (median of N):

* a credential encoded and decoded in-process through libmunge (stacklens/munge.py,
  what the collector does) against the `munge` / `unmunge` tools (fork + exec each);
* a whole proven connection, hello to final welcome (stacklens/sender.py, the same
  exchange as the hook library's proof.c): over TCP with MUNGE both ways, and over the
  collector's Unix socket (SO_PEERCRED), against a trusted-mode TCP connect.

    .venv/bin/python -m bench.identity [--n 200]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from collector.service import BackgroundCollector
from stacklens import munge
from stacklens.db import migrate, start_embedded
from stacklens.sender import open_connection
from stacklens.settings import Settings
from tests.identity.daemons import munged


def timed(n: int, fn: Callable[[], object]) -> float:
    """Median wall time of `fn` over n calls, in ms."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _connect_and_close(settings: Settings) -> None:
    """Open a proven (or trusted) connection to the collector and close it."""
    open_connection(settings, 0, 30).close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="repetitions per measure")
    n = parser.parse_args().n
    root = Path(tempfile.mkdtemp(prefix="stacklens-bench-identity-", dir="/tmp"))
    root.chmod(0o755)
    with munged(root) as sock:
        payload = bytes(16)
        print(f"repetitions: {n} (median per operation)")
        inproc = timed(n, lambda: munge.decode(munge.encode(payload, sock), sock))
        print(f"libmunge in-process encode + decode: {inproc:.3f} ms")

        def tools() -> None:
            cred = subprocess.run(["munge", "-S", sock], input=payload, capture_output=True,
                                  check=True).stdout  # fmt: skip
            subprocess.run(["unmunge", "-S", sock], input=cred, capture_output=True, check=True)

        print(f"munge + unmunge tools:               {timed(max(n // 4, 10), tools):.3f} ms")
        database = start_embedded(root / "pg")
        url = database.url
        migrate(url)
        unix = str(root / "ingest.sock")
        with BackgroundCollector(url, ingest_auth="proven", collector_socket=unix,
                                 munge_socket=sock) as collector:  # fmt: skip
            tcp = Settings(collector=collector.endpoint, collector_socket="off",
                           munge_socket=sock)  # fmt: skip
            local = Settings(collector=collector.endpoint, collector_socket=unix)
            trusted = Settings(collector=collector.endpoint, ingest_auth="trusted")
            for name, settings in (("proven, TCP + MUNGE both ways", tcp),
                                   ("proven, Unix socket (SO_PEERCRED)", local),
                                   ("trusted, TCP connect only", trusted)):  # fmt: skip
                ms = timed(n, functools.partial(_connect_and_close, settings))
                print(f"connection {name:34s} {ms:.3f} ms")
    subprocess.run(["rm", "-rf", str(root)], check=True)


if __name__ == "__main__":
    main()
