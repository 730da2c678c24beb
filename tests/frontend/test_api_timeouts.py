# tests/frontend/test_api_timeouts.py — what the dashboard says when the API is slow or gone.
"""The dashboard's API client tells a server that took the request and did not answer in
time (busy) from one it cannot reach at all: a person then waits, or starts the server."""

from __future__ import annotations

import socket
import threading

import pytest

from frontend.api import ApiError, StacklensApi
from tests.conftest import free_port


def test_a_server_that_does_not_answer_in_time_is_busy_not_unreachable():
    with socket.socket() as listener:  # accepts (the kernel's backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        held: list[socket.socket] = []
        taker = threading.Thread(target=lambda: held.append(listener.accept()[0]), daemon=True)
        taker.start()
        with pytest.raises(ApiError) as raised:
            StacklensApi(f"http://127.0.0.1:{port}", timeout_s=0.5).jobs()
        for conn in held:
            conn.close()
    assert str(raised.value) == (
        "stacklens server did not answer GET /api/jobs within 0.5 s (busy?)"
    )
    assert raised.value.status is None


def test_no_server_at_all_is_unreachable():
    port = free_port()
    with pytest.raises(ApiError) as raised:
        StacklensApi(f"http://127.0.0.1:{port}").jobs()
    assert str(raised.value).startswith(
        f"stacklens server unreachable: http://127.0.0.1:{port}/api/jobs: "
    )
