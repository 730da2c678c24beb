"""Shared fixtures: a real embedded PostgreSQL, a real collector, free ports, the hook library.

The suite starts one embedded PostgreSQL (pgserver) for the session in a scratch
directory outside root's home, migrates it with Alembic, and empties the tables before
each test that uses it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from collector.service import BackgroundCollector
from server.app import create_app
from server.http_guard import uvicorn_config
from stacklens.db import make_engine, migrate, start_embedded
from stacklens.paths import EXAMPLES_DIR, LIBRARIES
from stacklens.schema import Base

#: Tables emptied before each test (all but the views and the MPI op names, which the
#: collector syncs).
TABLES = tuple(
    t.name for t in Base.metadata.sorted_tables if t.name != "mpi_ops" and not t.info.get("view")
)


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def route_path(client: TestClient, name: str) -> str:
    """The path of the API route named `name` of the app `client` talks to."""
    app = client.app
    assert isinstance(app, FastAPI), app
    return app.url_path_for(name)


@pytest.fixture(scope="session")
def scratch_root() -> Iterator[Path]:
    """A scratch directory for the session, outside root's home directory."""
    path = Path(tempfile.mkdtemp(prefix="stacklens-test-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def private_node_settings(scratch_root: Path) -> Iterator[None]:
    """Every test, and every process it starts with this environment, uses a collector
    socket, state directory, collector address and HTTP port of this session's own, and
    no database URL: never those of a `stacklens up` running on this node with default
    settings, nor the developer's own deployment (a test that needs others sets them)."""
    private = {
        "STACKLENS_COLLECTOR_SOCKET": str(scratch_root / "ingest.sock"),
        "STACKLENS_STATE_DIR": str(scratch_root / "state"),
        "STACKLENS_COLLECTOR": f"127.0.0.1:{free_port()}",
        "STACKLENS_HTTP_PORT": str(free_port()),
    }
    saved = {k: os.environ.get(k) for k in (*private, "STACKLENS_DATABASE_URL")}
    os.environ.pop("STACKLENS_DATABASE_URL", None)
    os.environ.update(private)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


#: How long a test's HTTP request waits for an answer unless it says otherwise.
HTTP_TIMEOUT_S = 60.0


@pytest.fixture(scope="session", autouse=True)
def patient_http_requests() -> Iterator[None]:
    """httpx's default timeouts (5 s) raised to HTTP_TIMEOUT_S for the session: most tests
    serve the app in a thread of this busy process (`serving`), and under CI's load a plain
    `httpx.get` of a job's overview timed out after 5 s (twice, in different tests). A test
    of timeouts passes its own. httpx takes its default from this one object, copied into
    each client made without a timeout."""
    default = httpx._config.DEFAULT_TIMEOUT_CONFIG
    saved = (default.connect, default.read, default.write, default.pool)
    default.connect = default.read = default.write = default.pool = HTTP_TIMEOUT_S
    yield
    default.connect, default.read, default.write, default.pool = saved


#: How long a browser test's `expect` waits for what a person should see unless it says
#: otherwise (Playwright's default is 5 s).
EXPECT_TIMEOUT_MS = 20_000


@pytest.fixture(scope="session", autouse=True)
def patient_browser_expectations() -> Iterator[None]:
    """Playwright's `expect` waits EXPECT_TIMEOUT_MS by default for the session: under CI's
    load a page's callback round trip took over 5 s (the fabric page's play button kept
    "▶ play" for 5 s after its click). A wait that holds sooner ends sooner."""
    from playwright.sync_api import expect

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture(scope="session")
def pg_server(scratch_root: Path) -> Iterator[str]:
    """URL of a session-wide embedded PostgreSQL, migrated to head."""
    database = start_embedded(scratch_root / "pg")
    migrate(database.url)
    yield database.url
    database.stop()


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """The session database, emptied for this test. A server thread of the test before may
    still be answering its last request: a TRUNCATE that deadlocks with it is tried again
    (PostgreSQL aborted it, not the reader)."""
    for attempt in range(3):
        try:
            with psycopg.connect(pg_server, autocommit=True) as conn:
                conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")
            return pg_server
        except psycopg.errors.DeadlockDetected:
            if attempt == 2:
                raise
            time.sleep(0.5)
    return pg_server


def query(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Run one query and return all rows."""
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
def collector(pg_url: str) -> Iterator[BackgroundCollector]:
    """A collector on a free port writing to the emptied test database (token 'secret')."""
    with BackgroundCollector(pg_url, token="secret") as running:
        yield running


@pytest.fixture
def mpich_abi_dir(tmp_path: Path) -> Path:
    """A directory with libmpi.so.12 -> MPICH's libmpich.so.12, for mpi4py's MPICH ABI
    (mpi4py tests under MPICH)."""
    import ctypes.util

    found = ctypes.util.find_library("mpich")
    assert found, "libmpich is not installed"
    candidates = [Path(d) / found for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib")]
    target = next(p for p in candidates if p.exists())
    link = tmp_path / "abi" / "libmpi.so.12"
    link.parent.mkdir()
    link.symlink_to(target.resolve())
    return link.parent


@pytest.fixture
def control_socket() -> Iterator[Path]:
    """Where a collector of this test serves its control channel (collector/control.py):
    a private directory of its own, with a path short enough for a Unix socket."""
    path = Path(tempfile.mkdtemp(prefix="stacklens-control-", dir="/tmp"))
    yield path / "control.sock"
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def serving(app, host: str = "127.0.0.1", port: int | None = None) -> Iterator[int]:
    """Serves an ASGI app with uvicorn on a thread of this process (its lifespan runs) on
    `port` (default: a free one) until the block ends; yields the port."""
    port = free_port() if port is None else port
    guarded = hasattr(app.state, "http_guard")  # an app of create_app: with its guard
    config = (uvicorn_config if guarded else uvicorn.Config)(app, host, port, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        yield port
    finally:
        server.should_exit = True
        thread.join(20)


@pytest.fixture
def api_client(pg_url: str) -> Iterator[TestClient]:
    """The web API (no dashboard) over the emptied test database, as a test client."""
    engine = make_engine(pg_url)
    app = create_app(engine, fabric_recheck_s=0.0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client
    engine.dispose()


@pytest.fixture(scope="session")
def hook_library() -> Path:
    """The built Open MPI hook library (`make` builds it before the tests)."""
    library = LIBRARIES["openmpi"]
    assert library.is_file(), "run `make -C mpi_pmpi_hooks` first (make test does)"
    return library


@pytest.fixture(scope="session")
def examples_built() -> Path:
    """Directory of the built example programs."""
    build = EXAMPLES_DIR / "build"
    assert (build / "p2p_pattern").is_file(), "run `make -C examples` first (make test does)"
    return build


def mpi_env(**extra: str) -> dict[str, str]:
    """Environment for running Open MPI as root with oversubscription."""
    from stacklens_cli.attach import OPENMPI_ROOT_ENV

    return {**os.environ, **OPENMPI_ROOT_ENV, **extra}


def stacklens_replay(endpoint: str, spool_dir: Path, token: str = "secret"):
    """`stacklens replay SPOOL_DIR` against the collector at endpoint, as an administrator
    runs it (no other STACKLENS_* settings); returns the CompletedProcess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_COLLECTOR=endpoint, STACKLENS_INGEST_TOKEN=token, STACKLENS_INGEST_AUTH="trusted"
    )
    return subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "replay", str(spool_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def stacklens_run(command: list[str], env: dict, timeout: float = 120):
    """`stacklens run -- COMMAND` as a user types it; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "stacklens_cli", "run", "--", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: Headless Chromium as the browser tests run it (Debian's chromium, no network services).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium_page():
    """A Chromium page (Playwright) and the list its console errors are collected into."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page, errors
        browser.close()


def up_environment(pg_url: str, state_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of a `stacklens up` against the test database on free ports (this
    process's, without its STACKLENS_* variables), with further STACKLENS_* `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STACKLENS_")}
    env.update(
        STACKLENS_DATABASE_URL=pg_url,
        STACKLENS_STATE_DIR=str(state_dir),
        STACKLENS_HTTP_PORT=str(free_port()),
        STACKLENS_COLLECTOR=f"127.0.0.1:{free_port()}",
        STACKLENS_INGEST_TOKEN="e2e-token",
        STACKLENS_INGEST_AUTH="trusted",
        STACKLENS_COLLECTOR_SOCKET="off",
        **settings,
    )
    return env


@contextlib.contextmanager
def running_up(
    pg_url: str, state_dir: Path, nofile: int | None = None, **settings: str
) -> Iterator[dict[str, str]]:
    """`stacklens up` (a child process) against the test database on free ports, with
    further STACKLENS_* `settings`, started with an open-file soft limit of `nofile` if
    given; yields its environment plus "base" (the HTTP URL), "pid" and "log" (the file
    its output goes to)."""
    import httpx

    env = up_environment(pg_url, state_dir, **settings)
    state_dir.mkdir(parents=True, exist_ok=True)
    log = state_dir / "up.log"  # a file: a pipe nobody reads could fill and block it
    with log.open("w") as out:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "stacklens_cli", "up"], env=env, stdout=out, stderr=out,
            preexec_fn=None if nofile is None else (
                lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))),
        )  # fmt: skip
    base = f"http://127.0.0.1:{env['STACKLENS_HTTP_PORT']}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "stacklens up did not come up"
            time.sleep(0.1)
        yield {**env, "base": base, "pid": str(proc.pid), "log": str(log)}
    finally:
        proc.terminate()
        proc.wait(20)


def collector_pid(up_pid: str | int) -> int:
    """The process id of the collector process `stacklens up` (process `up_pid`) runs
    (stacklens_cli/collector_process.py); AssertionError if it runs none."""
    children = Path(f"/proc/{up_pid}/task/{up_pid}/children").read_text().split()
    found = [
        int(pid)
        for pid in children
        if b"stacklens_cli.collector_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(found) == 1, (up_pid, children)
    return found[0]


def leftover_processes(state_dir: str) -> list[str]:
    """Live (not zombie) processes the demo started (workload, fabric-sim, ibsim, database):
    their environment names its state directory (other test runs may use the same programs)."""
    mark = f"STACKLENS_STATE_DIR={state_dir}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if mark in env and state != "Z":
            found.append(command)
    return found
