"""The collector's control channel (collector/control.py) at its edges: only its user may
connect, an unknown operation or an oversized message is refused with a reason and the
channel keeps serving, and the figures read over it are the service's own."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from collector.control import CollectorFigures, CollectorLink, CollectorUnavailable
from collector.service import BackgroundCollector
from tests.collector.test_ingest import exchange, frame, wait_for


def test_the_channel_refuses_what_it_does_not_know_and_goes_on(pg_url, control_socket):
    with BackgroundCollector(pg_url, token="secret", control_socket=control_socket) as running:
        assert oct(control_socket.stat().st_mode & 0o777) == "0o600"
        link = running.link
        assert link is not None
        with pytest.raises(CollectorUnavailable, match="unknown operation 'drop-tables'"):
            asyncio.run(link._call("drop-tables"))
        with socket.socket(socket.AF_UNIX) as raw:  # a payload over the HTTP body cap
            raw.connect(str(control_socket))
            raw.sendall(struct.pack("<II", 2, (32 << 20) + 1) + b"{}")
            answer = raw.recv(4096)
        assert b'"error": "message over the bounds (2 + 33554433 bytes)"' in answer
        assert exchange(running.address, frame(0), 1) == [(0, 0)]
        # the sender has gone: once the collector has seen it close, nothing is open
        wait_for(lambda: asyncio.run(link.figures()).open_connections == 0)
        figures = asyncio.run(link.figures())
        status = asyncio.run(link.status())
    assert figures == CollectorFigures(
        connections=1, frames_received=1, rejected={}, frames_committed=1, frames_duplicate=0,
        batches=1, write_errors=0, store_failed=0, rollups_quarantined=0,
        rows={"p2p_deltas": 1, "op_deltas": 1}, names_folded={}, queue_depth=0,
        buffered_bytes=0, open_connections=0, dropped_connections={},
    )  # fmt: skip
    assert (status.port, status.auth, status.token) == (running.service.port, "trusted", "secret")
    with pytest.raises(CollectorUnavailable, match="no answer on"):  # stopped: no socket
        asyncio.run(CollectorLink(control_socket).figures())
