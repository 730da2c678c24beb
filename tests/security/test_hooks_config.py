"""The hook library's side of issue #12: a malformed STACKLENS_COLLECTOR or token is one
clear warning and nothing sent (it used to fall back to the default address silently),
the token is never shown; ids and paths longer than their wire fields (or ids with
control characters) are stored without collisions, never cut silently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

from tests.conftest import mpi_env, query

#: Writes 4 KiB to each path given (a standalone program the hooks count).
WRITER = "import sys\nfor p in sys.argv[1:]:\n    open(p, 'wb').write(b'x' * 4096)\n"

#: Run inside a network namespace of its own: listens on the default collector address
#: 127.0.0.1:7451 (free there), runs WRITER under the hooks with the environment given as
#: JSON in argv[1], and prints how many connections reached the listener and the stderr.
PROBE = textwrap.dedent(
    """
    import json, socket, subprocess, sys
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    listener = socket.create_server(("127.0.0.1", 7451))
    listener.settimeout(3)
    env = json.loads(sys.argv[1])
    run = subprocess.run([sys.executable, "-c", sys.argv[2], sys.argv[3]], env=env,
                         capture_output=True, text=True, timeout=60)
    connections = 0
    try:
        while True:
            listener.accept()[0].close()
            connections += 1
    except TimeoutError:
        pass
    print(json.dumps({"connections": connections, "stderr": run.stderr, "rc": run.returncode}))
    """
)


def probe(hook_library, tmp_path, **settings: str) -> dict:
    """WRITER under the hooks with `settings`, in a network namespace where the default
    collector address listens: what reached it and what the program printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        LD_PRELOAD=str(hook_library),
        STACKLENS_INTERVAL_MS="50",
        STACKLENS_SPOOL_DIR="off",
        STACKLENS_JOB_ID="probe",
        STACKLENS_COLLECTOR_SOCKET="off",
        **settings,
    )  # not a node's running collector
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", PROBE, json.dumps(env), WRITER,
         str(tmp_path / "out.bin")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_malformed_collector_address_sends_nothing(hook_library, tmp_path):
    control = probe(hook_library, tmp_path, STACKLENS_COLLECTOR="127.0.0.1:7451")
    assert control["connections"] >= 1 and control["rc"] == 0  # the probe sees a sender
    typo = probe(hook_library, tmp_path, STACKLENS_COLLECTOR="127.0.0.1:74S1")
    assert typo["connections"] == 0 and typo["rc"] == 0
    assert typo["stderr"].splitlines() == [
        "stacklens: STACKLENS_COLLECTOR='127.0.0.1:74S1' is not host:port; nothing is sent "
        "(fix it to profile this program)"
    ]


def test_a_malformed_token_sends_nothing_and_is_never_shown(hook_library, tmp_path):
    secret = "s3cr3t-T0ken with a space"
    bad = probe(hook_library, tmp_path, STACKLENS_COLLECTOR="127.0.0.1:7451",
                STACKLENS_INGEST_TOKEN=secret)  # fmt: skip
    assert bad["connections"] == 0
    assert bad["stderr"].splitlines() == [
        "stacklens: STACKLENS_INGEST_TOKEN must be at most 64 visible ASCII characters "
        "(no spaces); nothing is sent"
    ]
    too_long = probe(hook_library, tmp_path, STACKLENS_COLLECTOR="127.0.0.1:7451",
                     STACKLENS_INGEST_TOKEN="x" * 65)  # fmt: skip
    assert too_long["connections"] == 0
    exactly_64 = probe(hook_library, tmp_path, STACKLENS_COLLECTOR="127.0.0.1:7451",
                       STACKLENS_INGEST_TOKEN="x" * 64)  # fmt: skip
    assert exactly_64["connections"] >= 1  # (the probe acknowledges nothing: a warning)
    assert "STACKLENS_INGEST_TOKEN" not in exactly_64["stderr"]


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a (what the hooks put after '~' in a shortened value)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shortened(value: str, field: int, readable: str | None = None) -> str:
    """How the hooks store a value too long for (or not allowed in) a field of `field`
    bytes: its readable form cut to leave room for '~' and 16 hex digits of the hash."""
    return (readable or value)[: field - 17] + f"~{fnv1a64(value.encode()):016x}"


def run_writer(collector, hook_library, tmp_path, job: str, paths, **extra) -> None:
    env = mpi_env(LD_PRELOAD=str(hook_library), STACKLENS_COLLECTOR=collector.endpoint,
                  STACKLENS_INGEST_TOKEN="secret", STACKLENS_INGEST_AUTH="trusted",
                  STACKLENS_INTERVAL_MS="50",
                  STACKLENS_SPOOL_DIR="off", STACKLENS_JOB_ID=job, **extra)  # fmt: skip
    result = subprocess.run([sys.executable, "-c", WRITER, *map(str, paths)], env=env,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0 and "stacklens:" not in result.stderr, result.stderr


def test_long_ids_and_paths_never_merge(collector, pg_url, hook_library, tmp_path):
    base = "J" * 70 + uuid.uuid4().hex[:6]
    deep = tmp_path / ("d" * 200)
    deep.mkdir()
    paths = [deep / ("f" * 60 + "-one"), deep / ("f" * 60 + "-two")]  # the same 256 bytes
    assert len(str(paths[0])) > 256 and str(paths[0])[:256] == str(paths[1])[:256]
    for suffix in ("a", "b"):  # ids alike in their first 64 bytes
        run_writer(collector, hook_library, tmp_path, base + suffix, paths,
                   STACKLENS_HOST="rack1\nnode7")  # fmt: skip
    rows = query(pg_url, "SELECT job_key, host FROM jobs JOIN ranks ON job_id = jobs.id")
    seen = set()
    for job_key, host in rows:
        seen |= {s for s in "ab" if job_key == shortened(f"{base}{s}", 64)}
        assert host == shortened("rack1\nnode7", 64, readable="rack1_node7")
    assert len(rows) == 2 and seen == {"a", "b"}, rows
    stored = {p for (p,) in query(pg_url, "SELECT DISTINCT path FROM io_deltas")}
    assert {shortened(str(p), 256) for p in paths} <= stored
